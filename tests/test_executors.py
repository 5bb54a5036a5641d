"""Executors: the same matrix under `local` and under `ray` (a local cluster, 2 CPU workers) gives the same
records up to timings; a Ray worker killed mid-cell is retried and the matrix completes with the same records; a
driver that dies is resumed from the store; bad input (Ray missing, an unreachable address, GPUs a cluster does not
have) is one line before any cell runs.

The Ray tests start one local cluster for the module (a few seconds on an idle machine). They are skipped only when
Ray is not importable; CI installs it with the test extra (`pip install -e '.[test]'`)."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_concurrent_store import _records as comparable_records
from test_concurrent_store import differences

from conftest import REPO
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.store import Store

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install -e '.[ray]'); CI installs it")
# be as it is (a pretrained model: no training task) and ce trained on stsb (its default source): both paths.
MODELS, TASKS = ("be", "ce"), ("stsb", "sickr")


def matrix_config(results: Path, tiny_bert: str, **options) -> RunConfig:
    return RunConfig(
        models=[ModelEntry(m) for m in MODELS],
        tasks=list(TASKS),
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=results,
        progress=False,
        **options,
    )


def run_matrix(results: Path, tiny_bert: str, with_executor=None, **config):
    runner = Run(build_registry(), matrix_config(results, tiny_bert, **config))
    executor = with_executor or LocalExecutor()
    return runner.run(executor, runner.plan(executor))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_bert) -> dict[str, dict]:
    """The matrix's records under the local executor (this process, one PyTorch thread: conftest)."""
    results = tmp_path_factory.mktemp("local") / "results"
    outcomes = run_matrix(results, tiny_bert)
    assert [o.status for o in outcomes] == ["ok"] * 4
    return comparable_records(results)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local cluster of 2 CPUs (2 workers running 1-CPU tasks at once), shared by this module's Ray tests."""
    import ray

    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def ray_executor(**options):
    from harness.executors.ray_cluster import RayExecutor

    return RayExecutor(**options)


# -- the same records under both executors -----------------------------------------------------------------------------
@needs_ray
def test_ray_gives_the_records_of_the_local_executor(ray_cluster, reference, tmp_path, tiny_bert):
    started = time.monotonic()
    results = tmp_path / "ray"
    outcomes = run_matrix(results, tiny_bert, ray_executor())
    assert [(o.spec.name, o.task.name, o.status) for o in outcomes] == [
        ("be", "stsb", "ok"),
        ("be", "sickr", "ok"),
        ("ce", "stsb", "ok"),
        ("ce", "sickr", "ok"),
    ]
    assert differences(comparable_records(results), reference) == []
    assert len(Store(results).record_files()) == 4
    assert time.monotonic() - started < 240  # about 20 s on an idle 2-core machine; generous for a loaded one
    again = run_matrix(results, tiny_bert, ray_executor())  # a second run computes nothing
    assert {o.status for o in again} == {"cached"}


@needs_ray
def test_the_cells_of_one_model_are_served_by_the_worker_that_holds_it(ray_cluster, reference, tmp_path, tiny_bert):
    """Two long-lived workers: every cell of a job (a model spec and seed) goes to the one worker that trained or
    loaded its model, which keeps it in memory between the job's cells (no cell loads a model), and the records
    equal the local executor's."""
    executor = ray_executor()
    results = tmp_path / "ray"
    outcomes = run_matrix(results, tiny_bert, executor)
    assert [o.status for o in outcomes] == ["ok"] * 4
    assert differences(comparable_records(results), reference) == []
    where_by_job: dict[str, set[str]] = {}
    for job_label, _, served in executor.served:
        where_by_job.setdefault(job_label, set()).add(served.where)
    assert sorted(where_by_job) == ["be seed 42", "ce seed 42"] and len(executor.served) == 4
    assert all(len(where) == 1 for where in where_by_job.values()), where_by_job
    assert not [cell for cell in executor.served if cell[2].loaded_model]  # each job's model was ready in memory


