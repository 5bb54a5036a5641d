"""The SLURM executor. Against a real one-node SLURM (munged, slurmctld, slurmd started by the ``slurm`` fixture,
tests/slurm_cluster.py): a smoke matrix's records equal the local executor's; an array task killed mid-job is
submitted again and resumes from the store; a killed driver is resumed by the same command, which re-attaches to
the array instead of submitting it again; an array cancelled with scancel is reported. These skip with the reason
where SLURM cannot start (not installed, not root, munge failing); `.ci/run` installs slurm-wlm and munge when it
can. With fake ``sbatch``/``squeue``/``sacct`` scripts on PATH (no SLURM at all): the retry limit and its one line,
options checked in one line, and the job file's plain-data round trip."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import start_cluster
from test_concurrent_store import _records as comparable_records
from test_concurrent_store import differences

from harness.cli import main
from harness.errors import HarnessError
from harness.executors.local import LocalExecutor
from harness.executors.slurm import (
    SlurmClient,
    SlurmExecutor,
    SlurmOptions,
    config_from_payload,
    config_payload,
)
from harness.matrix import ModelEntry
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run

NOTES = Path(os.environ.get("HARNESS_SLURM_TRANSCRIPTS", "")) if os.environ.get("HARNESS_SLURM_TRANSCRIPTS") else None


def matrix_config(results: Path, tiny_bert: str) -> RunConfig:
    return RunConfig(
        models=[ModelEntry("be"), ModelEntry("ce")],
        tasks=["stsb", "sickr"],
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=results,
        progress=False,
    )


def run_with(executor, results: Path, tiny_bert: str, lines: list[str] | None = None):
    runner = Run(build_registry(), matrix_config(results, tiny_bert), log=lines.append if lines is not None else None)
    return runner.run(executor, runner.plan(executor))


def transcript(name: str, text: str) -> None:
    """Keep a transcript for the issue's note when HARNESS_SLURM_TRANSCRIPTS names a folder."""
    if NOTES is not None:
        NOTES.mkdir(parents=True, exist_ok=True)
        (NOTES / f"slurm-{name}.log").write_text(text)


# -- no SLURM needed ---------------------------------------------------------------------------------------------------
def test_the_job_file_carries_the_config_as_plain_data_and_back(tmp_path):
    config = RunConfig(
        models=[ModelEntry("be", budget={"epochs": 2}, own_budget_keys=("epochs",)), ModelEntry("ce", train_on="stsb")],
        tasks=["stsb"],
        seeds=[1, 2],
        profile="smoke",
        results_dir=tmp_path / "store",
        budget={"max_steps": 4},
    )
    text = json.dumps(config_payload(config))  # JSON, no pickle
    assert config_from_payload(json.loads(text)) == config


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"time": "soon"}, "--slurm-time 'soon'"),
        ({"mem": "lots"}, "--slurm-mem 'lots'"),
        ({"gpus": -1}, "--slurm-gpus must be an integer of at least 0"),
        ({"max_jobs": 0}, "--slurm-max-jobs must be an integer of at least 1"),
        ({"sbatch_lines": ("constraint=a100",)}, "give one sbatch option"),
        ({"partition": "a b"}, "--slurm-partition 'a b'"),
    ],
)
def test_bad_slurm_options_are_one_line(options, message):
    with pytest.raises(HarnessError, match=message):
        SlurmOptions(**options)


def test_slurm_options_without_the_slurm_executor_are_refused(capsys):
    code = main(["run", "--models", "be", "--tasks", "stsb", "--slurm-partition", "gpu", "--slurm-max-jobs", "2"])
    assert code == 2
    assert "--slurm-partition, --slurm-max-jobs only applies with --executor slurm" in capsys.readouterr().err


def test_the_directives_carry_every_option():
    options = SlurmOptions(
        partition="gpu",
        account="lab",
        time="4:00:00",
        gpus=1,
        cpus=8,
        mem="32G",
        qos="normal",
        sbatch_lines=("--constraint=a100",),
    )
    assert options.directives() == [
        "--partition=gpu",
        "--account=lab",
        "--qos=normal",
        "--time=4:00:00",
        "--cpus-per-task=8",
        "--mem=32G",
        "--gres=gpu:1",
        "--constraint=a100",
    ]


