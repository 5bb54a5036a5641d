"""Extension points: leaderboard formats as components, the objective plugins' shared registration, the moved thesis
training setups (deprecated old names)."""

from __future__ import annotations

import json
import sys

import pytest

import harness
import harness.testing as ht
from harness.leaderboard import BUILTIN_FORMATS, FORMATS, write_leaderboards
from harness.leaderboard.formats import LEADERBOARD_FORMAT, available_formats, matrix_renderers
from harness.store import Store

# A third-party plugin that adds one leaderboard format: a plain function with the one renderer signature.
JSON_FORMAT_PLUGIN = """
import json

import harness


def render_json(sections, output_dir):
    rows = [[row.label, average] for table in sections for _, row, average in table.ranked()]
    return json.dumps({"family": sections[0].family, "rows": rows})


@harness.hookimpl
def register_components(register):
    register(harness.Component("leaderboard-format", "json", render_json, "ranked rows and averages as JSON"))
"""


def _record(model, seed, score):
    return {
        "status": "ok",
        "main_score": score,
        "scores": {"spearman": score},
        "dataset_checksum": "0" * 64,
        "model": {
            "name": model,
            "label": model,
            "train_on": None,
            "backbone": "tiny",
            "profile": "smoke",
            "hash": f"{model}-hash",
        },
        "model_key": f"{model}-key",
        "seed": seed,
        "hardware": "cpu (2 cores)",
        "task": {"name": "t1", "key": "t1", "label": "t1", "family": "fam", "version": "1"},
    }


def _store(root):
    store = Store(root)
    for seed, (good, bad) in {1: (80.0, 60.0), 2: (82.0, 62.0)}.items():
        store.write("good-key", seed, "t1", _record("good", seed, good))
        store.write("bad-key", seed, "t1", _record("bad", seed, bad))
    return store


@pytest.fixture
def json_format_plugin(tmp_path, monkeypatch):
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "json_leaderboard.py").write_text(JSON_FORMAT_PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "json_leaderboard", raising=False)
    yield "json_leaderboard"
    sys.modules.pop("json_leaderboard", None)


def test_the_built_in_formats_are_components_of_the_core(registry):
    from harness.components import register_core_components

    register_core_components(registry)
    assert registry.component_names(LEADERBOARD_FORMAT) == sorted(BUILTIN_FORMATS)
    assert FORMATS == ("md", "csv", "tex", "html")  # the CLI's help and error messages list them in this order
    assert all(registry.component(LEADERBOARD_FORMAT, name) is BUILTIN_FORMATS[name] for name in FORMATS)
    # --matrix takes the formats that render a matrix's paper table too
    assert list(matrix_renderers(BUILTIN_FORMATS)) == ["md", "csv", "html"]


def test_a_plugin_adds_a_leaderboard_format(tmp_path, json_format_plugin):
    _store(tmp_path / "results")
    output = tmp_path / "boards"
    result = ht.run_harness(
        "leaderboard",
        "--results",
        tmp_path / "results",
        "--output",
        output,
        "--formats",
        "md,json",
        plugins=[json_format_plugin],
        autoload=False,
    )
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in output.iterdir()) == ["fam.json", "fam.md"]
    assert json.loads((output / "fam.json").read_text()) == {"family": "fam", "rows": [["good", 81.0], ["bad", 61.0]]}
    listed = ht.run_harness("list", plugins=[json_format_plugin], autoload=False)
    assert "leaderboard-format: csv, html, json, md, tex" in listed.stdout


def test_an_unknown_format_names_the_registered_ones(tmp_path, json_format_plugin):
    _store(tmp_path / "results")
    result = ht.run_harness(
        "leaderboard",
        "--results",
        tmp_path / "results",
        "--output",
        tmp_path / "boards",
        "--formats",
        "md,xml",
        plugins=[json_format_plugin],
        autoload=False,
    )
    assert result.exit_code != 0
    assert "xml" in result.stderr and "allowed values: md, csv, tex, html, json." in result.stderr
    assert not (tmp_path / "boards").exists()