@needs_ray
def test_a_worker_serving_several_jobs_gives_each_job_its_own_model(ray_cluster, tmp_path, tiny_bert):
    """One long-lived worker serves every job: ce trained with two seeds (two models of one spec) and be; each
    job's cells are computed with that job's model, not the one the worker held before (the records equal the
    local executor's, and the two seeds' scores differ)."""

    def config(results: Path) -> RunConfig:
        return RunConfig(
            models=[ModelEntry("ce"), ModelEntry("be")],
            tasks=list(TASKS),
            seeds=[1, 2],
            profile="smoke",
            backbone=tiny_bert,
            device="cpu",
            results_dir=results,
            progress=False,
        )

    local = Run(build_registry(), config(tmp_path / "local"))
    local.run(LocalExecutor(), local.plan())
    executor = ray_executor(workers=1)
    remote = Run(build_registry(), config(tmp_path / "ray"))
    outcomes = remote.run(executor, remote.plan(executor))
    assert [o.status for o in outcomes] == ["ok"] * 8
    assert differences(comparable_records(tmp_path / "ray"), comparable_records(tmp_path / "local")) == []
    assert len({served.where for _, _, served in executor.served}) == 1  # one worker computed every cell
    scores = {(o.spec.name, o.seed, o.task.name): o.main_score for o in outcomes}
    assert scores[("ce", 1, "stsb")] != scores[("ce", 2, "stsb")]  # a stale model would give equal scores


def _children(pid: int) -> list[int]:
    """Every process below ``pid`` (the local cluster's raylet and its workers are this test process's)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    below, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent:
                below.append(child)
                frontier.append(child)
    return below


def _title(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _kill_the_first_cell(killed: list[tuple[int, str]], finished: threading.Event) -> None:
    """SIGKILL the first Ray worker seen evaluating a cell."""
    while not finished.is_set() and not killed:
        for pid in _children(os.getpid()):
            title = _title(pid)  # Ray names a busy server after its call: "ray::CellServer.evaluate"
            if title.startswith("ray::CellServer.evaluate"):
                os.kill(pid, signal.SIGKILL)
                killed.append((pid, title))
                return
        time.sleep(0.02)


@contextmanager
def _killing_the_first_cell() -> Iterator[list[tuple[int, str]]]:
    """For the block, a thread that kills the first Ray worker seen evaluating a cell; yields the (pid, title) of
    the killed worker once it has done so."""
    killed: list[tuple[int, str]] = []
    finished = threading.Event()
    killer = threading.Thread(target=_kill_the_first_cell, args=(killed, finished), daemon=True)
    killer.start()
    try:
        yield killed
    finally:
        finished.set()
        killer.join()


@needs_ray
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds Ray's worker processes through /proc (Linux)")
def test_a_worker_killed_mid_cell_is_retried_and_the_matrix_completes(
    ray_cluster, reference, tmp_path, tiny_bert, caplog
):
    """A long-lived Ray worker is killed (SIGKILL, by its PID) while it evaluates a cell: the driver starts a new
    worker and sends it the dead one's unfinished calls (it loads the model from its checkpoint), says so in one
    line, no record is half-written, and every record equals the clean local run's."""
    results = tmp_path / "ray"
    with _killing_the_first_cell() as killed:
        outcomes = run_matrix(results, tiny_bert, ray_executor())
    assert killed, "no worker was seen running a cell"
    assert "a Ray worker died while computing" in caplog.text and "a new worker computes their" in caplog.text
    assert [o.status for o in outcomes] == ["ok"] * 4
    assert differences(comparable_records(results), reference) == []
    assert not [p for p in results.rglob(".*") if "harness-tmp" in p.name]  # no temporary left in the store


@needs_ray
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds Ray's worker processes through /proc (Linux)")
def test_a_worker_that_dies_more_often_than_allowed_stops_the_run_in_one_line(
    ray_cluster, reference, tmp_path, tiny_bert
):
    """With no retries allowed, a worker killed mid-cell stops the run with one line naming the job; the cells
    finished before are stored, and no lock is left held (a rerun would resume)."""
    from harness.errors import HarnessError

    results = tmp_path / "ray"
    with (
        _killing_the_first_cell() as killed,
        pytest.raises(HarnessError, match=r"the Ray worker computing \S+ seed 42 died 1 time\(s\); finished"),
    ):
        run_matrix(results, tiny_bert, ray_executor(max_retries=0))
    assert killed
    stored_before = len(Store(results).record_files())
    outcomes = run_matrix(results, tiny_bert, ray_executor())  # the rerun completes the matrix
    statuses = [o.status for o in outcomes]
    assert statuses.count("cached") == stored_before and statuses.count("ok") == 4 - stored_before
    assert differences(comparable_records(results), reference) == []


