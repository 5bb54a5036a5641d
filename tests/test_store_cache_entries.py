"""Cache entries are verified and name what they were made from: an edited, damaged or copied-over entry (teacher
scores, MLM checkpoints, ONNX exports, batch-probe verdicts, the backbone checksums) is computed again, never used
and never a crash (docs/guide/store.md, "Cache entries are verified", "Every cache entry names what it was made
from")."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.registry import build_registry
from store_toys import nan_run, write_toy_data


def test_edited_or_damaged_teacher_scores_are_recomputed_not_used(tmp_path, caplog):
    import torch

    from harness.cache import ArtifactCache
    from harness.plugins.augmented_sbert import cached_teacher_scores
    from harness.profiles import get_profile

    class Teacher:
        def __init__(self):
            self.network = torch.nn.Linear(2, 1)
            self.calls = 0

        def score(self, first, second):
            self.calls += 1
            return np.arange(len(first), dtype=np.float64)

    class Context:
        cache = ArtifactCache(tmp_path / "cache")
        profile = get_profile("smoke")
        logger = __import__("logging").getLogger("test")

    teacher, first, second = Teacher(), ["a", "b", "c"], ["d", "e", "f"]
    expected = cached_teacher_scores(Context, teacher, "ce", first, second)
    (path,) = (tmp_path / "cache").glob("teacher-scores-*.npy")
    assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == [0, 1, 2] and teacher.calls == 1
    edited = np.load(path)
    edited[0] = 99.0
    np.save(path, edited)  # a valid .npy with other scores: used to become silver labels
    with caplog.at_level("WARNING"):
        assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == list(expected)
    assert teacher.calls == 2 and "does not match its checksum" in caplog.text
    path.write_bytes(b"\x93NUMPY garbage")  # damaged: used to crash every later run
    assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == list(expected)
    assert teacher.calls == 3 and list(np.load(path)) == list(expected)


def test_the_mlm_cache_of_a_local_backbone_folder_is_named_by_its_files_not_its_path(tmp_path, tiny_bert):
    """Replacing the files of ``--backbone ./my`` gives the recipe another domain-adapted MLM copy, not the one trained
    from the old weights (the same rule for the recipe's cache)."""
    from harness.plugins.augmented_sbert import mlm_directory
    from harness.profiles import get_profile
    from harness.spec import backbone_content

    folder = Path(shutil.copytree(tiny_bert, tmp_path / "my"))
    registry = build_registry()

    def mlm_folder() -> Path:
        context = harness.ModelContext(
            options={"mlm_lr": 5e-5},
            backbone=str(folder),
            profile=get_profile("smoke"),
            device="cpu",
            seed=42,
            cache_dir=tmp_path / "cache",
            backbone_content=backbone_content(registry, str(folder)),
        )
        return mlm_directory(context, ["a b", "c d"], ["e f", "g h"])

    before = mlm_folder()
    assert mlm_folder() == before
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")  # other files at the same path
    assert mlm_folder() != before


def test_cached_bytes_recomputes_entries_without_a_checksum_or_that_fail_their_check(tmp_path):
    from harness.files import cached_bytes

    path = tmp_path / "cache" / "entry.bin"
    assert cached_bytes(path, lambda: b"one") == (b"one", False)
    assert cached_bytes(path, lambda: b"two") == (b"one", True)
    path.with_name("entry.bin.sha256").unlink()  # an entry of an older harness, without a checksum
    assert cached_bytes(path, lambda: b"two") == (b"two", False)
    assert cached_bytes(path, lambda: b"three", check=lambda content: content == b"three") == (b"three", False)


def test_a_cache_entry_copied_over_another_with_its_checksum_is_recomputed(tmp_path, caplog):
    from harness.files import cached_bytes

    first, second = tmp_path / "cache" / "entry-a.bin", tmp_path / "cache" / "entry-b.bin"
    assert cached_bytes(first, lambda: b"made from a", made_from={"key": "a"}) == (b"made from a", False)
    assert cached_bytes(second, lambda: b"made from b", made_from={"key": "b"}) == (b"made from b", False)
    for suffix in ("", ".sha256"):  # entry a and its side file copied over entry b
        shutil.copy(f"{first}{suffix}", f"{second}{suffix}")
    with caplog.at_level("WARNING"):
        assert cached_bytes(second, lambda: b"made from b", made_from={"key": "b"}) == (b"made from b", False)
    assert "made from something other than what its name asks for" in caplog.text
    assert cached_bytes(second, lambda: b"unused", made_from={"key": "b"}) == (b"made from b", True)
    # without made_from an entry is tied to its own file name
    third = tmp_path / "cache" / "entry-c.bin"
    cached_bytes(third, lambda: b"c")
    for suffix in ("", ".sha256"):
        shutil.copy(f"{third}{suffix}", f"{first}{suffix}")
    assert cached_bytes(first, lambda: b"made from a", made_from={"key": "a"}) == (b"made from a", False)


def test_an_onnx_export_copied_over_another_is_exported_again(tmp_path, tiny_bert):
    pytest.importorskip("onnxruntime")
    import torch
    from transformers import AutoModel

    from harness.nn.onnx_runtime import export_key, onnx_transformer

    models = [AutoModel.from_pretrained(tiny_bert).eval() for _ in range(2)]
    with torch.no_grad():
        for parameter in models[1].parameters():
            parameter.add_(0.05)
    cache = tmp_path / "cache"
    paths = []
    for model in models:
        onnx_transformer(model, cache)
        paths.append(cache / "onnx" / f"{export_key(model)}.onnx")
    for suffix in ("", ".sha256"):  # model 0's export and side file over model 1's
        shutil.copy(f"{paths[0]}{suffix}", f"{paths[1]}{suffix}")
    features = {"input_ids": torch.tensor([[2, 5, 7, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    if "token_type_ids" in onnx_transformer(models[1], cache).input_names:
        features["token_type_ids"] = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad():
        expected = models[1](**features).last_hidden_state.numpy()
    actual = onnx_transformer(models[1], cache).token_states(features).numpy()
    np.testing.assert_allclose(actual, expected, atol=1e-4)


def test_teacher_scores_of_other_pairs_copied_over_an_entry_are_scored_again(tmp_path):
    import torch

    from harness.cache import ArtifactCache
    from harness.plugins.augmented_sbert import cached_teacher_scores
    from harness.profiles import get_profile

    class Teacher:
        def __init__(self):
            self.network = torch.nn.Linear(2, 1)

        def score(self, first, second):
            return np.array([len(a) + len(b) for a, b in zip(first, second)], dtype=np.float64)

    class Context:
        cache = ArtifactCache(tmp_path / "cache")
        profile = get_profile("smoke")
        logger = __import__("logging").getLogger("test")

    teacher = Teacher()
    cached_teacher_scores(Context, teacher, "ce", ["a", "bb"], ["c", "d"])
    (path_a,) = (tmp_path / "cache").glob("teacher-scores-*.npy")
    expected = cached_teacher_scores(Context, teacher, "ce", ["eee", "f"], ["g", "h"])
    (path_b,) = set((tmp_path / "cache").glob("teacher-scores-*.npy")) - {path_a}
    for suffix in ("", ".sha256"):
        shutil.copy(f"{path_a}{suffix}", f"{path_b}{suffix}")
    assert list(cached_teacher_scores(Context, teacher, "ce", ["eee", "f"], ["g", "h"])) == list(expected) == [4, 2]


def test_a_damaged_batch_probe_verdict_is_probed_again_not_a_crash(tmp_path, monkeypatch):
    import harness.run.jobs as runner_module

    monkeypatch.setattr(runner_module.importlib_metadata, "version", lambda package: "1.0")
    write_toy_data(tmp_path / "data")
    assert [o.status for o in nan_run(tmp_path, "toy-nan-row")] == ["failed"]  # probed (it passes), verdict kept
    (verdict,) = (tmp_path / "results" / "cache" / "batch-probe").glob("*.json")
    assert json.loads(verdict.read_text())["problem"] is None
    real, probes = runner_module.batch_dependence, []
    monkeypatch.setattr(runner_module, "batch_dependence", lambda model: probes.append(1) or real(model))
    for damaged in ('{"problem": nu', '{"problem": "made up: fails every cell"}'):
        verdict.write_text(damaged)  # truncated, then edited without its checksum
        probes.clear()
        (outcome,) = nan_run(tmp_path, "toy-nan-row")
        assert probes == [1] and "NaN" in outcome.message and "made up" not in outcome.message
        assert json.loads(verdict.read_text())["problem"] is None


def test_a_wrong_sha_in_the_backbone_checksum_cache_is_not_trusted(tmp_path, tiny_bert, monkeypatch):
    import harness.fingerprint as fingerprint

    backbone, cache = tmp_path / "my", tmp_path / "cache"
    shutil.copytree(tiny_bert, backbone)
    first = fingerprint.folder_fingerprint(backbone, cache)
    cache_file = cache / fingerprint.CACHE_FILE
    content = json.loads(cache_file.read_text())
    for entries in content.values():
        for entry in entries.values():
            entry[-1] = "0" * 64  # a made-up sha for every file
    cache_file.write_text(json.dumps(content))
    monkeypatch.setattr(fingerprint, "_memo", {})
    assert fingerprint.folder_fingerprint(backbone, cache) == first
    # a file replaced by one of the same size with its old modification time (cp -p, rsync -a) is hashed again
    weights = backbone / "model.safetensors"
    stamp = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    monkeypatch.setattr(fingerprint, "_memo", {})
    assert fingerprint.folder_fingerprint(backbone, cache) != first


def test_a_cache_folder_copied_over_another_is_built_again(tmp_path, caplog):
    from harness.cache import ArtifactCache

    cache = ArtifactCache(tmp_path / "cache")
    first, second = cache.folder("domain-mlm", {"pairs": "a"}), cache.folder("domain-mlm", {"pairs": "b"})
    (first / "seed-42").mkdir()
    (first / "seed-42" / "weights").write_text("trained on a")
    assert cache.folder("domain-mlm", {"pairs": "a"}) == first and (first / "seed-42" / "weights").exists()
    shutil.rmtree(second)
    shutil.copytree(first, second)  # folder a, with what it names, over folder b
    with caplog.at_level("WARNING"):
        assert cache.folder("domain-mlm", {"pairs": "b"}) == second
    assert "made from something other than what its name asks for" in caplog.text
    assert not (second / "seed-42").exists() and json.loads((second / "MADE_FROM.json").read_text()) == {"pairs": "b"}
