"""GPU readiness without a GPU: device resolution honours CUDA_VISIBLE_DEVICES, mixed precision is
chosen per device, training spreads over GPUs only for plain ``cuda``, and a Ray task's resources and device are
what it asked for. torch's CUDA queries are faked where a test needs a GPU that this machine does not have; one test
starts a Ray cluster that declares two (fake) GPUs and checks that each task is shown exactly its own."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from harness.device import (
    autocast,
    autocast_dtype,
    check_device_name,
    hardware_description,
    resolve_device,
    seed_everything,
    visible_cuda_devices,
)
from harness.errors import HarnessError, InvalidOptionError
from harness.executors.ray_cluster import ResourceRequestError, task_resources
from harness.executors.ray_worker import TaskResources, threads_for, worker_device


@pytest.fixture()
def fake_gpus(monkeypatch):
    """Pretend torch sees ``count`` CUDA GPUs (bf16 support as given); returns the setter."""

    def set_gpus(count: int, bf16: bool = True) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)

    return set_gpus


# -- device names and CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:0", "cuda:3", "mps"])
def test_known_device_names_pass(name):
    assert check_device_name(name) == name


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cpu:0", "cuda:", "tpu"])
def test_unknown_device_names_are_one_clear_error(name):
    with pytest.raises(InvalidOptionError, match="--device"):
        check_device_name(name)


def test_visible_devices_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_cuda_devices() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert visible_cuda_devices() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_cuda_devices() == []


def test_cuda_n_beyond_the_visible_gpus_names_cuda_visible_devices(fake_gpus, monkeypatch):
    """A process shown one GPU (CUDA_VISIBLE_DEVICES=3, as Ray does for a task) calls it cuda:0."""
    fake_gpus(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert resolve_device("cuda:0") == "cuda:0"
    assert resolve_device("auto") == "cuda"
    with pytest.raises(InvalidOptionError, match=r"only 1 GPU\(s\) are visible \(CUDA_VISIBLE_DEVICES: 3\)"):
        resolve_device("cuda:1")


def test_cuda_without_a_gpu_says_what_is_visible(fake_gpus, monkeypatch):
    fake_gpus(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(InvalidOptionError, match=r"sees no CUDA GPU \(CUDA_VISIBLE_DEVICES: none\)"):
        resolve_device("cuda")


# -- mixed precision and several GPUs ----------------------------------------------------------------------------------
def test_autocast_is_chosen_per_device(fake_gpus, monkeypatch):
    monkeypatch.delenv("HARNESS_NO_AMP", raising=False)
    fake_gpus(1, bf16=True)
    assert autocast_dtype("cpu") is None and autocast_dtype("mps") is None
    assert autocast_dtype("cuda") == torch.bfloat16 and autocast_dtype("cuda:0") == torch.bfloat16
    fake_gpus(1, bf16=False)  # e.g. a V100 or T4: float16, and training then uses a gradient scaler
    assert autocast_dtype("cuda") == torch.float16
    monkeypatch.setenv("HARNESS_NO_AMP", "1")
    assert autocast_dtype("cuda") is None


def test_autocast_on_the_cpu_is_a_no_op():
    with autocast("cpu"):
        assert not torch.is_autocast_enabled()


def test_hardware_names_the_gpu_in_use(fake_gpus, monkeypatch):
    """cuda:1 is GPU 1 alone (it was described as 'GPU-0 x2'); plain cuda is the current GPU, one process."""
    fake_gpus(2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"GPU-{index}")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert hardware_description("cuda:1") == "cuda (GPU-1 x1)"
    assert hardware_description("cuda") == "cuda (GPU-0 x1)"


def test_seeding_asks_cuda_for_deterministic_kernels(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seed_everything(1)
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_to_device_moves_a_batch_encoding_and_nested_structures():
    """The collates of be and classifier return the tokenizer's BatchEncoding (a Mapping, not a dict)."""
    from collections import namedtuple

    from transformers import BatchEncoding

    from harness.training import to_device

    Pair = namedtuple("Pair", "first second")
    batch = {
        "first": BatchEncoding({"input_ids": torch.ones(2, 3)}),
        "pair": Pair([torch.zeros(1)], (torch.ones(1),)),
        "label": "x",
    }
    moved = to_device(batch, torch.device("meta"))
    assert moved["first"]["input_ids"].device.type == "meta"
    assert moved["pair"].first[0].device.type == "meta" and moved["pair"].second[0].device.type == "meta"
    assert isinstance(moved["pair"], Pair) and moved["label"] == "x"


