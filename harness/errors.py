"""Errors a user can cause. The CLI prints their message without a traceback and exits with status 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


class HarnessError(Exception):
    """Base class for every error caused by input the user can change."""


class UnknownNameError(HarnessError):
    """A model, task, option or component name that nothing registered."""


class DuplicateNameError(HarnessError):
    """Two plugins registered the same name."""


class InvalidOptionError(HarnessError):
    """An option value that is not allowed."""


class DataFileError(HarnessError):
    """A data file that is missing or malformed."""


class MissingDataError(DataFileError):
    """A dataset that is not available locally; the message says how to get it."""


class IncompatibleError(HarnessError):
    """A model/task/training-data combination that cannot run."""


def close_matches_hint(name: str, candidates: Iterable[str]) -> str:
    """' Did you mean: a, b?' or '' when nothing is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""


def unknown_name(kind: str, name: str, candidates: Iterable[str]) -> UnknownNameError:
    candidates = sorted(set(candidates))
    return UnknownNameError(
        f"unknown {kind} {name!r}.{close_matches_hint(name, candidates)} "
        f"Known {kind}s: {', '.join(candidates) or '(none)'}. `harness list` shows them all."
    )


def invalid_choice(
    option: str, value: object, allowed: Iterable[object], synonyms: Mapping[str, str] | None = None
) -> InvalidOptionError:
    """The error for ``value`` of ``option`` not among ``allowed``: it lists them and suggests the closest, or the
    allowed value ``synonyms`` gives for what users call it otherwise (``gpu`` -> ``cuda``), which spelling alone
    would not find."""
    allowed = [str(a) for a in allowed]
    hint = close_matches_hint(str(value), allowed) if isinstance(value, str) and value not in allowed else ""
    if isinstance(value, str) and synonyms and value in synonyms:
        hint = f" Did you mean: {synonyms[value]}?"
    return InvalidOptionError(f"invalid value {value!r} for {option}; allowed values: {', '.join(allowed)}.{hint}")


def data_error(path: object, line: int | None, problem: str) -> DataFileError:
    """The error for a bad data file: ``path:line: problem`` (``line`` None for the file as a whole)."""
    where = f"{path}:{line}" if line is not None else f"{path}"
    return DataFileError(f"{where}: {problem}")