def fake_slurm(folder: Path, final_state: str, log_line: str = "", probe_line: str = "") -> dict[str, str]:
    """sbatch, squeue and sacct as shell scripts: sbatch counts its calls and runs nothing (but writes ``log_line``
    into each task's log when given), squeue says the queue is empty, sacct says every task ended as
    ``final_state``."""
    folder.mkdir()
    write_logs = (
        'logs=$(dirname "$3")/logs; for i in 0 1; do printf "starting\\n%s\\n\\n" '
        f'{shlex.quote(log_line)} > "$logs/$id"_$i.log; done\n'
        if log_line
        else ""
    )
    scripts = {
        "sbatch": 'if [ "$1" = --version ]; then echo "slurm 22.05.8"; exit 0; fi\n'
        f'echo "$@" >> {folder}/sbatch.calls\n'
        f"id=$(wc -l < {folder}/sbatch.calls | tr -d ' ')\n"
        + write_logs
        + (f'[ "$2" = --wait ] && echo {shlex.quote(probe_line)} > "${{3%.sbatch}}.log"\n' if probe_line else "")
        + "echo $id\n",
        "squeue": "exit 0\n",
        "sacct": 'echo "${5}|' + final_state + '|1:0"\n',
        "scontrol": "exit 1\n",
    }
    for name, body in scripts.items():
        path = folder / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    "printed, job_id",
    [
        ("4242", "4242"),
        ("4242;cluster-a", "4242"),
        ("sbatch: warning: partition is draining\n4242", None),
        ("Submitted batch job 4242", None),
        ("", None),
        ("4242;", None),
    ],
)
def test_sbatch_output_that_is_not_a_job_id_is_refused_not_polled(tmp_path, printed, job_id):
    """Whatever sbatch printed was taken as the job id and polled (never found, so the jobs would be
    submitted again: duplicate jobs on a real cluster); now only `<id>` or `<id>;<cluster>` is a job id."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "sbatch").write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(printed)}\n")
    (folder / "sbatch").chmod(0o755)
    client = SlurmClient({**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"})
    if job_id is not None:
        assert client.submit(tmp_path / "array.sbatch", "0-1") == job_id
        return
    with pytest.raises(HarnessError, match="not a job id .`sbatch --parsable` prints <id> or <id>;<cluster>.") as error:
        client.submit(tmp_path / "array.sbatch", "0-1")
    assert "\n" not in str(error.value)


def test_a_task_that_keeps_failing_is_submitted_again_up_to_the_limit_then_one_line(tmp_path, tiny_bert):
    env = fake_slurm(tmp_path / "bin", "FAILED")
    executor = SlurmExecutor(SlurmOptions(retries=2), SlurmClient(env), poll_seconds=0.01)
    outcomes = run_with(executor, tmp_path / "store", tiny_bert)
    calls = (tmp_path / "bin" / "sbatch.calls").read_text().splitlines()
    assert len(calls) == 3 and all("--array=0-1" in call for call in calls[:1])  # both jobs, then twice again
    assert {o.status for o in outcomes} == {"failed"} and len(outcomes) == 4
    be = next(o.message for o in outcomes if o.spec.name == "be")
    assert be.startswith("SLURM job 3_0 failed 3 time(s) (1_0 FAILED, exit code 1:0; 2_0 FAILED")
    assert "(does the node see the store? harness validate --executor slurm checks)" in be


def test_the_failure_line_quotes_the_last_line_of_the_tasks_log(tmp_path, tiny_bert):
    env = fake_slurm(tmp_path / "bin", "FAILED", log_line="error: no data dir /scratch/data on this node")
    executor = SlurmExecutor(SlurmOptions(retries=0), SlurmClient(env), poll_seconds=0.01)
    outcomes = run_with(executor, tmp_path / "store", tiny_bert)
    message = next(o.message for o in outcomes if o.spec.name == "ce")
    assert message.startswith("SLURM job 1_1 failed 1 time(s) (1_1 FAILED, exit code 1:0); its log: ")
    assert message.endswith("/submit-0/logs/1_1.log (last line: error: no data dir /scratch/data on this node)")


def test_a_cancelled_array_is_reported_not_resubmitted(tmp_path, tiny_bert, caplog):
    env = fake_slurm(tmp_path / "bin", "CANCELLED by 0")
    executor = SlurmExecutor(SlurmOptions(), SlurmClient(env), poll_seconds=0.01)
    outcomes = run_with(executor, tmp_path / "store", tiny_bert)
    assert len((tmp_path / "bin" / "sbatch.calls").read_text().splitlines()) == 1
    assert {o.status for o in outcomes} == {"failed"}
    assert "SLURM job(s) 1_0, 1_1 were cancelled (scancel): 4 cell(s) not computed" in caplog.text
    assert all("was cancelled (scancel)" in o.message for o in outcomes)


def test_no_sbatch_on_path_is_one_line_before_any_cell(tmp_path, tiny_bert):
    executor = SlurmExecutor(SlurmOptions(), SlurmClient({**os.environ, "PATH": str(tmp_path)}))
    with pytest.raises(HarnessError, match="squeue is not on PATH: --executor slurm runs on a machine that submits"):
        run_with(executor, tmp_path / "store", tiny_bert)


def test_a_gpu_number_or_cuda_without_gpus_is_refused():
    with pytest.raises(HarnessError, match="--device cuda:1 picks a GPU by number"):
        SlurmExecutor(SlurmOptions(gpus=1)).device("cuda:1")
    with pytest.raises(HarnessError, match="--device cuda under --executor slurm needs --slurm-gpus 1"):
        SlurmExecutor(SlurmOptions()).device("cuda")
    assert SlurmExecutor(SlurmOptions(gpus=2)).device("auto") == "auto"


# -- a real SLURM ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node SLURM cluster with 2 CPUs for this module (skipped, with the reason, where it cannot start)."""
    cluster, why = start_cluster(tmp_path_factory.mktemp("slurm-cluster"))
    if cluster is None:
        pytest.skip(f"no SLURM cluster: {why}")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_bert) -> dict[str, dict]:
    results = tmp_path_factory.mktemp("local") / "results"
    assert [o.status for o in run_with(LocalExecutor(), results, tiny_bert)] == ["ok"] * 4
    return comparable_records(results)


