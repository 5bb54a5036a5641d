"""Downloading, verifying and unpacking dataset archives (``harness data download NAME``).

A plugin offers a downloadable dataset by registering a ``dataset`` component whose object has ``description`` and
``download(target_dir, progress) -> list[Path]``; :class:`ArchiveDataset` is a ready-made one for datasets published
as one or more zip / tar archives. What it guarantees:

- **Resume.** Bytes go to ``<target>/.downloads/<file>.part``. A broken connection is retried from where it broke
  (HTTP ``Range``); a later run of the same command resumes the same ``.part`` file. A server that ignores ``Range``
  (answers 200) makes the download restart from zero, never append garbage.
- **Verification.** The size is checked against the server's ``Content-Length`` / ``Content-Range`` and the archive
  table's ``size``; the sha256 against the table's ``sha256`` when the publisher's checksum is known (when it is not,
  the table says so and the archive's own integrity check is all there is: every zip member's CRC-32, every tar member
  read through). A failed check deletes the file and raises :class:`ChecksumError`, leaving nothing behind.
- **No silent hang.** Connecting has its own timeout (``connect_timeout``, 10 s) and so has every read
  (``read_timeout``, 30 s): a black-holed network fails each attempt within seconds, saying so, instead of hanging.
  The command says where it connects before the first byte, and reports progress from the first byte (a bar on a
  terminal, a line every few seconds otherwise).
- **Atomic unpacking.** All archives of a dataset are unpacked into a temporary folder next to the target, which is
  renamed to ``<target>/<name>`` only when everything succeeded, so a half-unpacked dataset never looks complete.
  A manifest (``.harness-download.json``) records the URLs, sizes and sha256 of what was unpacked.

The archive table is data (:class:`Archive`), so tests and mirrors can point a dataset at other URLs.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from .errors import HarnessError
from .store_files import sha256_file

MANIFEST_NAME = ".harness-download.json"
CHUNK_BYTES = 1 << 16
CONNECT_TIMEOUT = 10.0  # seconds to establish the connection (TCP and TLS)
READ_TIMEOUT = 30.0  # seconds any single read may wait for bytes
PROGRESS_EVERY_SECONDS = 5.0  # without a progress bar: one progress line this often
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class DownloadError(HarnessError):
    """A download that could not be completed (network, server or disk)."""


class ChecksumError(DownloadError):
    """A downloaded file whose size, checksum or archive integrity is wrong; the file has been deleted."""


@dataclass(frozen=True)
class Archive:
    """One file of a dataset: where it is and what it must look like."""

    url: str
    sha256: str | None = None  # the publisher's checksum; None when none is published (then: size + integrity only)
    size: int | None = None  # expected bytes, when known
    filename: str | None = None  # local name; default: the URL's last path segment

    @property
    def local_name(self) -> str:
        return self.filename or PurePosixPath(urllib.request.urlparse(self.url).path).name or "download"


def _log(message: str) -> None:
    """A download's progress line, on stderr beside the progress bars (the CLI's INFO lines go to stdout, which a
    script reading `harness data` output keeps clean)."""
    print(message, file=sys.stderr, flush=True)  # noqa: T201


def _opener(read_timeout: float) -> urllib.request.OpenerDirector:
    """urllib with separate timeouts: the request's ``timeout`` bounds connecting, ``read_timeout`` every read."""

    class ReadTimeoutHTTPConnection(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            self.sock.settimeout(read_timeout)

    class ReadTimeoutHTTPSConnection(http.client.HTTPSConnection):
        def connect(self):
            super().connect()
            self.sock.settimeout(read_timeout)

    class HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, request):
            return self.do_open(ReadTimeoutHTTPConnection, request)

    class HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, request):
            return self.do_open(ReadTimeoutHTTPSConnection, request, context=getattr(self, "_context", None))

    return urllib.request.build_opener(HTTPHandler(), HTTPSHandler())


def _size_text(size: int | None) -> str:
    if size is None:
        return "unknown size"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size} bytes"


def _total_size(response: http.client.HTTPResponse, offset: int) -> int | None:
    """The full size of the resource, from Content-Range (206) or Content-Length (200)."""
    content_range = response.headers.get("Content-Range")
    if content_range:
        match = _CONTENT_RANGE.match(content_range)
        if match and match.group(3) != "*":
            return int(match.group(3))
    length = response.headers.get("Content-Length")
    return offset + int(length) if length is not None else None


