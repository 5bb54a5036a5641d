"""Store files opened, listed and removed safely, the one layer through which every part of the harness touches a
store's files (:mod:`harness.files` writes them atomically on top of it).

- **Store files are opened safely** (:func:`open_store_file`, :func:`read_store_bytes`, :func:`read_store_text`):
  every file the store reads or locks must be a regular file whose real path lies inside the store. A symbolic link
  out of the store is never followed, a FIFO, socket or device is never read (it would hang the run or serve data
  from elsewhere), and a lock file is never created or truncated through a link (``O_NOFOLLOW``).
- **Every store file goes through this layer** (docs/guide/store.md): besides the safe open, a store folder is
  listed only when its real path lies inside the store (:func:`list_store_folder`), a file is removed without
  following a link and never in a folder that links out (:func:`remove_store_file`, :func:`remove_store_tree`), an
  atomic write given the store's ``root`` refuses a linked folder on the way out of it (:func:`check_folder_inside`),
  and a listing sizes or dates only regular files (:func:`regular_store_file`, :func:`touch_store_file`).
  ``tests/test_store_io_layer.py`` fails on a direct file call elsewhere in the package that its allow-list does not
  explain.
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
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from .errors import HarnessError


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
