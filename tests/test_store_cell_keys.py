"""A cell's key names what its result was made from: a local backbone and every path option by their files' content,
the runtime it ran under; records name their plugin's version; the keys of published records do not change
(docs/guide/store.md, "A local backbone is identified by its files", "Every path option is identified by its
content", "Each runtime keeps its own cells")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import harness
from conftest import REPO
from harness.registry import build_registry
from harness.store import Store, read_record
from store_toys import SMOKE, ToyPairs, only_record, toy_run, write_toy_data


def test_a_local_backbone_replaced_by_another_model_is_recomputed(run_cli, tmp_path, tiny_bert, tiny_roberta):
    backbone, results = tmp_path / "my", tmp_path / "results"
    shutil.copytree(tiny_bert, backbone)
    common = ("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--backbone", backbone, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    code, out, _ = run_cli(*common)
    assert "0 cells computed, 1 from the store" in out
    shutil.rmtree(backbone)
    shutil.copytree(tiny_roberta, backbone)  # same path, another model: used to be served the first one's score
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    assert len({r["model"]["backbone_content"] for r in Store(results).records()}) == 2


def test_backbone_checksums_are_cached_by_size_and_mtime(tmp_path, tiny_bert, monkeypatch):
    import harness.fingerprint as fingerprint

    backbone, cache = tmp_path / "my", tmp_path / "cache"
    shutil.copytree(tiny_bert, backbone)
    first = fingerprint.folder_fingerprint(backbone, cache)
    hashed: list[Path] = []
    real_sha256 = fingerprint._sha256
    monkeypatch.setattr(fingerprint, "_sha256", lambda path: hashed.append(path) or real_sha256(path))
    monkeypatch.setattr(fingerprint, "_memo", {})  # a new process: only the cache file is left
    assert fingerprint.folder_fingerprint(backbone, cache) == first and hashed == []
    (backbone / "config.json").write_text((backbone / "config.json").read_text().replace("32", "33", 1))
    assert fingerprint.folder_fingerprint(backbone, cache) != first and [p.name for p in hashed] == ["config.json"]


DEFAULTS_CHANGED_BY_DESIGN = {"paser": "paser:top_k=1,synonyms=0"}  # PaSeR table 1's setting became the default


def test_published_records_keep_their_keys(registry):
    """The bundled backbone and hub ids are identified by name as before: every published spec re-resolves to the
    hash (and so the key) it was published under."""
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    records = list(Store(REPO / "published").records())
    assert records
    for record in records:
        model = record["model"]
        # A default changed to the paper's headline setting: the old label now names another spec, and
        # the old model is named explicitly.
        spec = resolve_model_spec(
            registry,
            model["label"],
            get_profile(model["profile"]),
            model["backbone"],
            model["train_on"],
            model.get("budget") or {},
        )
        if spec.key != record["model_key"] and model["label"] in DEFAULTS_CHANGED_BY_DESIGN:
            renamed = resolve_model_spec(
                registry,
                DEFAULTS_CHANGED_BY_DESIGN[model["label"]],
                get_profile(model["profile"]),
                model["backbone"],
                model["train_on"],
                model.get("budget") or {},
            )
            # the old default under its explicit name; a later default (PaSeR's synonym_views) keeps the
            # label's own spec, checked below
            spec = renamed if renamed.key == record["model_key"] else spec
        assert spec.backbone_content is None, model["label"]
        plugin = registry.spec_plugin(spec.name)
        # An option whose default changed meaning for some settings (Option.hash_when, e.g. augsbert's mlm_masking
        # for the topic recipes) gives those specs new keys by design; every other spec keeps its key.
        changed = [
            key
            for key, option in plugin.options.items()
            if option.hash_when is not None and option.hash_when(spec.options)
        ]
        # A record published after such a change (PaSeR's re-run default) has the new key; one before it the old.
        assert spec.key == record["model_key"] or changed, model["label"]


def test_records_name_their_plugin_version_which_the_leaderboard_reads(tmp_path):
    from harness.leaderboard.tables import _identity

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    registered_in_code = only_record(tmp_path / "results")
    assert "model_version" in registered_in_code and registered_in_code["model_version"] is None
    from harness.run.evaluate import build_record

    registry = build_registry()

    class PlanStub:
        profile = harness.get_profile("smoke")
        device, runtime, data_dir_text, log_to = "cpu", "torch", None, ()

    spec = harness.resolve_model_spec(registry, "be", PlanStub.profile)
    (task_spec,) = harness.resolve_task_specs(registry, "stsb")
    record = build_record(registry, PlanStub, spec, 42, task_spec, "cpu", "ok")
    assert record["model_version"] == harness.__version__ == _identity(record)["plugin version"]


def save_sentence_transformer(backbone: str, folder: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(backbone, max_seq_length=48)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension())], device="cpu").save(
        str(folder)
    )


def test_st_model_folder_replaced_at_the_same_path_is_recomputed(run_cli, tmp_path, tiny_bert, tiny_roberta):
    folder, results = tmp_path / "my-st", tmp_path / "results"
    save_sentence_transformer(tiny_bert, folder)
    common = ("run", "--models", f"st:model={folder}", "--tasks", "stsb", *SMOKE, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    shutil.rmtree(folder)
    save_sentence_transformer(tiny_roberta, folder)  # same path, another model: used to be served the first's score
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    records = list(Store(results).records())
    assert len({r["model"]["option_contents"]["model"] for r in records}) == 2
    code, out, err = run_cli(*common)
    assert code == 0 and "0 cells computed, 1 from the store" in out, err


def test_a_task_data_path_given_as_an_option_is_identified_by_its_content(tmp_path):
    from harness.fingerprint import stable_hash
    from harness.spec import resolve_task_specs

    class FileOptionTask(ToyPairs):
        """A task whose data file is an option (``toy-file:file=PATH``), declared a path option."""

        metadata = harness.TaskMetadata(
            name="toy-file",
            family="toy",
            description="pairs from the file its option names",
            main_score="spearman",
            metric="Spearman x100",
            reference="tests",
            dataset="toy",
            dataset_source="tests",
            license="none",
        )
        options = {"file": harness.Option("", "the pairs file", path=True), "note": harness.Option("")}

    class Plugin:
        @harness.hookimpl
        def register_tasks(self, register):
            register(FileOptionTask)

    registry = build_registry(extra_plugins=[Plugin()])
    data_file = write_toy_data(tmp_path / "data")

    def key(text: str) -> str:
        (spec,) = resolve_task_specs(registry, text)
        return spec.key

    before = key(f"toy-file:file={data_file}")
    assert key(f"toy-file:file={data_file}") == before and key("toy-file:note=x") != before
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\t0.1\n"))  # same path, other data
    assert key(f"toy-file:file={data_file}") != before
    assert key("toy-file:note=x") == f"toy-file-{stable_hash({'file': '', 'note': 'x'}, 8)}"  # unchanged


def test_the_runtime_is_part_of_a_cells_key(run_cli, tmp_path, tiny_bert):
    pytest.importorskip("onnxruntime")
    from harness.leaderboard import collect_tables

    results = tmp_path / "results"
    common = ("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    code, out, err = run_cli(*common, "--runtime", "onnx")  # used to be answered by the torch record
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    (folder,) = results.glob("be-*/seed-42")
    torch_path, onnx_path = folder / "stsb.json", folder / "stsb@onnx.json"
    assert "runtime" not in read_record(torch_path) and read_record(onnx_path)["runtime"] == "onnx"
    (table,) = collect_tables(Store(results), include_samples=True)
    assert sorted(row.label for row in table.rows) == ["be", "be [runtime: onnx]"]
    # an onnx record at the torch name (as harness wrote it before) is valid, but answers no torch run
    os.replace(onnx_path, torch_path)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out and "computed under --runtime onnx" in out, err
    assert "runtime" not in read_record(torch_path)
