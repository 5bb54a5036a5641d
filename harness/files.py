"""Files written safely: atomic writes, temporary names that say who owns them, their cleanup, checksummed cache
entries, and the writability check of an output folder. Every part of the harness (and every plugin, through
``harness``) writes files through this module, so a crash leaves the old version of a file or the new one, never
half of one.

- **Atomic writes.** A file is written to a temporary file in the same folder, flushed, fsynced and renamed over the
  target. Temporary names carry the host and process id, so the next run removes the leftovers of dead processes
  (never those of a live one; :func:`stale_temporary`). They also name the kernel boot and PID namespace, so
  containers sharing a folder never take each other's live temporaries for leftovers.
- **Cache entries are checksummed** (:func:`cached_bytes`): an edited or damaged entry is computed again.
- **Store files are opened safely** (:func:`open_store_file`, :func:`read_store_bytes`, :func:`read_store_text`):
  every file the store reads or locks must be a regular file whose real path lies inside the store. A symbolic link
  out of the store is never followed, a FIFO, socket or device is never read (it would hang the run or serve data
  from elsewhere), and a lock file is never created or truncated through a link (``O_NOFOLLOW``).
- **Every store file goes through this module** (docs/guide/store.md): besides the safe open, a store
  folder is listed only when its real path lies inside the store (:func:`list_store_folder`), a file is removed
  without following a link and never in a folder that links out (:func:`remove_store_file`,
  :func:`remove_store_tree`), an atomic write given the store's ``root`` refuses a linked folder on the way out of
  it (:func:`check_folder_inside`), and a listing sizes or dates only regular files (:func:`regular_store_file`,
  :func:`touch_store_file`). ``tests/test_store_io_layer.py`` fails on a direct file call elsewhere in the package
  that its allow-list does not explain.
- **Outputs stay in their folder** (:func:`path_inside`): a file name built from a record's content (a family, a
  task name) can never name a path outside the folder it is written to.
- **Operating-system errors are one line** (:func:`os_error_line`, :func:`as_os_error`): a full disk, a read-only
  mount or a folder without permission reach the user as one line that says what to do, also when a library (such
  as safetensors) wraps them in its own exception type.
"""

from __future__ import annotations

import contextlib
import errno
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

from .errors import HarnessError

logger = logging.getLogger(__name__)

STALE_AFTER_SECONDS = 3600.0  # temporaries whose owner cannot be checked are removed only after this long
UMASK = os.umask(0o022)  # read once at import; files get the mode a plain open() would give them
os.umask(UMASK)


class StoreError(HarnessError):
    """A result store (or output folder) that cannot be used: not a folder, not writable."""