@needs_ray
def test_a_rerun_after_the_driver_died_resumes_from_the_store(reference, tmp_path, tiny_bert):
    """The driver (`harness run --executor ray`, with its own local cluster) is killed once its first record is
    stored; running the command again computes only what is missing, and the records equal a clean run's."""
    results = tmp_path / "results"
    command = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--models",
        ",".join(MODELS),
        "--tasks",
        ",".join(TASKS),
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        str(results),
        "--device",
        "cpu",
        "--no-progress",
        "--executor",
        "ray",
        "--ray-address",
        "local",
        "--cpus-per-task",
        "1",
    ]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}  # one thread, as the reference
    driver = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment, start_new_session=True
    )  # its cluster's processes share its session: killed with it
    deadline = time.monotonic() + 300
    while not Store(results).record_files():
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[0]
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    stored_before = {path.name for path in Store(results).record_files()}
    assert stored_before
    rerun = subprocess.run(command[:-6], capture_output=True, text=True, env=environment, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(stored_before)} from the store" in rerun.stdout
    assert differences(comparable_records(results), reference) == []


# -- bad input: one line, before any cell runs -------------------------------------------------------------------------
def _no_cell_ran(results: Path) -> bool:
    return not Store(results).record_files()


def test_ray_not_installed_is_one_line(run_cli, tmp_path, tiny_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        tmp_path / "results",
        "--executor",
        "ray",
    )
    assert code == 2 and err.count("\n") == 1
    assert "--executor ray needs Ray" in err and "pip install 'sentence-harness[ray]'" in err
    assert out == "" and _no_cell_ran(tmp_path / "results")


@needs_ray
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_unreachable_ray_address_is_one_line(run_cli, tmp_path, tiny_bert, scheme):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        tmp_path / "results",
        "--executor",
        "ray",
        "--ray-address",
        f"{scheme}127.0.0.1:{port}",
    )
    assert code == 2 and err.count("\n") == 1
    assert f"cannot reach the Ray cluster at {scheme}127.0.0.1:{port}" in err
    assert time.monotonic() - started < 30 and _no_cell_ran(tmp_path / "results")


@needs_ray
def test_a_gpu_request_on_a_cluster_without_gpus_is_one_line(ray_cluster, run_cli, tmp_path, tiny_bert):
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        tmp_path / "results",
        "--executor",
        "ray",
        "--gpus-per-task",
        "1",
    )
    assert code == 2 and err.count("\n") == 1
    assert "--gpus-per-task 1: the local Ray cluster has no GPUs" in err and "--gpus-per-task 0" in err
    assert _no_cell_ran(tmp_path / "results")


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (("--executor", "kubernetes"), "invalid value 'kubernetes' for --executor; allowed values: local, ray, slurm"),
        (("--ray-address", "auto"), "--ray-address only applies with --executor ray"),
        (("--gpus-per-task", "1"), "--gpus-per-task only applies with --executor ray"),
    ],
)
def test_executor_options_are_checked(run_cli, tmp_path, arguments, expected):
    code, _, err = run_cli("run", "--models", "be", "--tasks", "stsb", "--results", tmp_path / "results", *arguments)
    assert code == 2 and expected in err and err.count("\n") == 1


