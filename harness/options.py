"""Typed, validated options for models and tasks (``name:key=value,key=value`` specs; the text is read by
harness.spec_grammar, the values are checked here)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidOptionError, close_matches_hint, invalid_choice
from .spec_grammar import parse_spec_text  # noqa: F401  (the grammar's home is spec_grammar; kept importable here)


@dataclass(frozen=True)
class Option:
    """One option a model or task accepts."""

    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    type: type | None = None  # inferred from the default when None
    # False for an option added after specs using its plugin were stored: at its default value it stays out of the
    # spec identity (and so out of the hash), so those specs keep their hashes and stored results.
    hash_default: bool = True
    # The numeric range of the value as an interval, e.g. "(0, inf)" (positive), "[0, 1)" or "[1, inf)"; checked when
    # the spec is resolved (at plan time, so `harness validate` refuses `be:lr=-1` rather than training failing
    # mid-matrix). Not part of the spec identity.
    bounds: str | None = None

    def __post_init__(self) -> None:
        if self.bounds is not None:
            parse_bounds(self.bounds)  # a malformed interval is a bug in the plugin: fail when it registers

    # With hash_default=False: at its default the option still enters the identity when hash_when(options) is true
    # (a default whose meaning changed for some settings: those specs get new hashes, the others keep theirs).
    hash_when: Callable[[Mapping[str, Any]], bool] | None = None
    # The value may name a local file or folder (a model folder, a data file): the content checksum of what it names
    # is part of the spec identity too (harness.fingerprint.path_content), so replacing the files at the same path is
    # never answered from the store. A value that names nothing here (a hub id, "") adds nothing.
    path: bool = False

    def parse(self, owner: str, key: str, raw: Any) -> Any:
        wanted = self.type or (type(self.default) if self.default is not None else str)
        value = raw
        if isinstance(raw, str) and wanted is not str:
            try:
                if wanted is bool:
                    lowered = raw.lower()
                    if lowered not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError(raw)
                    value = lowered in ("true", "1", "yes")
                else:
                    value = wanted(raw)
            except ValueError:
                raise InvalidOptionError(
                    f"option {key!r} of {owner} expects a {wanted.__name__}, got {raw!r}."
                ) from None
        if self.choices is not None and value not in self.choices:
            raise invalid_choice(f"option {key!r} of {owner}", value, self.choices)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = range_problem(value, self.bounds)
            if problem:
                raise InvalidOptionError(f"option {key!r} of {owner} is {value!r}; {problem}.")
        return value


def parse_bounds(bounds: str) -> tuple[float, bool, float, bool]:
    """``"(0, 1]"`` -> (low, low included, high, high included); ``inf`` / ``-inf`` for no limit."""
    text = bounds.strip()
    try:
        if text[0] not in "([" or text[-1] not in ")]":
            raise ValueError(text)
        low_text, high_text = text[1:-1].split(",")
        return float(low_text), text[0] == "[", float(high_text), text[-1] == "]"
    except (ValueError, IndexError):
        raise ValueError(f"option bounds {bounds!r}: write an interval such as (0, inf) or [0, 1]") from None


def range_problem(value: float, bounds: str | None) -> str | None:
    """Why ``value`` is outside ``bounds`` (or not a finite number), or None."""
    if not math.isfinite(value):
        return "give a finite number"
    if bounds is None:
        return None
    low, low_included, high, high_included = parse_bounds(bounds)
    below = value < low or (value == low and not low_included)
    above = value > high or (value == high and not high_included)
    if below or above:
        return f"it must lie in {bounds.strip()}"
    return None


def resolve_options(owner: str, declared: Mapping[str, Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults merged with validated user values; unknown keys are an error listing the allowed ones."""
    resolved = {key: option.default for key, option in declared.items()}
    for key, raw in given.items():
        if key not in declared:
            allowed = ", ".join(sorted(declared)) or "(none)"
            raise InvalidOptionError(
                f"{owner} has no option {key!r}.{close_matches_hint(key, declared)} Allowed options: {allowed}."
            )
        resolved[key] = declared[key].parse(owner, key, raw)
    return resolved


def format_options(options: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
    """``k=v,k=v`` of the options that differ from their defaults, sorted for stable names."""
    defaults = defaults or {}
    items = [(k, v) for k, v in sorted(options.items()) if k not in defaults or defaults[k] != v]
    return ",".join(f"{k}={v}" for k, v in items)


def describe_options(declared: Mapping[str, Option]) -> Iterable[str]:
    for key, option in sorted(declared.items()):
        choices = f" (one of: {', '.join(map(str, option.choices))})" if option.choices else ""
        choices += f" (in {option.bounds})" if option.bounds else ""
        yield f"{key}={option.default}{choices}  {option.help}".rstrip()