def slurm_env(slurm) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": slurm.env["SLURM_CONF"]}


@pytest.mark.slow
def test_a_slurm_array_gives_the_records_of_the_local_executor(slurm, reference, tmp_path, tiny_bert):
    lines: list[str] = []
    executor = SlurmExecutor(SlurmOptions(cpus=1), SlurmClient(slurm_env(slurm)), poll_seconds=1)
    outcomes = run_with(executor, tmp_path / "slurm", tiny_bert, lines)
    assert [(o.spec.name, o.task.name, o.status) for o in outcomes] == [
        ("be", "stsb", "ok"),
        ("be", "sickr", "ok"),
        ("ce", "stsb", "ok"),
        ("ce", "sickr", "ok"),
    ]
    assert len(executor.submitted) == 1  # one array of two tasks (be seed 42, ce seed 42)
    assert differences(comparable_records(tmp_path / "slurm"), reference) == []
    array = executor.submitted[0]
    tasks = finished_tasks(slurm, array, 2)
    assert tasks.count("JobState=COMPLETED") == 2, tasks
    again = run_with(executor, tmp_path / "slurm", tiny_bert)
    assert {o.status for o in again} == {"cached"} and len(executor.submitted) == 1  # nothing submitted again
    fields = ("JobId", "ArrayJobId", "ArrayTaskId", "JobName", "JobState", "ExitCode", "RunTime", "NodeList")
    task_lines = [
        " ".join(item for item in line.split() if item.split("=")[0] in fields) for line in tasks.splitlines()
    ]
    transcript(
        "records-equal",
        "$ sinfo\n"
        + slurm.run("sinfo")
        + "\n".join(lines)
        + f"\n\n$ scontrol show job -o {array}  (no slurmdbd here, so no sacct)\n"
        + "\n".join(task_lines)
        + "\n\nrecords compared with a local run (minus timings, created_at, checksum, git_commit, training "
        f"seconds): {len(reference)} records, differences: {differences(comparable_records(tmp_path / 'slurm'), reference)}\n",
    )


