"""Files written safely: atomic writes, temporary names that say who owns them, their cleanup, checksummed cache
entries, and the writability check of an output folder. Every part of the harness (and every plugin, through
``harness``) writes files through this module, so a crash leaves the old version of a file or the new one, never
half of one.

- **Atomic writes.** A file is written to a temporary file in the same folder, flushed, fsynced and renamed over the
  target. Temporary names carry the host and process id, so the next run removes the leftovers of dead processes
  (never those of a live one; :func:`stale_temporary`). They also name the kernel boot and PID namespace, so
  containers sharing a folder never take each other's live temporaries for leftovers.
- **Cache entries are checksummed** (:func:`cached_bytes`): an edited or damaged entry is computed again.
- **Store files** are opened, listed and removed through :mod:`harness.store_files`; an atomic write given the
  store's ``root`` refuses a linked folder on the way out of it (:func:`harness.store_files.check_folder_inside`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .store_files import (
    StoreError,
    UnsafeFileError,
    check_folder_inside,
    is_real_dir,
    read_store_bytes,
    read_store_text,
)

logger = logging.getLogger(__name__)

STALE_AFTER_SECONDS = 3600.0  # temporaries whose owner cannot be checked are removed only after this long
UMASK = os.umask(0o022)  # read once at import; files get the mode a plain open() would give them
os.umask(UMASK)


# -- temporary names ---------------------------------------------------------------------------------------------------
_TEMP_TAG = "harness-tmp"
# ``.<name>.harness-tmp.<host>.n<space>.<pid>.<random>``: ``space`` names the kernel boot and the PID namespace of
# the writer, so a process id is only checked by a process that sees the same processes (containers sharing a store
# with the same host name do not); names without it (harness 0.2) are treated as another space's.
_OWNED_TEMP = re.compile(rf"\.{_TEMP_TAG}\.(?P<host>[A-Za-z0-9_]+)\.(?:n(?P<space>[0-9a-f]{{8}})\.)?(?P<pid>\d+)\.")
# harness 0.1 temporaries (no owner in the name): ``.<name>.<8 random chars>.tmp`` files and ``.<name>.<8 chars>``
# checkpoint folders.
_LEGACY_TEMP_FILE = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
_LEGACY_TEMP_DIR = re.compile(r"^\..+\.[a-z0-9_]{8}$")


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname() or "host")[:40] or "host"


def _process_space() -> str:
    """8 hex digits naming this boot of the kernel and this process's PID namespace: two processes with the same
    space see the same process ids."""
    parts = []
    for source in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(source) if source.endswith("/pid") else Path(source).read_text().strip())
        except OSError:
            parts.append("")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]


_SPACE = _process_space()


def temporary_prefix(name: str) -> str:
    """Prefix of a temporary file or folder that will be renamed to ``name``; it names this host, its boot and PID
    namespace, and this process (mkstemp adds a random token)."""
    return f".{name}.{_TEMP_TAG}.{_host_tag()}.n{_SPACE}.{os.getpid()}."


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return True  # cannot tell: keep
    return True


def _newest_mtime(path: Path) -> float:
    status = path.lstat()
    newest = status.st_mtime
    if stat.S_ISDIR(status.st_mode):
        for folder, _, files in os.walk(path):
            for name in files:
                try:
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
                except OSError:
                    pass
    return newest


def stale_temporary(path: Path, now: float | None = None) -> str | None:
    """Why ``path`` is a leftover that can be removed, or None (not a temporary, or possibly still in use)."""
    name = path.name
    owned = _OWNED_TEMP.search(name)
    now = time.time() if now is None else now
    if owned:
        if owned.group("host") == _host_tag() and owned.group("space") == _SPACE:
            pid = int(owned.group("pid"))
            if pid == os.getpid() or _process_alive(pid):
                return None
            return f"left by process {pid}, which is no longer running"
        age = now - _newest_mtime(path)
        if age > STALE_AFTER_SECONDS:
            return (
                f"left by process {owned.group('pid')} of host {owned.group('host')} (another boot or "
                f"container), untouched for {age / 3600:.1f} h"
            )
        return None
    legacy = _LEGACY_TEMP_FILE.match(name) if path.is_file() else _LEGACY_TEMP_DIR.match(name)
    if legacy:
        age = now - _newest_mtime(path)
        if age > STALE_AFTER_SECONDS:
            return f"left by an older harness, untouched for {age / 3600:.1f} h"
    return None


# -- atomic writes -----------------------------------------------------------------------------------------------------
def atomic_write_text(path: Path, text: str, root: Path | str | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a reader sees the old file or the whole new one."""
    atomic_write_bytes(path, text.encode("utf-8"), root)