def test_the_record_names_the_precision_used():
    from harness import training

    class Square(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(2))

        def forward(self, inputs):
            return (self.weight * inputs).pow(2).mean()

    examples = [torch.ones(2)] * 4
    collate = lambda rows: {"inputs": torch.stack(rows)}  # noqa: E731
    for precision, used in (("auto", "fp32"), ("bf16", "bf16"), ("fp16", "fp16")):
        report = training.fit(
            Square(), examples, collate, training.TrainConfig(batch_size=2, progress=False, precision=precision)
        )
        assert report.applied_budget["precision"] == precision and report.applied_budget["precision_used"] == used


def test_training_on_the_cpu_uses_no_scaler_and_no_data_parallel(monkeypatch):
    """The CPU path of the shared loop by default: no autocast, no GradScaler, no DistributedDataParallel."""
    from torch import nn

    from harness import training

    made: list[str] = []
    monkeypatch.setattr(torch.amp, "GradScaler", lambda *a, **k: made.append("scaler"))
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel", lambda *a, **k: made.append("data-parallel"))

    class Regression(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 1)

        def forward(self, inputs, targets):
            return ((self.linear(inputs).squeeze(-1) - targets) ** 2).mean()

    examples = [([float(i), 1.0], float(i)) for i in range(8)]

    def collate(batch):
        return {"inputs": torch.tensor([x for x, _ in batch]), "targets": torch.tensor([y for _, y in batch])}

    report = training.fit(
        Regression(), examples, collate, training.TrainConfig(batch_size=4, device="cpu", progress=False)
    )
    assert report.steps == 2 and made == []


# -- Ray task resources ------------------------------------------------------------------------------------------------
def node(cpus: float, gpus: float = 0, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": cpus, **({"GPU": gpus} if gpus else {})}}


def test_one_gpu_per_task_by_default_on_a_gpu_cluster():
    assert task_resources(None, 4, "auto", [node(16, 4), node(16, 4)]) == TaskResources(4.0, 1.0)
    assert task_resources(None, 1, "cuda", [node(8, 2)]) == TaskResources(1.0, 1.0)
    assert TaskResources(4.0, 1.0).as_options() == {"num_cpus": 4.0, "num_gpus": 1.0}


def test_no_gpu_by_default_on_a_cpu_cluster_or_for_the_cpu_device():
    assert task_resources(None, 1, "auto", [node(2)]) == TaskResources(1.0, 0.0)
    assert task_resources(None, 2, "cpu", [node(8, 4)]) == TaskResources(2.0, 0.0)


def test_explicit_gpu_shares_and_counts():
    assert task_resources(0.5, 1, "auto", [node(8, 1)]) == TaskResources(1.0, 0.5)  # two small models per GPU
    assert task_resources(0, 1, "auto", [node(8, 4)]) == TaskResources(1.0, 0.0)


@pytest.mark.parametrize(
    "gpus, cpus, device, nodes, message",
    [
        (1, 1, "auto", [node(2)], "--gpus-per-task 1: the Ray cluster has no GPUs (CPUs: 2); use --gpus-per-task 0"),
        (None, 1, "cuda", [node(2)], "--device cuda under --executor ray needs --gpus-per-task 1"),
        (0, 1, "cuda", [node(2, 2)], "--device cuda under --executor ray needs --gpus-per-task 1"),
        (1, 1, "auto", [node(8, 0.5)], "no node of the Ray cluster has that many GPUs (the most on one node: 0.5)"),
        (2, 1, "cuda", [node(8, 4)], "a Ray task trains on one GPU (or a share of one); to train one model on several"),
        (1, 16, "auto", [node(8, 1)], "--cpus-per-task 16: no node of the Ray cluster has that many CPUs"),
        (1, 1, "cpu", [node(8, 1)], "--device cpu with --gpus-per-task 1 would hold GPUs it never uses"),
        (None, 1, "cuda:1", [node(8, 2)], "--device cuda:1 picks a GPU by number"),
        (1.5, 1, "auto", [node(8, 2)], "ask for whole GPUs"),
        (-1, 1, "auto", [node(8, 2)], "--gpus-per-task must be 0 or more"),
        (None, 0, "auto", [node(8, 2)], "--cpus-per-task must be positive"),
        (1, 1, "auto", [node(8, 4, alive=False), node(8)], "has no GPUs"),  # a dead node's GPUs do not count
    ],
)
def test_requests_a_cluster_cannot_meet_are_one_clear_line(gpus, cpus, device, nodes, message):
    with pytest.raises(HarnessError) as caught:
        task_resources(gpus, cpus, device, nodes)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_gpu_cluster_without_gpus_is_a_resource_error():
    with pytest.raises(ResourceRequestError):
        task_resources(1, 1, "auto", [node(4)])


def test_a_task_uses_a_gpu_exactly_when_it_reserved_one():
    assert worker_device("auto", 1.0) == "cuda" and worker_device("cuda", 0.5) == "cuda"
    assert worker_device("auto", 0.0) == "cpu" and worker_device("cuda", 0.0) == "cpu"  # never an unreserved GPU
    assert worker_device("cpu", 0.0) == "cpu" and worker_device("mps", 0.0) == "mps"
    assert threads_for(4.0) == 4 and threads_for(0.5) == 1


FAKE_GPU_CLUSTER = textwrap.dedent("""
    import json, os, ray
    from harness.executors.ray_worker import TaskResources, worker_device
    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, logging_level="ERROR")
    resources = TaskResources(1.0, 1.0)

    @ray.remote
    def what_the_task_sees():
        return os.environ.get("CUDA_VISIBLE_DEVICES"), ray.get_gpu_ids(), worker_device("auto", resources.num_gpus)

    seen = ray.get([what_the_task_sees.options(**resources.as_options()).remote() for _ in range(2)])
    print(json.dumps(seen))
    ray.shutdown()
""")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed; CI installs it")
def test_each_ray_task_sees_exactly_the_gpu_it_asked_for():
    """Ray (with two declared GPUs, none real) shows a 1-GPU task its own GPU through CUDA_VISIBLE_DEVICES, which the
    harness then uses as ``cuda``, i.e. cuda:0 of that task."""
    import os

    # Ray decides what each task sees; the suite's CUDA_VISIBLE_DEVICES="" (conftest) would hide its fake GPUs.
    environment = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    run = subprocess.run(
        [sys.executable, "-c", FAKE_GPU_CLUSTER], capture_output=True, text=True, timeout=600, env=environment
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert all(device == "cuda" and len(ids) == 1 and visible == str(ids[0]) for visible, ids, device in seen), seen


def test_cpu_bf16_support_is_a_plain_answer(monkeypatch):
    from harness.device import cpu_bf16_supported

    assert isinstance(cpu_bf16_supported(), bool)

    def missing():
        raise AttributeError("no such query in this build")

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", missing, raising=False)
    assert cpu_bf16_supported() is False


def test_a_ray_worker_hands_cached_gpu_memory_back_between_jobs(monkeypatch):
    """Two workers sharing a GPU (--gpus-per-task 0.5): each empties PyTorch's cache when it drops a job's model."""
    from harness.executors import ray_worker

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))

    class Work:
        def release(self):
            pass

        def model(self, job):
            return ("model", 0.0, None)

    server = ray_worker.CellServer.__new__(ray_worker.CellServer)
    server.cell_work, server._held, server._model = Work(), None, (None, 0.0, None)

    class Job:
        class trained:
            key = "k"

        seed = 1

    server._job_model(Job())
    assert emptied == [True]