def finished_tasks(slurm, array: str, count: int) -> str:
    """``scontrol show job -o`` of an array once its ``count`` tasks have left the queue (an array task writes its
    done file, which the driver reads, a moment before its process exits)."""
    deadline = time.monotonic() + 60
    while True:
        tasks = slurm.run("scontrol", "show", "job", "-o", array)
        ended = sum(state not in ("RUNNING", "COMPLETING", "PENDING") for state in re.findall(r"JobState=(\w+)", tasks))
        if ended >= count or time.monotonic() > deadline:
            return tasks


def killing_python(folder: Path, store: Path) -> Path:
    """A python for the array tasks that, the first time it runs the ce job, is killed (SIGKILL) once that job's
    first record is stored: a task dying in the middle of its job."""
    wrapper = folder / "python-killed-once"
    wrapper.write_text(
        f"""#!/bin/bash
if [ ! -e {folder}/killed ] && grep -q '"label": "ce seed 42"' "$4"; then
  touch {folder}/killed
  {sys.executable} "$@" &
  child=$!
  until compgen -G '{store}/ce-*/seed-42/*.json' > /dev/null; do sleep 0.05; done
  kill -9 $child
  echo "killed the harness of this task (pid $child) after the first record of its job" >&2
  exit 137
fi
exec {sys.executable} "$@"
"""
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.slow
def test_an_array_task_killed_mid_job_is_submitted_again_and_resumes(slurm, reference, tmp_path, tiny_bert, caplog):
    store = tmp_path / "slurm"
    wrapper = killing_python(tmp_path, store)
    lines: list[str] = []
    executor = SlurmExecutor(
        SlurmOptions(cpus=1, retries=1), SlurmClient(slurm_env(slurm)), poll_seconds=1, python=str(wrapper)
    )
    outcomes = run_with(executor, store, tiny_bert, lines)
    assert [o.status for o in outcomes] == ["ok"] * 4
    assert (tmp_path / "killed").exists()
    assert len(executor.submitted) == 2  # the array, then the ce job again
    first, second = executor.submitted
    assert f"SLURM job {first}_1 (ce seed 42) ended early (FAILED, exit code 137:0); submitting it again" in caplog.text
    assert differences(comparable_records(store), reference) == []
    retry_log = next((executor.run_folder / "submit-1" / "logs").glob("*.log")).read_text()
    assert "ce seed 42" in retry_log
    transcript(
        "kill-retry",
        "\n".join(lines)
        + "\n\n"
        + "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("harness.executors"))
        + f"\n\n$ scontrol show job -o {first}  |  {second}\n"
        + finished_tasks(slurm, first, 2)
        + finished_tasks(slurm, second, 1)
        + "\nthe retried task's log:\n"
        + retry_log
        + f"\nrecords equal to the local run: {differences(comparable_records(store), reference) == []}\n",
    )


def driver_command(store: Path, tiny_bert: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--models",
        "be,ce",
        "--tasks",
        "stsb,sickr",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--device",
        "cpu",
        "--results",
        str(store),
        "--no-progress",
        "--executor",
        "slurm",
        "--slurm-cpus",
        "1",
        "--slurm-max-jobs",
        "1",
    ]


@pytest.mark.slow
def test_a_killed_driver_is_resumed_by_the_same_command_without_submitting_again(slurm, reference, tmp_path, tiny_bert):
    store = tmp_path / "slurm"
    env = slurm_env(slurm)
    first = subprocess.Popen(
        driver_command(store, tiny_bert), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    while not list(store.glob("slurm/*/state.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(store.glob("slurm/*/state.json")), "the driver never submitted"
    first.send_signal(signal.SIGKILL)
    killed_output = first.communicate()[0]
    state = json.loads(next(store.glob("slurm/*/state.json")).read_text())
    assert state["submissions"] == 1
    second = subprocess.run(driver_command(store, tiny_bert), env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    state = json.loads(next(store.glob("slurm/*/state.json")).read_text())
    assert state["submissions"] == 1, second.stdout  # re-attached: nothing submitted again
    assert "submitted by an earlier driver of this command" in second.stdout
    assert "| be " in second.stdout and "| ce (trained on stsb) |" in second.stdout
    assert differences(comparable_records(store), reference) == []
    transcript(
        "driver-resume",
        "$ harness run ... --executor slurm --slurm-cpus 1 --slurm-max-jobs 1   (killed with SIGKILL once it "
        "had submitted)\n"
        + killed_output
        + "\n$ the same command again\n"
        + second.stdout
        + second.stderr
        + f"\nstate.json submissions: {state['submissions']}; records equal to the local run: "
        f"{differences(comparable_records(store), reference) == []}\n",
    )


@pytest.mark.slow
def test_an_array_cancelled_with_scancel_is_reported(slurm, tmp_path, tiny_bert):
    store = tmp_path / "slurm"
    env = slurm_env(slurm)
    driver = subprocess.Popen(
        driver_command(store, tiny_bert), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not list(store.glob("slurm/*/state.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    state = json.loads(next(store.glob("slurm/*/state.json")).read_text())
    array = next(iter(state["jobs"].values()))["task"].split("_")[0]
    subprocess.run(["scancel", array], env=env, check=True)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 1
    assert "were cancelled (scancel): 4 cell(s) not computed" in err
    assert f"failed: be seed 42 stsb, be seed 42 sickr: SLURM job {array}_0 was cancelled (scancel)" in err
    transcript("scancel", f"$ harness run ... --executor slurm   (scancel {array} after it submitted)\n{out}{err}")


def test_validate_says_when_the_probe_job_does_not_see_the_store(tmp_path, tiny_bert, capsys, monkeypatch):
    """The probe job runs (here: a fake sbatch that runs nothing) but leaves no answer in the store: one line."""
    env = fake_slurm(tmp_path / "bin", "COMPLETED")
    monkeypatch.setenv("PATH", env["PATH"])
    code = main(
        ["validate", "--models", "be", "--tasks", "stsb", "--profile", "smoke", "--backbone", tiny_bert]
        + ["--results", str(tmp_path / "store"), "--executor", "slurm", "--slurm-partition", "gpu"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "the probe job ran but did not see the result store" in err and "every node mounts" in err
    call = (tmp_path / "bin" / "sbatch.calls").read_text()
    assert "--wait" in call
    assert not list((tmp_path / "store" / "slurm" / "probes").glob("*.marker"))  # the probe cleans up


def test_validate_says_when_the_nodes_lack_the_harness(tmp_path, tiny_bert, capsys, monkeypatch):
    line = "ModuleNotFoundError: No module named 'harness'"
    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", "COMPLETED", probe_line=line)["PATH"])
    code = main(
        ["validate", "--models", "be", "--tasks", "stsb", "--profile", "smoke", "--backbone", tiny_bert]
        + ["--results", str(tmp_path / "store"), "--executor", "slurm"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"the probe job failed on its node ({line}); install the harness environment at {sys.executable}" in err


@pytest.mark.slow
def test_validate_probes_the_store_through_a_real_slurm_job(slurm, tmp_path, tiny_bert, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    code = main(
        ["validate", "--models", "be", "--tasks", "stsb", "--profile", "smoke", "--backbone", tiny_bert]
        + ["--results", str(tmp_path / "store"), "--executor", "slurm", "--slurm-cpus", "1"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        f"slurm: sbatch answers and node {socket.gethostname()} sees the store {(tmp_path / 'store').resolve()}" in out
    )
    transcript("validate", "$ harness validate ... --executor slurm --slurm-cpus 1\n" + out)


def test_an_array_task_uses_the_cpus_slurm_gave_it(monkeypatch):
    from harness.executors.slurm import task_threads

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert task_threads() == 3
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert task_threads() == len(os.sched_getaffinity(0))


def test_the_cluster_fixture_says_why_it_cannot_start(monkeypatch):
    import slurm_cluster

    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    assert slurm_cluster.why_not() == "starting slurmd needs root (the test cluster runs its daemons as root)"
    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda name: None)
    monkeypatch.setattr(slurm_cluster, "Path", lambda path: Path("/nonexistent") / path.lstrip("/"))
    assert slurm_cluster.why_not().startswith("SLURM is not installed (munged, slurmctld, slurmd, sbatch")
