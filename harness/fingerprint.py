"""The content identity of a local model folder (a ``--backbone ./my-model``): a sha256 over its weight, config and
tokenizer files, so that replacing the files of a folder changes the spec hash of every model built on it, and so its
results and checkpoints are recomputed rather than served.

Hashing a few hundred MB takes a second or two, so each file's sha256 is cached by its size, modification time,
status-change time and inode: in this process, and (when the caller names a cache folder, the runner names the
store's ``cache/``) in ``backbone-contents.json`` there, so a re-run hashes nothing. A file of which any of these
changed is hashed again (the status-change time cannot be set back, so a file copied in with its old modification
time, ``cp -p`` or ``rsync -a``, is hashed too). ``backbone-contents.json`` is a checksummed cache entry
(:func:`harness.files.read_cache_entry`): an edited or damaged one is not trusted, every file is hashed again
Hidden files and folders (``.git``, ``.cache``) and Markdown files (model cards) are not part of the
identity: they do not change what the model computes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from .files import read_cache_entry, write_cache_entry
from .store_files import sha256_file

logger = logging.getLogger(__name__)

CACHE_FILE = "backbone-contents.json"
_IGNORED_SUFFIXES = (".md",)
_memo: dict[tuple, str] = {}
_memo_lock = threading.Lock()


def local_model_folder(name: str) -> Path | None:
    """The folder ``name`` names on this machine, or None (a hub id, or a path that does not exist)."""
    try:
        path = Path(name).expanduser()
        return path if path.is_dir() else None
    except (OSError, ValueError):
        return None


def path_content(value: Any, cache_dir: Path | str | None = None) -> str | None:
    """The content checksum of the local file or folder the option value ``value`` names (a folder: as
    :func:`folder_fingerprint`; a file: its sha256), or None when it names none (a hub id, an empty value, not a
    string). A FIFO or device is no content: None."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        path = Path(value).expanduser()
        if path.is_dir():
            return folder_fingerprint(path, cache_dir)
        if path.is_file():
            return _sha256(path)
    except (OSError, ValueError):
        return None
    return None


def _content_files(folder: Path) -> list[tuple[str, Path, list[int]]]:
    """``(relative path, path, [size, mtime_ns, ctime_ns, inode])`` of every file that makes up the model, sorted."""
    found = []
    for directory, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in files:
            if name.startswith(".") or name.lower().endswith(_IGNORED_SUFFIXES):
                continue
            path = Path(directory) / name
            try:
                status = path.stat()  # follows links: a hub cache snapshot links to its blobs
            except OSError:
                continue
            found.append(
                (
                    path.relative_to(folder).as_posix(),
                    path,
                    [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino],
                )
            )
    return sorted(found)


_sha256 = sha256_file  # one file hasher (harness.files); a module name of its own so tests can count calls


def stable_hash(payload: Any, length: int = 64) -> str:
    """The first ``length`` hex digits of the sha256 of ``payload`` as compact, key-sorted JSON (other values as
    ``str``): spec hashes, cache keys and config hashes, each the same for the same payload."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def folder_fingerprint(folder: Path | str, cache_dir: Path | str | None = None) -> str:
    """sha256 over the relative path and sha256 of every file of ``folder`` (see the module docstring)."""
    folder = Path(folder).expanduser()
    files = _content_files(folder)
    real = os.path.realpath(folder)
    memo_key = (real, tuple((relative, *stamp) for relative, _, stamp in files))
    with _memo_lock:
        if memo_key in _memo:
            return _memo[memo_key]
    cache_path = Path(cache_dir) / CACHE_FILE if cache_dir is not None else None
    cache = _read_cache(cache_path)
    known = cache.get(real, {}) if isinstance(cache.get(real), dict) else {}
    entries, changed = {}, False
    for relative, path, stamp in files:
        cached = known.get(relative)
        if (
            isinstance(cached, list)
            and len(cached) == len(stamp) + 1
            and cached[:-1] == stamp
            and isinstance(cached[-1], str)
        ):
            entries[relative] = cached
        else:
            entries[relative] = [*stamp, _sha256(path)]
            changed = True
    digest = hashlib.sha256(json.dumps(sorted((r, e[-1]) for r, e in entries.items())).encode()).hexdigest()
    if cache_path is not None and (changed or set(known) != set(entries)):
        cache[real] = entries
        _write_cache(cache_path, cache)
    with _memo_lock:
        _memo[memo_key] = digest
    return digest


def _read_cache(path: Path | None) -> dict:
    if path is None:
        return {}
    content, problem = read_cache_entry(path)
    if content is None:
        if problem != "not cached yet":
            logger.warning("backbone checksums %s cannot be used: %s; hashing the files again", path, problem)
        return {}  # missing, damaged or edited: hashed again (the cache only saves time)
    try:
        cache = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    try:
        write_cache_entry(path, json.dumps(cache, indent=2, sort_keys=True).encode("utf-8"))
    except OSError as exc:  # a read-only store: hashing again next time is the only cost
        logger.debug("cannot keep backbone checksums in %s: %s", path, exc)
