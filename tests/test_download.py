"""harness.download against a local HTTP server on 127.0.0.1: verified download, resume after a cut connection,
bad checksums and corrupt or unsafe archives rejected with nothing left behind, atomic unpacking; and the USEB
dataset component end to end (download fixture archives in the official layout, then evaluate from them)."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.download import MANIFEST_NAME, Archive, ArchiveDataset, ChecksumError, DownloadError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "useb"


class FileServer:
    """Serves ``files`` (path -> bytes) with Range support; can cut the first response of a path half-way or
    ignore Range headers. Every request is logged as (path, Range header)."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut_once: set[str] = set()
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                range_header = self.headers.get("Range")
                if range_header and not server.ignore_range:
                    start = int(range_header.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                payload = body[start:]
                if self.path in server.cut_once:
                    server.cut_once.discard(self.path)
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # the connection breaks half-way
                    self.close_connection = True
                    return
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    running = FileServer()
    yield running
    running.close()


def make_zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


TOY_MEMBERS = {f"toy/part{i}.txt": (f"line {i}\n" * 4000).encode() for i in range(3)}


def dataset(archives, **kwargs) -> ArchiveDataset:
    kwargs.setdefault("retry_wait", 0.0)
    return ArchiveDataset(name="toy", description="toy dataset", archives=archives, log=lambda message: None, **kwargs)


def leftovers(target: Path) -> list[str]:
    """Everything under ``target`` except a completed dataset folder."""
    relative = (str(path.relative_to(target)) for path in target.rglob("*"))
    return sorted(name for name in relative if not name.startswith("toy"))


def test_download_verifies_and_unpacks(server, tmp_path):
    body = make_zip(TOY_MEMBERS)
    server.files["/toy.zip"] = body
    archive = Archive(server.url("/toy.zip"), sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    paths = dataset([archive]).download(tmp_path, progress=False)
    assert paths == [tmp_path / "toy"]
    for name, data in TOY_MEMBERS.items():
        assert (tmp_path / "toy" / name).read_bytes() == data
    manifest = json.loads((tmp_path / "toy" / MANIFEST_NAME).read_text())
    assert manifest["archives"][0]["sha256"] == archive.sha256 and manifest["archives"][0]["sha256_pinned"]
    assert leftovers(tmp_path) == []  # archive, .part and staging folder are gone
    # A complete dataset is not downloaded again.
    requests_before = len(server.requests)
    assert dataset([archive]).download(tmp_path) == [tmp_path / "toy"]
    assert len(server.requests) == requests_before


def test_cut_connection_is_resumed_with_range(server, tmp_path):
    body = make_zip(TOY_MEMBERS, zipfile.ZIP_STORED)
    server.files["/toy.zip"] = body
    server.cut_once.add("/toy.zip")
    archive = Archive(server.url("/toy.zip"), sha256=hashlib.sha256(body).hexdigest())
    dataset([archive]).download(tmp_path)
    assert server.requests[0] == ("/toy.zip", None)
    assert server.requests[1] == ("/toy.zip", f"bytes={len(body) // 2}-")
    assert (tmp_path / "toy" / "toy" / "part1.txt").read_bytes() == TOY_MEMBERS["toy/part1.txt"]
    assert leftovers(tmp_path) == []


def test_broken_download_resumes_in_the_next_run(server, tmp_path):
    body = make_zip(TOY_MEMBERS, zipfile.ZIP_STORED)
    server.files["/toy.zip"] = body
    server.cut_once.add("/toy.zip")
    archive = Archive(server.url("/toy.zip"), sha256=hashlib.sha256(body).hexdigest())
    with pytest.raises(DownloadError, match="run the same command again to resume"):
        dataset([archive], attempts=1).download(tmp_path)
    part = tmp_path / ".downloads" / "toy.zip.part"
    assert part.stat().st_size == len(body) // 2
    assert not (tmp_path / "toy").exists()
    dataset([archive], attempts=1).download(tmp_path)
    assert server.requests[-1] == ("/toy.zip", f"bytes={len(body) // 2}-")
    assert (tmp_path / "toy" / MANIFEST_NAME).is_file() and leftovers(tmp_path) == []


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    body = make_zip(TOY_MEMBERS)
    server.files["/toy.zip"] = body
    server.ignore_range = True
    (tmp_path / ".downloads").mkdir()
    (tmp_path / ".downloads" / "toy.zip.part").write_bytes(b"stale bytes from another file")
    archive = Archive(server.url("/toy.zip"), sha256=hashlib.sha256(body).hexdigest())
    dataset([archive]).download(tmp_path)
    assert server.requests[0][1] == "bytes=29-"  # it asked to resume, got the whole file, and started over
    assert (tmp_path / "toy" / "toy" / "part0.txt").read_bytes() == TOY_MEMBERS["toy/part0.txt"]


def test_bad_checksum_is_rejected_and_nothing_is_left(server, tmp_path):
    server.files["/toy.zip"] = make_zip(TOY_MEMBERS)
    archive = Archive(server.url("/toy.zip"), sha256="0" * 64)
    with pytest.raises(ChecksumError, match="sha256 is .* expected 0000"):
        dataset([archive]).download(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_wrong_size_is_rejected(server, tmp_path):
    body = make_zip(TOY_MEMBERS)
    server.files["/toy.zip"] = body
    with pytest.raises(ChecksumError, match=f"downloaded {len(body)} bytes, expected {len(body) + 1}"):
        dataset([Archive(server.url("/toy.zip"), size=len(body) + 1)]).download(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_corrupt_archive_without_published_checksum_is_rejected(server, tmp_path):
    body = bytearray(make_zip(TOY_MEMBERS, zipfile.ZIP_STORED))
    position = body.index(b"line 1\n") + 3
    body[position] ^= 0x01  # one flipped bit inside a member: only its CRC-32 can tell
    server.files["/toy.zip"] = bytes(body)
    with pytest.raises(ChecksumError, match="CRC-32"):
        dataset([Archive(server.url("/toy.zip"))]).download(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unpacking_is_all_or_nothing(server, tmp_path):
    """A second archive that fails verification leaves no dataset folder and no staging folder."""
    good = make_zip(TOY_MEMBERS)
    server.files["/good.zip"] = good
    server.files["/bad.zip"] = b"this is not a zip archive"
    archives = [
        Archive(server.url("/good.zip"), sha256=hashlib.sha256(good).hexdigest()),
        Archive(server.url("/bad.zip")),
    ]
    with pytest.raises(ChecksumError, match="bad.zip: not a readable zip archive"):
        dataset(archives).download(tmp_path)
    assert not (tmp_path / "toy").exists()
    # Only the verified first archive stays cached for the next attempt.
    assert leftovers(tmp_path) == [".downloads", ".downloads/good.zip"]


def test_member_outside_the_folder_is_refused(server, tmp_path):
    server.files["/evil.zip"] = make_zip({"../evil.txt": b"x", "ok.txt": b"y"})
    with pytest.raises(ChecksumError, match="outside the dataset folder"):
        dataset([Archive(server.url("/evil.zip"))]).download(tmp_path / "target")
    assert not (tmp_path / "evil.txt").exists()
    assert list((tmp_path / "target").iterdir()) == []


def test_http_error_is_reported(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        dataset([Archive(server.url("/nothing.zip"))]).download(tmp_path)


def test_existing_folder_not_made_by_download_is_not_touched(server, tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "mine.txt").write_text("user data")
    with pytest.raises(DownloadError, match="was not completed by `harness data download`"):
        dataset([Archive(server.url("/toy.zip"))]).download(tmp_path)
    assert (tmp_path / "toy" / "mine.txt").read_text() == "user data" and server.requests == []


def zip_folder(folder: Path, prefix: str) -> bytes:
    return make_zip(
        {
            f"{prefix}/{p.relative_to(folder).as_posix()}": p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
    )


def test_useb_dataset_downloads_the_official_layout_and_the_tasks_read_it(server, tmp_path, monkeypatch):
    from harness import UNLABELED_SENTENCES, EvalContext
    from harness.profiles import get_profile
    from harness.tasks import useb

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    server.files["/data-eval.zip"] = zip_folder(FIXTURES / "data-eval", "data-eval")
    server.files["/data-train.zip"] = zip_folder(FIXTURES / "data-train", "data-train")
    component = useb.useb_dataset([Archive(server.url("/data-eval.zip")), Archive(server.url("/data-train.zip"))])
    component.log = lambda message: None
    assert component.download(tmp_path / "data", progress=False) == [tmp_path / "data" / "useb"]

    plugins = {p.name: p for p in useb.task_plugins()}
    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=42, batch_size=16, progress=False)

    class LengthEmbedder:
        def encode(self, texts):
            import numpy as np

            return np.array([[len(t), t.count("a") + 1.0, 1.0] for t in texts])

    for name in ("askubuntu", "cqadupstack", "scidocs"):
        task = plugins[name].factory({k: o.default for k, o in plugins[name].options.items()}, tmp_path / "data")
        assert task.eval_dir() == tmp_path / "data" / "useb" / "data-eval" / name
        assert task.evaluate(LengthEmbedder(), ctx).scores[plugins[name].metadata.main_score] >= 0
        assert len(task.training_data(UNLABELED_SENTENCES).train) == 12


def test_useb_component_uses_the_official_archive_urls():
    import importlib.util

    from harness.tasks import useb

    spec = importlib.util.find_spec("useb")  # the public package (not imported: that takes seconds)
    if spec is None or spec.origin is None:
        pytest.skip("reference needs `pip install --no-deps useb==0.0.1`")
    source = (Path(spec.origin).parent / "downloading.py").read_text()  # holds the official URLs

    for archive in useb.USEB_ARCHIVES:
        assert f"'{archive.url}'" in source
        assert archive.sha256 is None  # UKP publishes no checksum: documented, zip CRCs are verified instead


def test_cli_lists_and_finds_a_completed_download(run_cli, tmp_path):
    code, out, _ = run_cli("data", "list")
    assert code == 0 and "useb" in out
    (tmp_path / "useb").mkdir()
    (tmp_path / "useb" / MANIFEST_NAME).write_text("{}")
    code, out, err = run_cli("data", "download", "useb", "--data-dir", tmp_path)
    assert code == 0 and f"ready: {tmp_path / 'useb'}" in out and "already downloaded" in err


@pytest.fixture()
def silent_server():
    """A TCP server that accepts connections and never sends a byte (a black-holed proxy or server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept_forever():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)

    threading.Thread(target=accept_forever, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/toy.zip"
    listener.close()
    for connection in accepted:
        connection.close()


def test_black_holed_server_fails_within_the_read_timeout_and_says_so(silent_server, tmp_path):
    import time

    from harness.download import fetch

    messages: list[str] = []
    started = time.monotonic()
    with pytest.raises(DownloadError) as error:
        fetch(
            silent_server,
            tmp_path / "toy.zip.part",
            attempts=2,
            timeout=0.5,
            connect_timeout=0.5,
            retry_wait=0.0,
            log=messages.append,
        )
    assert time.monotonic() - started < 5
    assert messages[0].startswith("connecting to 127.0.0.1:")  # said before waiting for anything
    assert "sent no data for 0.5 s" in str(error.value) and "after 2 attempts" in str(error.value)
    assert any("retrying" in message for message in messages)


def test_connection_timeout_is_separate_and_named(tmp_path, monkeypatch):
    from harness.download import fetch

    def unreachable(*args, **kwargs):
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    with pytest.raises(DownloadError, match=r"no connection to example\.invalid within 0\.5 s"):
        fetch(
            "http://example.invalid/toy.zip",
            tmp_path / "toy.zip.part",
            attempts=1,
            connect_timeout=0.5,
            log=lambda message: None,
        )


def test_default_timeouts_bound_a_hang_and_progress_is_reported_without_a_terminal(server, tmp_path, monkeypatch):
    import harness.download as download

    assert ArchiveDataset("x", "x", []).connect_timeout <= 15 and ArchiveDataset("x", "x", []).timeout <= 60
    monkeypatch.setattr(download, "PROGRESS_EVERY_SECONDS", 0.0)
    monkeypatch.setattr(download, "CHUNK_BYTES", 1 << 12)
    body = make_zip(TOY_MEMBERS, zipfile.ZIP_STORED)
    server.files["/toy.zip"] = body
    messages: list[str] = []
    download.fetch(server.url("/toy.zip"), tmp_path / "toy.zip.part", progress=False, log=messages.append)
    assert any(message.startswith("receiving ") for message in messages)
    assert any(message.startswith("toy.zip: ") and "%" in message for message in messages)