def test_tests_not_marked_gpu_run_as_on_a_machine_without_one():
    """tests/conftest.py pins every test that is not marked gpu to the CPU: --device auto resolves to cpu here and
    in the processes a test starts, so the suite means the same on a GPU machine."""
    import os

    assert resolve_device("auto") == "cpu" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


FREED_BLOCK_FAULTS = textwrap.dedent(
    """
    import resource, sys, torch
    from harness import device
    if sys.argv[1] == "keep" and not device.keep_freed_cpu_memory():
        print("not glibc")
        sys.exit(0)
    assert sys.argv[1] != "keep" or device.keep_freed_cpu_memory() is True  # once per process, the same answer after
    for _ in range(3):  # 64 MB allocated and freed as a training step does; the heap grows to hold it
        torch.zeros(16 * 1024 * 1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        torch.zeros(16 * 1024 * 1024)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def test_cpu_training_reuses_freed_memory_instead_of_faulting_in_new_pages(monkeypatch):
    """After keep_freed_cpu_memory (what harness.training.fit calls on the CPU) a freed 64 MB block is served again
    without faulting in its pages anew, once the heap has grown to hold it (glibc by default unmaps blocks over
    32 MB when freed); a user's own MALLOC_* setting keeps it from touching the allocator.

    The pages are counted in a fresh process: in the test process the heap is shaped by every test before, and the
    setting would stay for the rest of the session."""
    from harness import device

    monkeypatch.setattr(device, "_allocator_kept", None)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert device.keep_freed_cpu_memory() is False
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc is the allocator measured here")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    faults = {}
    for mode in ("keep", "default"):
        done = subprocess.run(
            [sys.executable, "-c", FREED_BLOCK_FAULTS, mode],
            capture_output=True,
            text=True,
            env=environment,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        if done.stdout.strip() == "not glibc":
            pytest.skip("glibc's malloc is not this process' allocator")
        faults[mode] = int(done.stdout)
    # glibc's default faults in all three blocks (49,152 pages); kept memory serves at least two without a fault.
    assert faults["default"] > 16_384 >= faults["keep"], faults
