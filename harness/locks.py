"""Locks that let several processes (two terminals, a job array, Ray workers on many nodes) share one result store.

A :class:`StoreLock` is an exclusive ``flock`` on a small lock file. It guards a piece of the store that must not be
computed twice at the same time: a checkpoint (``<checkpoint folder>.lock``, held while it is checked, trained,
built or loaded) and the cells of one model spec and seed (``<store>/locks/<model-key>/seed-<n>.lock``, held by the
run computing them, so a second run waits or moves on to other cells instead of computing the same ones).

Why ``flock`` and not a lock file whose existence is the lock: the kernel releases a ``flock`` when its process dies,
however it dies (``kill -9``, OOM killer, a Ray worker torn down), so a crashed holder never leaves a stale lock
behind and nothing has to guess from timestamps whether a holder is still alive. On a shared filesystem the same
holds across hosts: Linux's NFS client maps ``flock`` to NFS byte-range locks (NFSv3 through the lock manager,
NFSv4 natively), whose server drops the locks of a client that stops renewing its lease (90 s by default); CephFS,
GPFS/Spectrum Scale and BeeGFS support it natively; Lustre needs the ``flock`` mount option. A filesystem without
locks is refused before any cell runs (:func:`check_locking`) rather than shared unsafely.

The holder writes who it is (host, pid, what for, since when) into the lock file, only to tell a waiting process
whom it waits for. Lock files are never deleted (deleting a lock file someone is about to lock is the classic race
of lock-file schemes); they are empty-ish files under ``locks/`` and next to checkpoints.

Locks are re-entrant within a thread (the runner holds a checkpoint's lock while ``build_checkpoint`` takes it again)
and exclusive between threads and processes. A ``fork``-ed child inherits the open lock file, so the lock is released
only when both are gone; the descriptor is close-on-exec, so processes started with ``exec`` (Ray workers,
subprocesses) do not inherit it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .errors import HarnessError
from .store_files import open_store_file, read_store_text

try:  # not on Windows, where the store is used by one process at a time
    import fcntl
except ImportError:  # pragma: no cover - exercised only on Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCKS = "locks"  # store folder of the per-cell-group locks
WAIT_MESSAGE_AFTER_SECONDS = 1.0  # a wait shorter than this is not worth a log line
_POLL_SECONDS = (0.02, 0.5)  # first and longest pause between two tries of a busy lock
# errno values meaning "this filesystem does not do flock": the store is refused rather than shared without locks.
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


class LockTimeoutError(HarnessError):
    """A lock was still held by another process when the wait for it ran out."""


class LockingUnsupportedError(HarnessError):
    """The store's filesystem does not support file locks."""


@dataclass
class _Held:
    thread: int
    count: int = 0
    descriptor: int | None = None  # None while the owning thread is still taking the flock


_table_lock = threading.Condition()
_held: dict[str, _Held] = {}  # lock-file path -> this process's hold on it


def _key(path: Path) -> str:
    return os.path.abspath(path)