def atomic_write_bytes(path: Path, data: bytes, root: Path | str | None = None) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file in the same folder, then a rename)."""
    atomic_write_file(path, lambda temporary: temporary.write_bytes(data), root)


def atomic_write_file(path: Path, write: Callable[[Path], Any], root: Path | str | None = None) -> None:
    """``write(temporary)`` fills a temporary file beside ``path`` (for writers that take a path, such as a
    library's ``to_disk``); it is then fsynced and renamed over ``path``, or removed if anything fails.

    ``root``: the store (or folder) the file must lie in; a folder on the way that is a link out of it is refused
    (:class:`UnsafeFileError`) before anything is created, so a planted link never makes the store write elsewhere."""
    path = Path(path)
    if root is not None:
        check_folder_inside(path.parent, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    if root is not None:
        check_folder_inside(path.parent, root)  # a link swapped in while the folders were made
    handle, temporary = tempfile.mkstemp(prefix=temporary_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, 0o666 & ~UMASK)  # mkstemp's 0600 would hide records from the others sharing a store
        os.close(handle)
        write(Path(temporary))
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:  # includes KeyboardInterrupt: never leave the temporary file behind
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: Path, payload: Any, root: Path | str | None = None) -> None:
    """Write ``payload`` as indented JSON with sorted keys to ``path`` atomically."""
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", root)


def check_writable_dir(path: Path, what: str) -> None:
    """Raise StoreError unless ``path`` is (or can be created as) a folder this process can write to. Creates
    nothing: the probe file goes into the folder itself or its nearest existing parent and is removed at once."""
    path = Path(path)
    mode = _followed_mode(path)
    if mode is not None and not stat.S_ISDIR(mode):
        raise StoreError(f"{what} {path} is a file, not a folder; give a folder (it is created if missing).")
    probe = path
    while (mode := _followed_mode(probe)) is None:
        if probe.parent == probe:
            break
        probe = probe.parent
    if mode is not None and not stat.S_ISDIR(mode):
        raise StoreError(f"{what} {path} cannot be created: {probe} is a file.")
    try:
        handle, name = tempfile.mkstemp(prefix=temporary_prefix("write-test"), suffix=".tmp", dir=probe)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        raise StoreError(f"{what} {path} is not writable ({exc.strerror or exc}); choose a writable folder.") from None


def _followed_mode(path: Path) -> int | None:
    """The mode of what ``path`` names, links followed (an output folder may be a link), from one ``stat``."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def prepare_output_dir(path: Path, what: str) -> None:
    """Check an output folder (:func:`check_writable_dir`) and remove the temporaries that killed writers left in it
    (:func:`remove_stale_temporaries`): every command that writes a folder (``run``, ``publish``, ``leaderboard``,
    ``export-results``) leaves no ``*harness-tmp*`` file behind after a later run."""
    check_writable_dir(path, what)
    for leftover, why in remove_stale_temporaries(Path(path)):
        logger.info("removed %s (%s)", leftover, why)


def remove_stale_temporaries(root: Path) -> list[tuple[Path, str]]:
    """Remove temporary files and folders under ``root`` left by dead processes; returns ``(path, why)`` of each.

    A temporary names its host and process id: one of this host whose process is gone is removed; one of a live
    process never is. Temporaries whose owner cannot be checked (another host, or written by harness 0.1) are
    removed only when untouched for STALE_AFTER_SECONDS.
    """
    root = Path(root)
    removed: list[tuple[Path, str]] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        for name in list(dirs):
            path = base / name
            if not name.startswith(".") or path.is_symlink():
                continue
            why = stale_temporary(path, now)
            if why:
                shutil.rmtree(path, ignore_errors=True)
                removed.append((path, why))
            dirs.remove(name)  # never descend into hidden folders
        for name in files:
            if not name.startswith(".") or not name.endswith(".tmp"):
                continue
            path = base / name
            why = stale_temporary(path, now)
            if why:
                try:
                    path.unlink()
                    removed.append((path, why))
                except OSError:
                    pass
    return removed


def remove_stale_siblings(path: Path) -> None:
    """Remove the temporaries of earlier writes of ``path`` (a file or folder) whose process died (e.g. a Ray worker
    killed mid-save)."""
    path = Path(path)
    prefix = f".{path.name}.{_TEMP_TAG}."
    for sibling in path.parent.iterdir():
        if sibling.name.startswith(prefix) and stale_temporary(sibling):
            if is_real_dir(sibling):
                shutil.rmtree(sibling, ignore_errors=True)
            else:
                try:
                    sibling.unlink()
                except OSError:
                    pass


# -- cache entries -----------------------------------------------------------------------------------------------------
CACHE_CHECKSUM_SUFFIX = ".sha256"


def cached_bytes(
    path: Path,
    compute: Callable[[], bytes],
    check: Callable[[bytes], bool] | None = None,
    what: str = "cache entry",
    made_from: Any = None,
    root: Path | None = None,
) -> tuple[bytes, bool]:
    """The content of the cache file ``path`` if it verifies, else ``compute()`` written there; returns ``(content,
    True if it came from the cache)``. Plugins keep what they cache in the store (``ctx.cache_dir``) through this.

    Every entry is written atomically with a side file ``<path>.sha256`` that holds its sha256 and what it was made
    from (``made_from``: the key's payload, JSON; the entry's file name when not given); an entry whose file or side
    file is missing, does not match (edited, truncated or damaged), was made from something other than what is asked
    (an entry copied over another, with its side file) or that ``check`` rejects is logged and recomputed, so a
    damaged or swapped cache file never serves wrong values or breaks later runs. Two processes computing the same
    entry at once both write the same content (a cache key names everything that determines it), so no lock is
    needed. Entry and side file are read with :func:`read_store_bytes` inside ``root`` (the entry's folder unless
    told): a FIFO, device or link out of it is a problem like any other (computed again and replaced, never
    followed).
    """
    path = Path(path)
    content, problem = read_cache_entry(path, made_from, check, root)
    if content is not None:
        return content, True
    if problem != "not cached yet":
        logger.warning("%s %s cannot be used: %s; computing it again", what, path, problem)
    content = compute()
    write_cache_entry(path, content, made_from)
    return content, False


def _entry_side_file(path: Path) -> Path:
    return path.with_name(path.name + CACHE_CHECKSUM_SUFFIX)


def _made_from(path: Path, made_from: Any) -> Any:
    """What the side file names: ``made_from`` as JSON reads it back, else the entry's file name."""
    return json.loads(json.dumps(made_from if made_from is not None else path.name, sort_keys=True, default=str))


def write_cache_entry(path: Path, content: bytes, made_from: Any = None) -> None:
    """Write the cache entry ``path`` and its side file (sha256 and what it was made from), each atomically; the
    side file last, so an entry without a matching one is never used."""
    path = Path(path)
    atomic_write_bytes(path, content)
    atomic_write_json(
        _entry_side_file(path),
        {"sha256": hashlib.sha256(content).hexdigest(), "made_from": _made_from(path, made_from)},
    )


def read_cache_entry(
    path: Path, made_from: Any = None, check: Callable[[bytes], bool] | None = None, root: Path | None = None
) -> tuple[bytes | None, str | None]:
    """``(content, None)`` for an entry that verifies (see :func:`cached_bytes`), else ``(None, why)``; why is
    "not cached yet" when there is no entry. Both files are read with the safe open inside ``root`` (the entry's
    folder unless told)."""
    path = Path(path)
    sidecar = _entry_side_file(path)
    root = path.parent if root is None else Path(root)
    try:
        content = read_store_bytes(path, root)
    except FileNotFoundError:
        return None, "not cached yet"
    except UnsafeFileError as exc:
        return None, f"it is {exc.reason}"
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})"
    try:
        side = read_store_text(sidecar, root)
    except FileNotFoundError:
        return None, f"it has no checksum file {sidecar.name}"
    except UnsafeFileError as exc:
        return None, f"its checksum file is {exc.reason}"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"it cannot be read ({getattr(exc, 'strerror', None) or exc})"
    try:
        described = json.loads(side)
    except ValueError:
        described = None
    if not isinstance(described, dict) or "made_from" not in described:
        return None, (
            f"its checksum file {sidecar.name} does not say what it was made from (written by an older "
            "harness, or damaged)"
        )
    if described.get("sha256") != hashlib.sha256(content).hexdigest():
        return None, "its content does not match its checksum (edited or damaged)"
    if described["made_from"] != _made_from(path, made_from):
        return None, "it was made from something other than what its name asks for (copied over another entry?)"
    if check is not None and not check(content):
        return None, "its content is not what this entry holds"
    return content, None
