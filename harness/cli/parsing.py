"""What every command's parser shares: the parser class (no abbreviated options, one-line errors that name the
closest option), a command's help with its examples, and the options of the executors.

Each command module builds its own parser with ``add_parser(commands)`` (harness/cli/parser.py lists them). Nothing
here imports torch: `harness --help` and `harness run --help` load only the command line and the executors' plugins
(harness.registry.executor_registry).
"""

from __future__ import annotations

import argparse
import difflib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .common import DEFAULT_RESULTS

logger = logging.getLogger(__name__)

EXAMPLES_HEADING = "examples:"


class _HelpFormatter(argparse.HelpFormatter):
    """Examples kept as written (the description is wrapped); the usage line names the positional arguments and says
    ``[options]`` for the rest (the groups below list them), instead of a paragraph of every flag."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES_HEADING):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any) -> str:
        if usage is None:
            positionals = [action for action in actions if not action.option_strings]
            usage = " ".join(filter(None, (self._prog, "[options]", self._format_actions_usage(positionals, groups))))
        return super()._format_usage(usage, actions, groups, prefix)


class HarnessParser(argparse.ArgumentParser):
    """An argument parser that takes no abbreviation of a long option (``--task`` is not ``--tasks``) and says what
    went wrong in one ``error:`` line, naming the closest option of the command for one it does not know."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:  # a command's parser sees its own arguments: name the closest of its options
            self.error(self.unknown_text(extras))
        return namespace, extras

    def unknown_text(self, extras: Sequence[str]) -> str:
        options = [extra for extra in extras if extra.startswith("-") and extra != "-"]
        if not options:
            return f"unexpected argument {' '.join(extras)!r}"
        flag = options[0].partition("=")[0]
        known = sorted(option for option in self._option_string_actions if option.startswith("--"))
        match = difflib.get_close_matches(flag, known, n=1, cutoff=0.7)
        return f"unknown option {flag}" + (f"; did you mean {match[0]}?" if match else "")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            listed = [choice.dest for choice in action._choices_actions]  # the commands `harness --help` lists
            match = difflib.get_close_matches(value, listed, n=1, cutoff=0.6)
            raise argparse.ArgumentError(
                None,
                f"unknown command {value!r}; "
                + (f"did you mean {match[0]}?" if match else f"the commands are {', '.join(listed)}"),
            )
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def add_command(
    commands: Any, name: str, summary: str, examples: Sequence[str] = (), hidden: bool = False, **kwargs: Any
) -> HarnessParser:
    """A command's parser: ``summary`` is its line in `harness --help` and the start of its own help, ``examples``
    close its help; a ``hidden`` command (one the harness runs itself) is left out of `harness --help`."""
    epilog = EXAMPLES_HEADING + "\n" + "\n".join(f"  {example}" for example in examples) if examples else None
    listing = {} if hidden else {"help": summary}
    return commands.add_parser(name, description=summary, epilog=epilog, **listing, **kwargs)


def add_results_option(parser: Any, help: str, **kwargs: Any) -> None:
    """``--results``: the store a command reads or writes; ``help`` says which and its default."""
    parser.add_argument("--results", type=Path, default=None, help=help, **kwargs)


WORKING_STORE = f"default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR"
DATA_DIR_HELP = "folder with datasets (or HARNESS_DATA_DIR)"


def add_data_dir_option(parser: Any, help: str = DATA_DIR_HELP) -> None:
    """``--data-dir``: the datasets a command reads (or downloads into); ``help`` says which and its default."""
    parser.add_argument("--data-dir", type=Path, default=None, help=help)


def add_executor_options(parser: argparse.ArgumentParser, group: Any, executor_help: str) -> None:
    """``--executor`` (into ``group``) and one group per executor with the options its component declares (every
    executor's, read from the executors' plugins: harness.executors.executor_names)."""
    from ..executors import executor_names
    from ..executors.builtin import add_default_executor
    from ..registry import executor_registry

    registry = add_default_executor(executor_registry())
    names = executor_names(registry)
    described = "; ".join(f"{name}: {registry.components[('executor', name)].description}" for name in names)
    group.add_argument("--executor", default="local", help=f"{executor_help}, default local; {described}")
    for name in names:
        factory = registry.component("executor", name)
        if not factory.options:
            continue
        options = parser.add_argument_group(f"with --executor {name}")
        for option in factory.options:
            if option.flag in parser._option_string_actions:  # a flag another executor or the command took
                logger.warning(
                    "executor %r (%s) declares %s, which is taken; the option is left out",
                    name,
                    registry.package_of("executor", name),
                    option.flag,
                )
                continue
            options.add_argument(
                option.flag,
                dest=option.dest,
                default=None,  # None: not given (the executor's own default applies), so a stray one is refused
                type=option.type,
                action="append" if option.repeatable else "store",
                metavar=option.metavar or ("N" if option.type in (int, float) else "VALUE"),
                help=option.help.replace("%", "%%"),
            )