def test_progress_is_a_line_per_cell_and_a_bar_of_cells_done_with_an_eta(capsys, monkeypatch):
    import harness.progress
    from harness.executors.progress import CellProgress

    monkeypatch.setattr(harness.progress, "on_terminal", lambda: True)  # the bar is for a terminal (logs: LogProgress)

    from harness.run.driver import RunLog

    lines: list[str] = []
    log = RunLog(lines.append)  # the run's log: its models, its worker and the executor say their lines through it
    with CellProgress(log, total=2, enabled=True) as progress:
        assert log.sink != lines.append  # diverted above the bar while it is drawn
        log("  be seed 42 stsb: 71.00 (1.0s)")  # the runner's line for a finished cell, written above the bar
        progress.advance()
        log("  be seed 42 sickr: 65.00 (1.0s)")
        progress.advance()
    assert lines == ["  be seed 42 stsb: 71.00 (1.0s)", "  be seed 42 sickr: 65.00 (1.0s)"]
    assert log.sink == lines.append  # the run's own sink is back
    bar = capsys.readouterr().err
    assert "cells:" in bar and "2/2" in bar and "<" in bar  # cells done / total, then elapsed<remaining (ETA)


def test_the_ray_dispatch_steps_claim_send_record_and_replace_a_lost_server_without_ray(tmp_path):
    """RayExecutor.run's steps (harness.executors.ray_dispatch.Dispatch) with a fake Ray: jobs go to the least loaded
    server (at most JOBS_PER_SERVER each), every call of a job to one server, each answered cell is recorded by the
    driver's writer and finishes its job; a lost server is replaced and the new one gets the unfinished calls."""
    from types import SimpleNamespace

    from harness.executors.ray_dispatch import JOBS_PER_SERVER, Dispatch, _Pending, _ServerLost
    from harness.run.driver import RunLog

    class Lock:
        released = 0

        def acquire(self, blocking=True, timeout=None, on_wait=None):
            return True

        def release(self):
            Lock.released += 1

        def holder(self):
            return "nobody"

    class Server:
        def __init__(self, name):
            self.name = name
            self.prepare = SimpleNamespace(remote=lambda job: ("prepare", self.name, job.label))
            self.evaluate = SimpleNamespace(remote=lambda job, index: ("evaluate", self.name, job.label, index))

    recorded, lines = [], []
    worker = SimpleNamespace(
        log=RunLog(lines.append),
        cells_lock=lambda job: Lock(),
        recheck=lambda job: ([], job),
        record=lambda cell: recorded.append(cell) or cell,
    )
    jobs = [SimpleNamespace(label=f"job {n}", tasks=("stsb", "sickr")) for n in range(5)]
    killed, fresh = [], iter(Server(f"new {n}") for n in range(3))
    ray = SimpleNamespace(kill=lambda server, no_restart: killed.append(server.name))
    dispatch = Dispatch(ray, worker, jobs, [Server("a"), Server("b")], lambda: next(fresh), 3, None)
    progress = SimpleNamespace(advance=lambda cells=1: None)

    dispatch.claim_what_is_free(progress, blocking=False)
    assert dispatch.jobs_on == [JOBS_PER_SERVER, JOBS_PER_SERVER] and len(dispatch.unclaimed) == 1
    assert len(dispatch.waiting) == 4 * 3  # per job: prepare and two cells, all to the job's server
    servers_of = {}
    for ref in dispatch.waiting:
        servers_of.setdefault(ref[2], set()).add(ref[1])
    assert all(len(servers) == 1 for servers in servers_of.values())

    first = next(ref for ref, (kind, pending, _) in dispatch.waiting.items() if kind == "cell")
    _, pending, index = dispatch.waiting.pop(first)
    dispatch.record(pending, index, "cell result", progress)
    assert recorded == ["cell result"] and pending.cells_left == 1 and pending.done == {index}

    lost: _Pending = next(p for _, p, _ in dispatch.waiting.values() if p.server == 1)
    dispatch.replace_server(lost)
    assert killed == ["b"] and dispatch.servers[1].name == "new 0"
    resent = [ref for ref in dispatch.waiting if ref[1] == "new 0"]
    assert len(resent) == 2 * 3 and not [ref for ref in dispatch.waiting if ref[1] == "b"]
    assert all(p.attempts == 2 for _, p, _ in dispatch.waiting.values() if p.server == 1)

    class Failing:
        def get(self, ray, ref, kind, pending, index):
            raise _ServerLost()

    some_ref = next(iter(dispatch.waiting))
    dispatch.answer(some_ref, Failing(), progress)  # a server lost while answering is replaced, not raised
    assert len(killed) == 2
    dispatch.release_claims()
    assert Lock.released == len(dispatch.held) == 4  # no job finished: every claim is still held, then released
