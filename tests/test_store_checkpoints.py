"""Checkpoints carry file checksums and name the spec, seed and training data they were made of: a damaged one, or one
copied over another seed, is retrained, never loaded; their files get the mode records get; a checkpoint folder that
is a link is refused before training (docs/guide/store.md, "Checkpoints carry file checksums")."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from harness.checkpoints import build_checkpoint, checkpoint_problem
from store_toys import SMOKE, trained_be


def test_checkpoint_files_are_checksummed_and_verified(tmp_path):
    directory = tmp_path / "ckpt" / "seed-1"

    def save(folder: Path):
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 40)
        (folder / "sub").mkdir()
        (folder / "sub" / "config.json").write_text("{}")

    build_checkpoint(directory, save)
    assert checkpoint_problem(directory) is None
    manifest = json.loads((directory / "COMPLETE").read_text())
    assert set(manifest["files"]) == {"model.safetensors", "sub/config.json"}
    weights = directory / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:1000])
    assert "has 1000 bytes" in checkpoint_problem(directory)
    weights.write_bytes(original[:500] + b"\x00" * 10 + original[510:])  # same size, bytes overwritten
    assert "does not match the sha256" in checkpoint_problem(directory)
    (directory / "COMPLETE").write_text("ok\n")  # a harness 0.1 checkpoint
    assert "without file checksums" in checkpoint_problem(directory)


def test_damaged_checkpoint_is_retrained_not_loaded(run_cli, tmp_path, tiny_bert):
    results = tmp_path / "results"
    common = ("run", "--models", "be", "--train-on", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common, "--tasks", "stsb")
    assert code == 0, err
    (weights,) = (results / "checkpoints").rglob("model.safetensors")
    weights.write_bytes(weights.read_bytes()[:4096])  # truncated: used to be a SafetensorError on every re-run
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr")
    assert code == 0 and "Traceback" not in err, err
    assert "model.safetensors has 4096 bytes" in err and "training it again" in err
    assert "training be on stsb" in out and "1 cells computed, 1 from the store" in out
    assert re.search(r"records in .*; [0-9.]+ (s|min [0-9]+ s) in all", out)
    size = weights.stat().st_size
    with open(weights, "r+b") as handle:  # same size, bytes overwritten: used to load silently
        handle.seek(size - 64)
        handle.write(b"\x7f" * 64)
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr,sts12")
    assert code == 0 and "does not match the sha256" in err and "training be on stsb" in out, err
    assert checkpoint_problem(weights.parent) is None


def test_a_checkpoint_copied_over_another_seed_is_retrained_not_loaded(run_cli, tmp_path, tiny_bert):
    results = tmp_path / "results"
    common = ("run", "--models", "be", "--train-on", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common, "--tasks", "stsb", "--seeds", "42,43")
    assert code == 0, err
    (seed_42,) = (results / "checkpoints").glob("be-*/seed-42")
    shutil.rmtree(seed_42)
    shutil.copytree(seed_42.parent / "seed-43", seed_42)  # a consistent checkpoint, of the wrong seed
    assert checkpoint_problem(seed_42) is None
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr", "--seeds", "42")
    assert code == 0 and "trained with seed 43, not 42" in err and "training be on stsb" in out, err
    assert json.loads((seed_42 / "training.json").read_text())["seed"] == 42


def test_a_symlinked_checkpoint_folder_is_refused_before_training(run_cli, tmp_path, tiny_bert):
    results, common = trained_be(run_cli, tmp_path, tiny_bert)
    (checkpoint,) = (results / "checkpoints").glob("be-*/seed-42")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(checkpoint, elsewhere)
    checkpoint.symlink_to(elsewhere)
    code, out, err = run_cli(*common, "--overwrite")
    assert code == 2 and "is a symbolic link" in err and "Traceback" not in err, err
    assert "training be on stsb" not in out


def test_checkpoint_files_get_the_mode_of_records(tmp_path):
    def save(folder: Path):
        handle = os.open(folder / "model.safetensors", os.O_WRONLY | os.O_CREAT, 0o600)  # as mkstemp-based writers do
        os.write(handle, b"weights")
        os.close(handle)

    directory = build_checkpoint(tmp_path / "ckpt" / "seed-42", save)
    umask = os.umask(0)
    os.umask(umask)
    assert (directory / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (directory / "COMPLETE").stat().st_mode & 0o777 == 0o666 & ~umask
    assert checkpoint_problem(directory) is None