def test_a_format_without_a_matrix_renderer_is_refused_for_a_matrix(tmp_path, registry):
    from harness.leaderboard.claims import write_matrix_board

    renderers = {**BUILTIN_FORMATS, "json": lambda sections, output_dir: "{}"}
    with pytest.raises(
        harness.HarnessError, match=r"'json' for --formats \(with --matrix\); allowed values: md, csv, html\."
    ):
        write_matrix_board(
            tmp_path / "m.yaml", Store(tmp_path / "store"), tmp_path / "out", ("md", "json"), registry, renderers
        )


def test_write_leaderboards_renders_with_the_renderers_it_is_given(tmp_path):
    calls = []

    def render_count(sections, output_dir):
        calls.append(output_dir)
        return f"{sum(len(table.rows) for table in sections)} rows\n"

    renderers = available_formats(["count", "md"], {"count": render_count, "md": BUILTIN_FORMATS["md"]}.__getitem__)
    assert list(renderers) == ["md", "count"]  # built-ins first, in their order
    written = write_leaderboards(_store(tmp_path / "store"), tmp_path / "out", ("count",), renderers=renderers)
    assert [p.name for p in written] == ["fam.count"] and written[0].read_text() == "2 rows\n"
    assert calls == [tmp_path / "out"]
    with pytest.raises(harness.HarnessError, match="--formats"):
        write_leaderboards(_store(tmp_path / "store"), tmp_path / "out", ("count",))  # not a built-in one


def test_a_plugin_format_that_is_not_callable_is_refused():
    class NotARenderer:
        @harness.hookimpl
        def register_components(self, register):
            register(harness.Component("leaderboard-format", "broken", "not a renderer", "a string"))

    with pytest.raises(ht.ContractCheckError, match="leaderboard-format"):
        ht.plugin_registry(NotARenderer())


# -- the objective plugins' registration tail ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["simcse", "tsdae", "mlm", "nm", "paser"])
def test_objective_hooks_register_the_objective_and_its_model(name):
    import importlib

    module = importlib.import_module(f"harness.plugins.{name}")
    registry = ht.plugin_registry(module)
    assert registry.component("objective", name) is module.OBJECTIVE
    model = registry.model(name)
    assert model.budget_for is not None and {"pooling", "lr", "aux"} <= set(model.options)


# -- the thesis training setups in their plugins -------------------------------------------------------------------
def test_the_tsdae_setup_lives_in_its_plugin_and_the_old_names_warn():
    import harness.nn.objectives as objectives
    from harness.plugins import tsdae

    assert tsdae.SETUP.name == "thesis-5.4.1" and tsdae.OBJECTIVE.setup is tsdae.SETUP
    assert tsdae.SETUP.budgets == {"quick": {"max_steps": 40}, "paper": {"batch_size": 8, "max_steps": 100_000}}
    assert "REPLICATION_SETUP" not in vars(objectives)  # only the deprecated name resolves
    with pytest.warns(DeprecationWarning, match="tsdae plugin's SETUP"):
        assert objectives.REPLICATION_SETUP is tsdae.SETUP
    with pytest.warns(DeprecationWarning, match="SETUPS"):
        assert objectives.SETUPS == {"thesis-5.4.1": tsdae.SETUP, "thesis-5.4.2": objectives.CONTRASTIVE_SETUP}
    with pytest.raises(AttributeError):
        objectives.NO_SUCH_SETUP  # noqa: B018 - the attribute access is the test