class UnsafeFileError(StoreError):
    """A file the store was asked to read or lock that is not a regular file inside it: a symbolic link out of the
    store, a FIFO, a socket, a device or a folder. It is never opened for reading or writing."""

    def __init__(self, path: Path | str, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(
            f"{path} is {reason}; harness reads and locks only regular files (a store's, inside the "
            "store). Remove it (harness writes a store's files again) and run again."
        )


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


# -- opening store files safely ----------------------------------------------------------------------------------------
# Errors that mean "this process may not write here" (a read-only mount is EROFS, not a PermissionError).
NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a folder", "a FIFO", ...), else None."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a socket or device"


def entry_mode(path: Path | str) -> int | None:
    """The mode of ``path`` itself (a link is not followed), or None when nothing is there, from one ``lstat``.

    Decide what an entry is from this one answer, never from two calls such as ``exists()`` then ``is_dir()``: a
    concurrent writer that renames a folder aside between the two makes them disagree, and a healthy folder being
    replaced would be taken for a file."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def is_real_dir(path: Path | str) -> bool:
    """``path`` is a folder and not a link to one (one ``lstat``; see :func:`entry_mode`)."""
    mode = entry_mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def is_inside(path: Path | str, root: Path | str) -> bool:
    """``path`` lies in the folder ``root`` once every link in either is resolved."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def _opened_path(descriptor: int, path: Path) -> str:
    """The real path of the file ``descriptor`` is open on (Linux names it in /proc, so no link can be swapped in
    between the check and the open); the resolved ``path`` elsewhere."""
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return os.path.realpath(path)


def open_store_file(path: Path | str, root: Path | str | None = None, *, lock: bool = False) -> int:
    """A descriptor of the regular file ``path`` (close it yourself); the one way the store opens files.

    ``root``: the folder the file must lie in (its real path, after every link is resolved; a store that is itself a
    link is fine). ``lock``: open read-write, creating the file if missing, never through a link (``O_NOFOLLOW``),
    so a planted link cannot make the store create or truncate a file elsewhere. A FIFO, socket or device is refused
    before it is opened and, should it be swapped in, opened without blocking (``O_NONBLOCK``) and refused by
    ``fstat``. Raises :class:`UnsafeFileError` for those, FileNotFoundError/OSError as ``os.open`` does.
    """
    path = Path(path)
    try:
        kind = file_kind(os.stat(path).st_mode)  # follows links: what the file is, before opening it
    except FileNotFoundError:
        if not lock:
            raise
        kind = None
    if kind:
        raise UnsafeFileError(path, f"not a regular file ({kind})")
    if lock and root is not None and not is_inside(path.parent, root):  # never even create a file elsewhere
        raise UnsafeFileError(path, f"in {os.path.realpath(path.parent)}, outside {root} (a linked folder)")
    flags = (os.O_RDWR | os.O_CREAT | _NOFOLLOW if lock else os.O_RDONLY) | _NONBLOCK | _CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (lock and path.is_symlink()):
            raise UnsafeFileError(path, "a symbolic link (a lock file never is one)") from None
        raise
    try:
        kind = file_kind(os.fstat(descriptor).st_mode)
        if kind:
            raise UnsafeFileError(path, f"not a regular file ({kind})")
        if root is not None:
            real = _opened_path(descriptor, path)
            if not is_inside(real, root):
                raise UnsafeFileError(path, f"a link to {real}, outside {root}")
        if _NONBLOCK:
            import fcntl

            fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~_NONBLOCK)
        return descriptor
    except BaseException:
        os.close(descriptor)
        raise


def read_store_bytes(path: Path | str, root: Path | str | None = None) -> bytes:
    """The content of the regular file ``path`` inside ``root`` (:func:`open_store_file`)."""
    with os.fdopen(open_store_file(path, root), "rb") as stream:
        return stream.read()