class StoreLock:
    """An exclusive, re-entrant, inter-process lock on ``path`` (created with its folder if missing).

    ``purpose`` says what the holder does (shown to waiting processes); ``root``, the store it belongs to: the lock
    file is opened by :func:`harness.store_files.open_store_file`, so a link planted in its place (or a linked folder
    leading out of ``root``) is refused, never created or truncated through. Use as a context manager (blocks until
    the lock is free) or call :meth:`acquire` with ``blocking=False`` to try once.
    """

    def __init__(self, path: Path | str, purpose: str = "", root: Path | str | None = None):
        self.path = Path(path)
        self.purpose = purpose
        self.root = root

    # -- taking and giving back ----------------------------------------------------------------------------------------
    def acquire(
        self, blocking: bool = True, timeout: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> bool:
        """Take the lock. Non-blocking: True if taken, False if another thread or process holds it. Blocking: waits
        (forever, or ``timeout`` seconds and then LockTimeoutError); ``on_wait(message)`` is called once, after a
        second of waiting, with whom it waits for."""
        key, me = _key(self.path), threading.get_ident()
        deadline = None if timeout is None else time.monotonic() + timeout
        started = time.monotonic()
        told = False
        with _table_lock:
            while key in _held and _held[key].thread != me:  # another thread of this process holds it
                if not blocking:
                    return False
                told = self._tell_once(on_wait, started, told)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise self._timeout(timeout)
                _table_lock.wait(0.2 if remaining is None else min(0.2, remaining))
            if key in _held:  # this thread holds it already: re-entry
                _held[key].count += 1
                return True
            _held[key] = _Held(thread=me)  # reserved: other threads of this process now wait above
        try:
            descriptor = self._take_flock(blocking, deadline, timeout, on_wait, started, told)
        except BaseException:
            self._forget(key)
            raise
        if descriptor is None:
            self._forget(key)
            return False
        self._write_owner_note(descriptor)
        with _table_lock:
            _held[key].descriptor = descriptor
            _held[key].count = 1
        return True

    def release(self) -> None:
        key = _key(self.path)
        with _table_lock:
            held = _held.get(key)
            if held is None or held.thread != threading.get_ident() or held.descriptor is None:
                raise RuntimeError(f"{self.path}: released by a thread that does not hold it")
            held.count -= 1
            if held.count > 0:
                return
            descriptor = held.descriptor
            try:
                os.ftruncate(descriptor, 0)  # no owner any more; a reader would otherwise name a stale holder
            except OSError:
                pass
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)
            del _held[key]
            _table_lock.notify_all()

    def held_here(self) -> bool:
        """This thread holds the lock."""
        held = _held.get(_key(self.path))
        return held is not None and held.thread == threading.get_ident() and held.descriptor is not None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()

    # -- who holds it --------------------------------------------------------------------------------------------------
    def holder(self) -> str:
        """Who holds the lock, as its holder described itself ('host h pid p (training be seed 42) since 12:00:01
        UTC'), or 'another process' when the note cannot be read."""
        try:
            note = json.loads(read_store_text(self.path, self.root) or "null")
        except (OSError, ValueError, HarnessError):
            note = None
        if not isinstance(note, dict):
            return "another process"
        purpose = f" ({note['purpose']})" if note.get("purpose") else ""
        since = time.strftime("%H:%M:%S UTC", time.gmtime(note.get("since", 0)))
        return f"host {note.get('host')} pid {note.get('pid')}{purpose} since {since}"

    # -- internals -----------------------------------------------------------------------------------------------------
    def _take_flock(
        self,
        blocking: bool,
        deadline: float | None,
        timeout: float | None,
        on_wait: Callable[[str], None] | None,
        started: float,
        told: bool,
    ) -> int | None:
        if fcntl is None:  # pragma: no cover - Windows
            raise LockingUnsupportedError("file locks need a POSIX system; share a store only from Linux or macOS.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = open_store_file(self.path, self.root, lock=True)
        pause = _POLL_SECONDS[0]
        try:
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return descriptor
                except OSError as exc:
                    if exc.errno in _UNSUPPORTED:
                        raise unsupported(self.path, exc) from None
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                if not blocking:
                    os.close(descriptor)
                    return None
                told = self._tell_once(on_wait, started, told)
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timeout(timeout)
                time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
                pause = min(pause * 2, _POLL_SECONDS[1])
        except BaseException:
            try:
                os.close(descriptor)
            except OSError:
                pass
            raise

    def _tell_once(self, on_wait: Callable[[str], None] | None, started: float, told: bool) -> bool:
        if told or on_wait is None or time.monotonic() - started < WAIT_MESSAGE_AFTER_SECONDS:
            return told
        on_wait(f"waiting for {self.holder()} (lock {self.path})")
        return True

    def _timeout(self, timeout: float | None) -> LockTimeoutError:
        return LockTimeoutError(
            f"{self.path} is still held by {self.holder()} after {timeout:g} s; wait for it to "
            "finish or stop it, then run again."
        )

    def _write_owner_note(self, descriptor: int) -> None:
        note = {"host": socket.gethostname(), "pid": os.getpid(), "purpose": self.purpose, "since": time.time()}
        data = json.dumps(note).encode("utf-8")
        try:
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, data, 0)
        except OSError:  # the note is only informative
            pass

    @staticmethod
    def _forget(key: str) -> None:
        with _table_lock:
            _held.pop(key, None)
            _table_lock.notify_all()


def unsupported(path: Path, exc: OSError) -> LockingUnsupportedError:
    return LockingUnsupportedError(
        f"the filesystem of {path.parent} does not support file locks ({exc.strerror or exc}), so several runs "
        "could compute the same cells; use a store on a filesystem with locks (on Lustre: mount with -o flock)."
    )


def check_locking(folder: Path) -> None:
    """Refuse (LockingUnsupportedError) a store whose filesystem cannot lock, before any cell runs."""
    probe = StoreLock(Path(folder) / LOCKS / "probe.lock", "checking that this filesystem supports locks", folder)
    if probe.acquire(blocking=False):
        probe.release()


def checkpoint_lock(directory: Path | str, purpose: str | None = None, root: Path | str | None = None) -> StoreLock:
    """The lock of the checkpoint in ``directory``: ``<directory>.lock`` beside it (inside the store ``root``)."""
    directory = Path(directory)
    return StoreLock(
        directory.with_name(directory.name + ".lock"),
        purpose or f"building checkpoint {directory.parent.name}/{directory.name}",
        root,
    )
