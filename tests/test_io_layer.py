"""The store's one I/O layer (harness.files): the embedding cache never reads, writes or removes through a
link out of the store nor opens a FIFO; the site and plots show curves only from a checkpoint that verifies and
skip malformed ones with one warning; the site's texts come from the data each record names; the site's folder is
replaced whole and never the store."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import harness
from harness import testing as ht
from harness.checkpoints import build_checkpoint
from harness.curves import load_training_curves
from harness.embedding_cache import EmbeddingCache, text_digest
from harness.leaderboard.site_tables import row_curves
from store_toys import finishes

REPO = Path(__file__).resolve().parent.parent


def _vectors(texts: list[str]) -> np.ndarray:
    return np.arange(len(texts) * 4, dtype=np.float32).reshape(len(texts), 4) + 1


def _cache(tmp_path: Path, limit_mib: float = 2048.0) -> tuple[Path, EmbeddingCache]:
    store = tmp_path / "store"
    (store / "cache" / "embeddings").mkdir(parents=True)
    return store, EmbeddingCache(store / "cache" / "embeddings", limit_mib)


# -- the embedding cache through the safe layer -----------------------------------------------------------------------
def test_a_namespace_linked_out_of_the_store_is_never_read_emptied_or_written(tmp_path, caplog):
    store, cache = _cache(tmp_path)
    outside = tmp_path / "someone-elses-model"
    outside.mkdir()
    (outside / "model.safetensors").write_bytes(b"weights that are not a shard")
    determinants = {"model": "m"}
    namespace = store / "cache" / "embeddings" / cache.namespace(determinants)
    namespace.symlink_to(outside, target_is_directory=True)
    vectors = cache.encode(determinants, ["a", "b"], _vectors)
    assert vectors.tolist() == _vectors(["a", "b"]).tolist()
    assert sorted(path.name for path in outside.iterdir()) == ["model.safetensors"]  # nothing removed, nothing added
    assert (outside / "model.safetensors").read_bytes() == b"weights that are not a shard"
    assert not namespace.is_symlink() and len(list(namespace.glob("*.safetensors"))) == 1  # a real folder now
    assert "outside" in caplog.text


def test_a_shard_linking_out_is_not_read_and_a_fifo_shard_does_not_hang(tmp_path):
    store, cache = _cache(tmp_path)
    determinants = {"model": "m"}
    shard = cache.add(cache.namespace(determinants), [text_digest("a")], _vectors(["a"]))
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(shard, outside)
    shard.symlink_to(outside)  # a valid shard, but served from outside the store
    cache.forget()
    assert cache.lookup(cache.namespace(determinants), [text_digest("a")]) == {}
    assert outside.is_file()  # the link is removed, never its target
    if shard.is_symlink():
        shard.unlink()
    os.mkfifo(shard)
    cache.forget()
    assert finishes(lambda: cache.lookup(cache.namespace(determinants), [text_digest("a")])) == {}
    counts = harness.embedding_cache.CacheCounts()
    encoded = finishes(lambda: cache.encode(determinants, ["a"], _vectors, counts))
    assert encoded.tolist() == _vectors(["a"]).tolist() and counts.misses == 1


def test_eviction_never_removes_a_file_through_a_link(tmp_path):
    store, cache = _cache(tmp_path, limit_mib=0)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.safetensors").write_bytes(b"x" * 100)
    (store / "cache" / "embeddings" / "linked").symlink_to(outside, target_is_directory=True)
    real = store / "cache" / "embeddings" / "real"
    real.mkdir()
    (real / "link.safetensors").symlink_to(outside / "kept.safetensors")
    cache.add("real", [text_digest("a")], _vectors(["a"]))
    assert (outside / "kept.safetensors").read_bytes() == b"x" * 100
    assert not list(real.glob("[0-9a-f]*.safetensors"))  # the cap of 0 evicted the real shard


def test_a_run_never_deletes_or_writes_through_a_linked_cache_folder(tmp_path, tiny_bert):
    """The issue's probe: `run --overwrite` over a store whose embedding namespace links to a model folder."""
    store = tmp_path / "S"
    run = ("run", "--models", "be", "--backbone", tiny_bert, "--profile", "smoke", "--no-progress")
    first = ht.run_harness(*run, "--tasks", "stsb", "--results", store)
    assert first.exit_code == 0, first.stderr
    (namespace,) = (store / "cache" / "embeddings").iterdir()
    outside = tmp_path / "model-folder"
    outside.mkdir()
    (outside / "model.safetensors").write_bytes(b"someone's weights")
    shutil.rmtree(namespace)
    namespace.symlink_to(outside, target_is_directory=True)
    again = ht.run_harness(*run, "--tasks", "stsb", "--results", store, "--overwrite")
    assert again.exit_code == 0, again.stderr
    assert [path.name for path in outside.iterdir()] == ["model.safetensors"]
    assert (outside / "model.safetensors").read_bytes() == b"someone's weights"