# -- the public STS task base ----------------------------------------------------------------------------------------
def _sts_files(folder, pairs, name="toy"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"STS.input.{name}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in pairs), encoding="utf-8")
    (folder / f"STS.gs.{name}.txt").write_text("".join(f"{g}\n" for _, _, g in pairs), encoding="utf-8")


def _toy_task(bundled, files=(("STS.input.toy.txt", "STS.gs.toy.txt"),), **attributes):
    from harness.blocks import STSTask

    metadata = harness.TaskMetadata(
        name="toy-sts",
        family="toy",
        description="toy pairs",
        main_score="spearman",
        metric="Spearman x100",
        reference="-",
        dataset="toy-sts",
        dataset_source="-",
        license="-",
    )
    return type(
        "ToySTS", (STSTask,), {"metadata": metadata, "bundled_data": bundled, "pair_files": files, **attributes}
    )


WORDS = [
    "a cat sat",
    "a dog ran",
    "the sun is hot",
    "rain falls down",
    "birds can fly",
    "fish swim fast",
    "snow is cold",
    "trees grow tall",
]


def _pairs(count):
    return [
        (WORDS[i % 8], WORDS[(i * 3 + 1) % 8] + (" too" if i % 2 else ""), "" if i == 5 else f"{i % 6}.0")
        for i in range(count)
    ]


def test_an_sts_task_is_metadata_and_file_names(tmp_path):
    _sts_files(tmp_path / "bundled", _pairs(30))
    task_class = _toy_task(tmp_path / "bundled")
    report = ht.check_task(task_class, small_cut=None)
    assert report.texts_seen <= 2 * 29  # the unscored pair (empty gold line) is left out, as SentEval does
    (pair_set,), paths = task_class({}).load()
    assert len(pair_set) == 29 and pair_set.name == "STS.input.toy"
    assert [p.name for p in paths] == ["STS.input.toy.txt", "STS.gs.toy.txt"]
    assert task_class({}).check_data() == harness.files_checksum(paths)


def test_an_sts_task_with_several_files_pools_or_averages(tmp_path):
    _sts_files(tmp_path / "bundled", _pairs(30), "one")
    _sts_files(tmp_path / "bundled", list(reversed(_pairs(20))), "two")
    files = (("STS.input.one.txt", "STS.gs.one.txt"), ("STS.input.two.txt", "STS.gs.two.txt"))
    aggregation = harness.Option("all", "pooled or mean", choices=("all", "mean"))
    task_class = _toy_task(tmp_path / "bundled", files, options={"aggregation": aggregation})
    pooled = ht.check_task(task_class, small_cut=None)
    mean = ht.check_task(task_class, options={"aggregation": "mean"}, small_cut=None)
    assert pooled.scores["spearman"] == pooled.scores["spearman_all"]
    assert mean.scores["spearman"] == mean.scores["spearman_mean"] != mean.scores["spearman_all"]


def test_an_sts_task_names_the_bad_line_and_where_to_put_missing_data(tmp_path):
    _sts_files(tmp_path / "bundled", [("one sentence", "another", "1.0"), ("no partner", None, "2.0")])
    (tmp_path / "bundled" / "STS.input.toy.txt").write_text("one\tanother\nno partner\n", encoding="utf-8")
    with pytest.raises(harness.DataFileError, match=r"STS.input.toy.txt:2: expected 'sentence1<TAB>sentence2'"):
        _toy_task(tmp_path / "bundled")({}).check_data()
    (tmp_path / "bundled" / "STS.gs.toy.txt").write_text("1.0\n", encoding="utf-8")
    with pytest.raises(harness.DataFileError, match="has 1 lines but STS.input.toy.txt has 2"):
        _toy_task(tmp_path / "bundled")({}).check_data()
    with pytest.raises(harness.MissingDataError, match="STS.input.toy.txt, STS.gs.toy.txt into DATA_DIR/toy-sts/"):
        _toy_task(None)({}, tmp_path / "empty").check_data()


def test_an_sts_task_reads_its_texts_through_normalise(tmp_path):
    _sts_files(tmp_path / "bundled", [("a  cat", "a   dog", "1.0"), ("x", "y", "2.0")])
    task_class = _toy_task(tmp_path / "bundled", normalise=lambda self, text: " ".join(text.split()).upper())
    (pair_set,), _ = task_class({}).load()
    assert pair_set.first == ["A CAT", "X"] and pair_set.second == ["A DOG", "Y"]