def fetch(
    url: str,
    part_path: Path,
    progress: bool = False,
    attempts: int = 3,
    timeout: float = READ_TIMEOUT,
    retry_wait: float = 1.0,
    connect_timeout: float = CONNECT_TIMEOUT,
    log: Callable[[str], None] | None = None,
) -> int:
    """Download ``url`` into ``part_path``, resuming what is already there; returns the file's size.

    ``connect_timeout`` bounds connecting, ``timeout`` every read. Each broken attempt is resumed with an HTTP Range
    request; after ``attempts`` failures the ``.part`` file is kept so that running the command again resumes it.
    """
    log = log or _log
    part_path.parent.mkdir(parents=True, exist_ok=True)
    host = urllib.request.urlparse(url).netloc
    opener = _opener(timeout)
    last_problem = ""
    for attempt in range(1, attempts + 1):
        offset = part_path.stat().st_size if part_path.exists() else 0
        headers = {"User-Agent": "harness-download"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        request = urllib.request.Request(url, headers=headers)
        log(
            f"connecting to {host} (attempt {attempt} of {attempts}; gives up after {connect_timeout:g} s without "
            f"a connection or {timeout:g} s without data)"
        )
        try:
            with opener.open(request, timeout=connect_timeout) as response:
                if offset and response.status == 206:
                    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
                    if not match or int(match.group(1)) != offset:
                        raise DownloadError(
                            f"{url}: the server answered the resume request with the wrong range "
                            f"({response.headers.get('Content-Range')!r})."
                        )
                    mode = "ab"
                else:
                    offset, mode = 0, "wb"  # the server ignored Range: start over rather than append
                total = _total_size(response, offset)
                log(f"receiving {_size_text(total)}" + (f" from byte {offset}" if offset else ""))
                _copy_body(response, part_path, mode, offset, total, progress, url, log)
        except urllib.error.HTTPError as error:
            if error.code == 416 and offset:
                # Nothing left to send from this offset: the .part file is complete (verification decides).
                return offset
            if error.code >= 500 and attempt < attempts:
                last_problem = f"HTTP {error.code}"
                time.sleep(retry_wait * attempt)
                continue
            raise DownloadError(f"{url}: the server answered HTTP {error.code} ({error.reason}).") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            last_problem = _network_problem(error, host, connect_timeout, timeout)
            if attempt < attempts:
                log(f"{last_problem}; retrying in {retry_wait * attempt:g} s")
                time.sleep(retry_wait * attempt)
            continue
        size = part_path.stat().st_size
        if total is not None and size < total:
            last_problem = f"connection closed after {size} of {total} bytes"
            if attempt < attempts:
                time.sleep(retry_wait * attempt)
            continue
        return size
    kept = part_path.stat().st_size if part_path.exists() else 0
    if kept:
        what_now = f"{kept} bytes are kept in {part_path}; run the same command again to resume."
    else:
        part_path.unlink(missing_ok=True)
        what_now = "Nothing was downloaded; check the network connection and run the command again."
    raise DownloadError(f"{url}: download failed after {attempts} attempts ({last_problem}). {what_now}")


def _network_problem(error: BaseException, host: str, connect_timeout: float, read_timeout: float) -> str:
    """One line for a failed attempt. urllib wraps errors while connecting in URLError; a timeout while waiting for
    the answer or the body comes unwrapped."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        if isinstance(error, urllib.error.URLError):
            return f"no connection to {host} within {connect_timeout:g} s"
        return f"{host} sent no data for {read_timeout:g} s"
    return f"{type(reason).__name__}: {reason}"


def _copy_body(
    response,
    part_path: Path,
    mode: str,
    offset: int,
    total: int | None,
    progress: bool,
    url: str,
    log: Callable[[str], None] = _log,
) -> None:
    from tqdm.auto import tqdm

    name = PurePosixPath(urllib.request.urlparse(url).path).name
    received = offset
    last_report = time.monotonic()
    with (
        open(part_path, mode) as handle,
        tqdm(
            total=total, initial=offset, unit="B", unit_scale=True, desc=name, disable=not progress, leave=False
        ) as bar,
    ):
        while True:
            block = response.read(CHUNK_BYTES)
            if not block:
                break
            handle.write(block)
            bar.update(len(block))
            received += len(block)
            if not progress and time.monotonic() - last_report >= PROGRESS_EVERY_SECONDS:
                last_report = time.monotonic()
                share = f" ({100 * received / total:.0f}%)" if total else ""
                log(f"{name}: {_size_text(received)} of {_size_text(total)}{share}")


def _archive_kind(name: str) -> str:
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")):
        return "tar"
    raise DownloadError(f"{name}: unknown archive type; expected .zip, .tar, .tar.gz, .tgz, .tar.bz2 or .tar.xz.")


def _check_member_name(archive_name: str, member_name: str) -> None:
    parts = PurePosixPath(member_name.replace("\\", "/")).parts
    if member_name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise ChecksumError(
            f"{archive_name}: member {member_name!r} would be written outside the dataset folder; refused."
        )


def check_archive(path: Path, archive_name: str | None = None) -> None:
    """Integrity of an archive without a published checksum: every zip member's CRC-32, every tar member read;
    members that would land outside the target folder are refused. ``archive_name`` (default: the file's name)
    gives the archive type, e.g. for a ``.part`` file."""
    archive_name = archive_name or path.name
    kind = _archive_kind(archive_name)
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                for member_name in archive.namelist():
                    _check_member_name(archive_name, member_name)
                broken = archive.testzip()
                if broken is not None:
                    raise ChecksumError(f"{archive_name}: member {broken!r} fails its CRC-32 check.")
        else:
            with tarfile.open(path) as archive:
                for member in archive:
                    _check_member_name(archive_name, member.name)
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        while extracted is not None and extracted.read(1 << 20):
                            pass
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise ChecksumError(f"{archive_name}: not a readable {kind} archive ({error}).") from None


def unpack(path: Path, destination: Path) -> None:
    kind = _archive_kind(path.name)
    if kind == "zip":
        with zipfile.ZipFile(path) as archive:
            archive.extractall(destination)
    else:
        with tarfile.open(path) as archive:
            if hasattr(tarfile, "data_filter"):
                archive.extractall(destination, filter="data")
            else:  # pragma: no cover - Python without the extraction filters
                archive.extractall(destination)


@dataclass
class ArchiveDataset:
    """A dataset published as archives; registered as a ``dataset`` component by the plugin that reads it."""

    name: str  # folder created under the target directory
    description: str
    archives: Sequence[Archive]
    license: str = ""
    keep_archives: bool = False  # keep the verified archives in <target>/.downloads after unpacking
    attempts: int = 3
    timeout: float = READ_TIMEOUT  # per read
    retry_wait: float = 1.0
    connect_timeout: float = CONNECT_TIMEOUT
    log: Callable[[str], None] = field(default=_log, repr=False)

    def path(self, target_dir: Path) -> Path:
        return Path(target_dir) / self.name

    def is_complete(self, target_dir: Path) -> bool:
        return (self.path(target_dir) / MANIFEST_NAME).is_file()

    def download(self, target_dir: Path, progress: bool = False) -> list[Path]:
        target_dir = Path(target_dir).expanduser()
        destination = self.path(target_dir)
        if self.is_complete(target_dir):
            self.log(f"{self.name}: already downloaded in {destination}")
            return [destination]
        if destination.exists():
            raise DownloadError(
                f"{destination} exists but was not completed by `harness data download` (no {MANIFEST_NAME}). "
                "Delete it to download again, or use it as it is through --data-dir."
            )
        target_dir.mkdir(parents=True, exist_ok=True)
        downloads = target_dir / ".downloads"
        try:
            verified = [self._verified_archive(archive, downloads, progress) for archive in self.archives]
        except BaseException:
            self._remove_empty(downloads)  # keep partial downloads for resuming, but no empty folder
            raise
        self._unpack_all(verified, target_dir, destination)
        if not self.keep_archives:
            for path, _ in verified:
                path.unlink(missing_ok=True)
            try:
                downloads.rmdir()
            except OSError:
                pass  # other downloads are still there
        return [destination]

    def _verified_archive(self, archive: Archive, downloads: Path, progress: bool) -> tuple[Path, dict]:
        final = downloads / archive.local_name
        part = downloads / (archive.local_name + ".part")
        if not final.exists():
            resumed = part.stat().st_size if part.exists() else 0
            self.log(f"{self.name}: downloading {archive.url}" + (f" (resuming at byte {resumed})" if resumed else ""))
            fetch(
                archive.url,
                part,
                progress,
                self.attempts,
                self.timeout,
                self.retry_wait,
                self.connect_timeout,
                self.log,
            )
            try:
                record = self._verify(archive, part)
            except ChecksumError:
                part.unlink(missing_ok=True)
                self._remove_empty(downloads)
                raise
            os.replace(part, final)
        else:
            try:
                record = self._verify(archive, final)
            except ChecksumError:
                final.unlink(missing_ok=True)
                self._remove_empty(downloads)
                raise
        return final, record

    def _verify(self, archive: Archive, path: Path) -> dict:
        size = path.stat().st_size
        if archive.size is not None and size != archive.size:
            raise ChecksumError(
                f"{archive.url}: downloaded {size} bytes, expected {archive.size}; the file was deleted. Run the "
                "command again; if it keeps failing the published file has changed."
            )
        digest = sha256_file(path)
        if archive.sha256 is not None and digest != archive.sha256.lower():
            raise ChecksumError(
                f"{archive.url}: sha256 is {digest}, expected {archive.sha256}; the file was deleted. Run the "
                "command again; if it keeps failing the published file has changed (or a proxy altered it)."
            )
        check_archive(path, archive.local_name)
        how = (
            "sha256 matches the pinned checksum"
            if archive.sha256
            else "no published checksum: size and archive integrity checked"
        )
        self.log(f"{self.name}: {archive.local_name} verified ({size} bytes, sha256 {digest}; {how})")
        return {
            "url": archive.url,
            "file": archive.local_name,
            "bytes": size,
            "sha256": digest,
            "sha256_pinned": archive.sha256 is not None,
        }

    def _unpack_all(self, verified: list[tuple[Path, dict]], target_dir: Path, destination: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix=f".{self.name}.unpacking-", dir=target_dir))
        try:
            for path, _ in verified:
                self.log(f"{self.name}: unpacking {path.name}")
                unpack(path, staging)
            manifest = {
                "dataset": self.name,
                "archives": [record for _, record in verified],
                "license": self.license,
                "unpacked_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
            os.replace(staging, destination)  # atomic on one file system: the dataset appears complete or not at all
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    @staticmethod
    def _remove_empty(folder: Path) -> None:
        try:
            folder.rmdir()
        except OSError:
            pass
