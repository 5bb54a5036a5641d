"""The one grammar of specs: how text names models, tasks and their options.

- A spec is ``name`` or ``name:key=value,key=value`` (:func:`parse_spec_text`).
- A list of specs is comma-separated; a piece holding ``key=value`` continues the options of the spec before it
  (:func:`split_spec_list`: ``be:teacher=cbe,sampler=kde,ce`` is two specs).
- A task of a registered task namespace is ``NAMESPACE:member`` or ``NAMESPACE:member:key=value,...``; once resolved
  its own name is ``NAMESPACE.member`` (:func:`split_task_text`, :func:`namespaced_name`). Which prefixes are
  namespaces is the registry's knowledge; this module only reads text.

Everything that reads a spec (the CLI, the registry, resolved specs, matrix files) calls these functions, so the
grammar and its error messages live here only.
"""

from __future__ import annotations

from collections.abc import Container

from .errors import InvalidOptionError


def split_spec_list(text: str | None) -> list[str]:
    """Comma-separated names; commas inside ``name:k=v,k=v`` options are kept with their spec when the next
    item contains '=' (it is an option, not a name)."""
    if not text:
        return []
    items: list[str] = []
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        # "key=value" continues the previous spec's options; "name" or "name:key=value" starts a new spec.
        continues = "=" in piece and ":" not in piece.split("=", 1)[0]
        if items and continues and ":" in items[-1]:
            items[-1] += "," + piece
        else:
            items.append(piece)
    return items


def parse_spec_text(text: str) -> tuple[str, dict[str, str]]:
    """Split ``name:key=value,key=value`` into the name and raw option strings."""
    text = text.strip()
    name, _, rest = text.partition(":")
    return name.strip(), _parse_options(rest, text) if rest else {}


def _parse_options(rest: str, text: str) -> dict[str, str]:
    """``key=value,key=value`` (the part after the name) -> raw option strings; ``text`` is quoted in errors."""
    options: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidOptionError(
                f"cannot read option {item!r} in {text!r}; write options as name:key=value,key=value."
            )
        if key.strip() in options:  # the last value would win silently
            raise InvalidOptionError(
                f"option {key.strip()!r} is given twice in {text!r} ({options[key.strip()]!r} and "
                f"{value.strip()!r}); give it once."
            )
        options[key.strip()] = value.strip()
    return options


def split_task_text(text: str, namespaces: Container[str]) -> tuple[str, dict[str, str]]:
    """``name:key=value,...`` -> (name, raw options); for a task namespace in ``namespaces`` the name keeps its
    prefix: ``mteb:STS22`` -> ("mteb:STS22", {}), ``beir:scifact:k=5`` -> ("beir:scifact", {"k": "5"})."""
    prefix, colon, rest = text.strip().partition(":")
    if colon and prefix.strip() in namespaces:
        member, _, options = rest.partition(":")
        return f"{prefix.strip()}:{member.strip()}", (parse_spec_text(f"_:{options}")[1] if options else {})
    return parse_spec_text(text)


def namespaced_name(name: str, namespaces: Container[str]) -> tuple[str, str] | None:
    """(namespace, member) of ``NAMESPACE:member`` or of ``NAMESPACE.member`` (the form resolved names take, as
    stored in records); None when ``name`` has no prefix in ``namespaces``."""
    prefix, colon, member = name.partition(":")
    if not colon:
        prefix, colon, member = name.partition(".")
    if not colon or prefix not in namespaces:
        return None
    return prefix, member