# -- curves only from a verified checkpoint; malformed ones skipped with one warning ------------------------------------
def _trained_store(tmp_path: Path, training: dict | str) -> tuple[Path, Path, SimpleNamespace]:
    """A store with one checkpoint (built as the runner builds one: COMPLETE names training.json's sha256) and a row
    whose seed-42 record sits beside it."""
    store = tmp_path / "store"
    checkpoint = store / "checkpoints" / "be-abc" / "seed-42"
    content = training if isinstance(training, str) else json.dumps(training)
    build_checkpoint(checkpoint, lambda folder: (folder / "training.json").write_text(content))
    record = store / "be-abc" / "seed-42" / "stsb.json"
    return store, checkpoint, SimpleNamespace(cells={"stsb": SimpleNamespace(records={42: str(record)})})


def _curves(value: float) -> dict:
    series = {"step": [1, 2], "value": [value, value / 2], "stride": 1}
    return {"format": 1, "fits": [{"fit": 0, "seed": 42, "steps": 2, "loss": {"loss": series}}]}


def _training(curves) -> dict:
    return {"spec": {"label": "be", "name": "be", "hash": "h" * 64, "train_on": "stsb"}, "seed": 42, "curves": curves}


def test_curves_are_shown_only_from_a_checkpoint_that_verifies(tmp_path, caplog):
    store, checkpoint, row = _trained_store(tmp_path, _training(_curves(2.0)))
    assert [fit["series"]["loss: loss"]["value"] for fit in row_curves(row)] == [[2.0, 1.0]]
    assert sorted(load_training_curves(store)["value"]) == [1.0, 2.0]
    (checkpoint / "training.json").write_text(json.dumps(_training(_curves(0.5))))  # edited after it was built
    assert row_curves(row) == [] and "checkpoint does not verify" in caplog.text  # left out with a warning
    frame = load_training_curves(store)
    assert frame.empty and "checkpoint does not verify" in frame.attrs["skipped"][0][1]


def test_a_fifo_training_record_hangs_neither_site_curves_nor_plots(tmp_path):
    store, checkpoint, row = _trained_store(tmp_path, _training(_curves(2.0)))
    (checkpoint / "training.json").unlink()
    os.mkfifo(checkpoint / "training.json")
    assert finishes(lambda: row_curves(row)) == []
    assert finishes(lambda: load_training_curves(store)).empty


@pytest.mark.parametrize("fits", [[1], "abc", [{"fit": 0, "loss": {"loss": "not a series"}}]])
def test_malformed_curves_are_skipped_with_one_warning_like_load_training_curves(tmp_path, caplog, fits):
    store, _, row = _trained_store(tmp_path, _training({"format": 1, "fits": fits}))
    assert row_curves(row) == []  # harness 0.x: AttributeError / TypeError out of `harness site`
    caplog.clear()
    skipped: dict[str, str] = {}
    assert row_curves(row, skipped) == [] and row_curves(row, skipped) == []  # two tables show the row
    assert caplog.text.count("its curves are left out of the site") == 1
    frame = load_training_curves(store)
    assert frame.empty and [path for path, _ in frame.attrs["skipped"]] == list(skipped)