def read_store_text(path: Path | str, root: Path | str | None = None) -> str:
    """:func:`read_store_bytes` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_store_bytes(path, root).decode("utf-8")


def read_store_json(path: Path | str, root: Path | str | None = None) -> Any:
    """:func:`read_store_text` parsed as JSON (ValueError when it is not)."""
    return json.loads(read_store_text(path, root))


def check_folder_inside(folder: Path | str, root: Path | str) -> None:
    """Refuse (:class:`UnsafeFileError`) a folder of the store whose nearest existing part resolves outside
    ``root`` (a link out of the store on the way); a folder not made yet is checked through the part that is."""
    folder = Path(folder)
    existing = folder
    while not os.path.lexists(existing):
        if existing == Path(root) or existing.parent == existing:
            return  # not even the store's folder exists yet: everything on the way is made fresh
        existing = existing.parent
    if not is_inside(existing, root):
        raise UnsafeFileError(folder, f"in {os.path.realpath(existing)}, outside {root} (a linked folder)")


def list_store_folder(folder: Path | str, root: Path | str) -> list[Path]:
    """The entries of the store folder ``folder`` (sorted by name; none when it does not exist), read only when its
    real path lies inside ``root``: a folder that is a link out of the store is :class:`UnsafeFileError`, never
    listed. Entries are not followed; read them with :func:`read_store_bytes`, remove them with
    :func:`remove_store_file`."""
    folder = Path(folder)
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise UnsafeFileError(folder, "not a folder") from None
    try:
        real = _opened_path(descriptor, folder)
        if not is_inside(real, root):
            raise UnsafeFileError(folder, f"a link to {real}, outside {root}")
        names = os.listdir(descriptor)
    finally:
        os.close(descriptor)
    return [folder / name for name in sorted(names)]


def regular_store_file(path: Path | str, root: Path | str) -> os.stat_result | None:
    """The ``lstat`` of ``path`` when it is a regular file (not a link, FIFO, device or folder) in a folder inside
    ``root``; None otherwise (also when it is gone). For listings that size or date files without opening them."""
    path = Path(path)
    try:
        status = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode) or not is_inside(path.parent, root):
        return None
    return status


def remove_store_file(path: Path | str, root: Path | str) -> bool:
    """Remove the file ``path`` of the store ``root``: a regular file, or a link, FIFO or device itself (never what a
    link points to). Refused (:class:`UnsafeFileError`) when its folder resolves outside ``root`` (a linked
    folder: removing would destroy a file elsewhere) or when it is a folder. False when it was already gone."""
    path = Path(path)
    check_folder_inside(path.parent, root)
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise UnsafeFileError(path, "a folder, not a file")
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def remove_store_tree(path: Path | str, root: Path | str) -> bool:
    """Remove the folder ``path`` of the store ``root`` and what it holds, never following a link: a link in its
    place is removed itself (what it points to stays), links inside are removed as links. Refused
    (:class:`UnsafeFileError`) when its parent resolves outside ``root``. False when it was already gone."""
    path = Path(path)
    check_folder_inside(path.parent, root)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(status.st_mode):
        os.unlink(path)
        return True
    shutil.rmtree(path, ignore_errors=True)  # fd-based on Linux: never descends through a link
    return True


def touch_store_file(path: Path | str, root: Path | str) -> None:
    """Set the modification time of the store file ``path`` to now, never through a link (an eviction order's
    "used"); a file gone, or outside ``root``, is left alone."""
    if regular_store_file(path, root) is None:
        return
    with contextlib.suppress(OSError):
        os.utime(path, follow_symlinks=False)


def path_inside(folder: Path | str, *parts: str) -> Path:
    """``folder / parts...``, refused (StoreError) unless it stays inside ``folder``: the one rule for an output path
    built from data (a record's task or family name), so no name ("../x", "/tmp/x", a link) writes outside."""
    folder = Path(folder)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise StoreError(
                f"refusing to write {part!r} into {folder}: not a plain file name (it comes from the "
                "data being written; fix that record)"
            )
    target = folder.joinpath(*parts)
    if not is_inside(target, folder):
        raise StoreError(
            f"refusing to write {target}: it resolves outside {folder} (a link?); remove the link and run again"
        )
    return target


def as_os_error(exc: BaseException, path: Path | str | None = None) -> OSError | None:
    """The OSError a library wrapped in its own exception (safetensors' ``SafetensorError: Error while serializing:
    I/O error: No space left on device (os error 28)``), or None when ``exc`` holds none: so a full disk reads as one
    line whoever wrote the file."""
    if isinstance(exc, OSError):
        return exc
    match = re.search(r"\(os error (\d+)\)|\bOs \{ code: (\d+)|\[Errno (\d+)\]", str(exc))
    if not match:
        return None
    number = int(next(group for group in match.groups() if group))
    return OSError(number, os.strerror(number), str(path) if path is not None else None)


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error that reached a command: the file, what went wrong, what to do."""
    where = f"{exc.filename}: " if exc.filename else ""
    what = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        advice = "free some space and run the same command again (finished cells are stored)"
    elif exc.errno in NOT_WRITABLE:
        advice = "make it writable (or choose another folder) and run again"
    elif exc.errno in (errno.EISDIR, errno.ENOTDIR):
        advice = "a folder stands where a file belongs (or the reverse); move it away and run again"
    else:
        advice = "fix that and run again"
    return f"{where}{what}; {advice}."


def sha256_file(path: Path, root: Path | None = None) -> str:
    """The sha256 of the regular file ``path`` (inside ``root`` when given; :func:`open_store_file`)."""
    digest = hashlib.sha256()
    with os.fdopen(open_store_file(path, root), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
