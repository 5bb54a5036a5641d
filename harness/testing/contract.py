"""How the contract checks report: :class:`ContractCheckError` listing every problem found, one per line; part of the
test kit :mod:`harness.testing`."""

from __future__ import annotations


class ContractCheckError(AssertionError):
    """A plugin breaks the plugin contract; the message lists every problem found, one per line."""


def _fail(owner: str, problems: list[str]) -> None:
    if problems:
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n" + "\n".join(f"- {p}" for p in problems))


def _describe_exception(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