def test_site_plot_and_leaderboard_do_not_hang_on_a_fifo_training_record(tmp_path):
    store = tmp_path / "store"
    run = ht.run_harness(
        *("run", "--models", "testing-trainable", "--train-on", "stsb", "--tasks", "stsb"),
        *("--seeds", "42", "--profile", "smoke", "--results", store, "--no-progress"),
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    (training,) = (store / "checkpoints").glob("*/seed-42/training.json")
    training.unlink()
    os.mkfifo(training)
    site = finishes(lambda: ht.run_harness("site", "--to", tmp_path / "site", "--results", store, "--include-samples"))
    assert site.exit_code == 0, site.stderr
    board = finishes(
        lambda: ht.run_harness(
            *("leaderboard", "--results", store, "--formats", "html", "--include-samples"),
            *("--output", tmp_path / "board"),
        )
    )
    assert board.exit_code == 0, board.stderr
    plot = finishes(lambda: ht.run_harness("plot", "training", "--results", store, "--output", tmp_path / "plots"))
    assert plot.exit_code != 0 and "no training curves" in plot.stderr and "Traceback" not in plot.stderr


# -- the site's texts come from the data the record names -----------------------------------------------------------
def _texts(site: Path) -> dict:
    (path,) = (site / "data" / "texts").glob("*.json")
    return json.loads(path.read_text())


def test_site_texts_come_from_the_records_data_or_are_withheld_with_the_reason(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(REPO / "tasks" / "data" / "stsb", data / "stsb")
    for test_file in (data / "stsb" / "sts-test.csv", data / "stsb" / "senteval_tokenized" / "sts-test.csv"):
        marked = []
        for line in test_file.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            fields[5] = "marked " + fields[5]
            marked.append("\t".join(fields))
        test_file.write_text("\n".join(marked) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    run = ht.run_harness(
        *("run", "--models", "testing-embedder", "--tasks", "stsb", "--seeds", "42", "--profile", "smoke"),
        *("--results", store, "--no-progress", "--data-dir", data),
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    site_args = ("site", "--results", store, "--include-samples")
    built = ht.run_harness(*site_args, "--to", tmp_path / "s1", plugins=["harness.testing"])
    assert built.exit_code == 0, built.stderr
    pairs = _texts(tmp_path / "s1")["pairs"]
    assert pairs and all(first.startswith("marked ") for first, _ in pairs)  # the record's data, not the bundled
    bundled = ht.run_harness(*site_args, "--to", tmp_path / "s2", "--data-dir", REPO / "tasks" / "data")
    assert bundled.exit_code == 0, bundled.stderr
    withheld = _texts(tmp_path / "s2")["withheld"]
    assert "not the data the record was computed on" in withheld and "pairs" not in _texts(tmp_path / "s2")
    shutil.rmtree(data)
    gone = ht.run_harness(*site_args, "--to", tmp_path / "s3", plugins=["harness.testing"])
    assert gone.exit_code == 0, gone.stderr
    assert f"--data-dir {data}, which is not here" in _texts(tmp_path / "s3")["withheld"]
    missing = ht.run_harness(*site_args, "--to", tmp_path / "s4", "--data-dir", tmp_path / "nowhere")
    assert missing.exit_code == 2 and "--data-dir" in missing.stderr and "no such folder" in missing.stderr


# -- the site's folder: replaced whole, never the store ---------------------------------------------------------------
def _small_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("be-1bb093b549d5", "be-3be749136ee2"):
        (store / key / "seed-42").mkdir(parents=True)
        for name in ("stsb.json", "stsb.examples.npz"):
            shutil.copy2(REPO / "published" / key / "seed-42" / name, store / key / "seed-42" / name)
    return store


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def test_a_site_rebuilt_into_its_folder_replaces_every_file_of_the_previous_site(tmp_path):
    store = _small_store(tmp_path)
    site = tmp_path / "site"
    first = ht.run_harness("site", "--to", site, "--results", store)
    assert first.exit_code == 0, first.stderr
    (site / "data" / "tables" / "old-family-0.json").write_text("{}")  # a table the earlier site had
    (site / "data" / "curves").mkdir()
    (site / "data" / "curves" / "gone.json").write_text("[]")
    again = ht.run_harness("site", "--to", site, "--results", store)
    assert again.exit_code == 0, again.stderr
    assert "data/tables/old-family-0.json" not in _files(site)
    assert not (site / "data" / "curves").exists()
    assert f"{len(_files(site))} files" in again.stdout + again.stderr  # written == present
    assert [path.name for path in tmp_path.iterdir() if "harness-tmp" in path.name] == []


@pytest.mark.parametrize("where", ["store", "store/inside", "."])
def test_site_into_the_store_or_over_it_is_refused_in_one_line(tmp_path, where):
    store = _small_store(tmp_path)
    before = _files(store)
    target = tmp_path / where if where != "." else tmp_path
    result = ht.run_harness("site", "--to", target, "--results", store)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "store" in result.stderr
    assert _files(store) == before


def test_site_refuses_a_folder_holding_other_files(tmp_path):
    store = _small_store(tmp_path)
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "thesis.tex").write_text("keep me")
    result = ht.run_harness("site", "--to", folder, "--results", store)
    assert result.exit_code == 2 and "not a harness site" in result.stderr
    assert (folder / "thesis.tex").read_text() == "keep me"


# -- the layer's own calls ------------------------------------------------------------------------------------------------
def test_the_layer_lists_writes_and_removes_only_inside_the_store(tmp_path):
    from harness.files import atomic_write_text
    from harness.store_files import UnsafeFileError, list_store_folder, remove_store_file, remove_store_tree

    store = tmp_path / "store"
    atomic_write_text(store / "cache" / "new" / "entry", "x", store)  # a store not made yet: made fresh
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    (store / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="outside"):
        atomic_write_text(store / "linked" / "sub" / "entry", "x", store)
    with pytest.raises(UnsafeFileError, match="outside"):
        list_store_folder(store / "linked", store)
    with pytest.raises(UnsafeFileError, match="outside"):
        remove_store_file(store / "linked" / "precious", store)
    assert remove_store_tree(store / "linked", store)  # the link itself goes, never what it points to
    assert (outside / "precious").read_text() == "keep" and not (outside / "sub").exists()
    assert list_store_folder(store / "cache", store) == [store / "cache" / "new"]
    assert list_store_folder(store / "nowhere", store) == []
    assert remove_store_file(store / "cache" / "new" / "entry", store)
    assert not remove_store_file(store / "cache" / "new" / "entry", store)
