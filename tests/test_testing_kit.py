"""harness.testing: the contract checks pass on the built-ins and fail, with a clear message, on broken plugins."""

from __future__ import annotations

import types

import numpy as np
import pytest

import harness
import harness.testing as ht


# -- the built-ins keep the contract -------------------------------------------------------------------------------
def test_bi_encoder_keeps_the_model_contract(tiny_bert):
    report = ht.check_model("be", backbone=tiny_bert)
    assert set(report.capabilities) >= {"embedder", "trainable"}  # be is also a span encoder (the span baselines)
    assert report.dimension == 32  # the tiny BERT's width
    assert "model.safetensors" in report.checkpoint_files
    assert report.training_report["steps"] >= 1  # fit returned its report


def test_stsb_keeps_the_task_contract():
    report = ht.check_task("stsb")
    # Every kind the metadata lists was checked (stsb offers at least its scored train/dev pairs).
    assert set(report.training_kinds) == set(ht.plugin_registry(autoload=True).task("stsb").metadata.training_kinds)
    assert "scored_pairs" in report.training_kinds
    assert set(report.scores) >= {"spearman", "pearson_all"}
    # The smoke profile cuts the 1379 test pairs to 200, the check's small cut to 5.
    assert report.texts_seen_with_small_cut <= 10 < report.texts_seen <= 400


def test_stsb_with_the_bi_encoder_as_model(tiny_bert):
    plugin = harness.testing.plugin_registry(autoload=True).model("be")
    model = plugin.factory(ht.model_context(tiny_bert, plugin=plugin))
    assert -100 <= ht.check_task("stsb", model, small_cut=None).main_score <= 100


@pytest.mark.parametrize("name", [plugin.name for plugin in ht.TESTING_MODELS])
def test_tiny_models_keep_the_contract(name):
    registry = ht.plugin_registry(ht)
    ht.check_model(name, registry=registry, backbone="unused")


def test_tiny_model_for_serves_what_a_task_requires():
    assert isinstance(ht.tiny_model_for(["pair_scorer"]), ht.HashingEmbedder)
    assert isinstance(ht.tiny_model_for(["multi_vector_embedder"]), ht.HashingMultiVectorEmbedder)
    assert isinstance(ht.tiny_model_for(["span_encoder", "embedder"]), ht.HashingSpanEncoder)
    both = ht.tiny_model_for(["span_encoder", "multi_vector_embedder"])
    assert callable(both.encode_spans) and callable(both.encode_multi)


def test_tiny_backbones_load_with_the_encoder(tiny_roberta):
    plugin = ht.plugin_registry(autoload=True).model("be")
    model = plugin.factory(ht.model_context(tiny_roberta, plugin=plugin))
    assert model.encode(["a cat .", "a dog ."]).shape == (2, 32)


# -- broken plugins fail with a clear message ----------------------------------------------------------------------
class Float64Embedder:
    def encode(self, texts):
        return np.ones((len(texts), 4))  # float64, and every text the same


class RandomEmbedder:
    def encode(self, texts):
        return np.random.default_rng().normal(size=(len(texts), 4)).astype(np.float32)


class ForgetfulTrainable(ht.HashingEmbedder):
    """Trains, but saves nothing that load reads back."""

    def fit(self, splits, ctx):
        self.bucket_weights = np.full(self.dim, 2.0, dtype=np.float32)
        return {"trained": True}

    def save(self, directory):
        (directory / "notes.json").write_text("{}")

    def load(self, directory):
        pass


class PickleTrainable(ForgetfulTrainable):
    def save(self, directory):
        (directory / "model.pt").write_bytes(b"pickled")

    def fit(self, splits, ctx):
        return None


def plugin_of(model_class, *capabilities, **fields):
    return harness.ModelPlugin(
        model_class.__name__.lower(), "test model", lambda ctx: model_class(), capabilities or ("embedder",), **fields
    )


def test_wrong_dtype_and_nondeterminism_are_named():
    with pytest.raises(ht.ContractCheckError) as caught:
        ht.check_model(plugin_of(Float64Embedder), backbone="unused")
    assert "model 'float64embedder' breaks the plugin contract" in str(caught.value)
    assert "dtype float64; expected float32" in str(caught.value)
    with pytest.raises(ht.ContractCheckError, match="the same text two different rows"):
        ht.check_model(plugin_of(RandomEmbedder), backbone="unused")


def test_a_declared_capability_without_its_method_is_named():
    plugin = plugin_of(Float64Embedder, "embedder", "pair_scorer")
    with pytest.raises(ht.ContractCheckError, match="lacks methods of declared capabilities: pair_scorer needs score"):
        ht.check_model(plugin, backbone="unused")


def test_training_round_trip_problems_are_named():
    kinds = {"training_kinds": ("scored_pairs",)}
    with pytest.raises(ht.ContractCheckError, match="different embedder outputs"):
        ht.check_model(plugin_of(ForgetfulTrainable, "embedder", "trainable", **kinds), backbone="unused")
    with pytest.raises(ht.ContractCheckError) as caught:
        ht.check_model(plugin_of(PickleTrainable, "embedder", "trainable", **kinds), backbone="unused")
    assert "fit returned None" in str(caught.value) and "pickle-format files model.pt" in str(caught.value)


class UnstableChecksumTask(harness.Task):
    metadata = harness.TaskMetadata(
        name="unstable",
        family="testing",
        description="d",
        main_score="accuracy",
        metric="m",
        reference="r",
        dataset="none",
        dataset_source="s",
        license="l",
    )
    calls = 0

    def check_data(self):
        type(self).calls += 1
        return f"checksum-{type(self).calls}"

    def evaluate(self, model, ctx):
        return harness.EvalResult({"accuracy": 1.0}, "checksum")


class BadResultTask(UnstableChecksumTask):
    metadata = harness.TaskMetadata(
        name="bad-result",
        family="testing",
        description="d",
        main_score="spearman",
        metric="m",
        reference="r",
        dataset="none",
        dataset_source="s",
        license="l",
    )

    def check_data(self):
        return "abc"

    def evaluate(self, model, ctx):
        as_pair_scorer = harness.as_pair_scorer(model)
        texts = [f"sentence number {i}" for i in range(500)]  # no smoke cut
        as_pair_scorer.score(texts, texts[::-1])
        return harness.EvalResult({"pearson": float("nan")}, "another", {"array": np.zeros(2)})


def test_unstable_checksum_is_named():
    with pytest.raises(ht.ContractCheckError, match="different checksums on two calls"):
        ht.check_task(UnstableChecksumTask)


def test_bad_eval_result_lists_every_problem():
    with pytest.raises(ht.ContractCheckError) as caught:
        ht.check_task(BadResultTask)
    message = str(caught.value)
    assert message.startswith("task 'bad-result' breaks the plugin contract:")
    for expected in (
        "has no 'spearman' (metadata.main_score)",
        "score 'pearson' is nan",
        "differs from check_data()",
        "details cannot be stored as JSON",
    ):
        assert expected in message, message


def test_ignoring_the_smoke_cut_is_named():
    class NoCutTask(BadResultTask):
        def evaluate(self, model, ctx):
            super().evaluate(model, ctx)
            return harness.EvalResult({"spearman": 1.0}, "abc")

    with pytest.raises(ht.ContractCheckError, match="all 500 texts with max_eval_examples=5"):
        ht.check_task(NoCutTask)


class DownloadableTrainingDataTask(harness.Task):
    """Bundled evaluation pairs; its unlabeled training sentences would need a download."""

    metadata = harness.TaskMetadata(
        name="downloadable",
        family="testing",
        description="d",
        main_score="spearman",
        metric="m",
        reference="r",
        dataset="none",
        dataset_source="s",
        license="l",
        training_kinds=("unlabeled_sentences",),
    )

    def check_data(self):
        return "abc"

    def evaluate(self, model, ctx):
        texts = ht.TINY_SENTENCES[:8]
        predicted = harness.as_pair_scorer(model).score(texts, texts[1:] + texts[:1])
        return harness.EvalResult({"spearman": 100 * harness.spearman(predicted, range(8))}, "abc")

    def training_data(self, kind, ctx=None):
        if kind == "unlabeled_sentences":
            raise harness.MissingDataError("not downloaded; run `harness data download downloadable`.")
        return


def test_training_data_that_is_not_downloaded_is_listed_not_failed():
    report = ht.check_task(DownloadableTrainingDataTask)
    assert report.training_kinds == () and report.training_kinds_unavailable == ("unlabeled_sentences",)


def test_a_plugin_that_fails_to_load_is_reported():
    broken = types.ModuleType("broken_kit_plugin")

    @harness.hookimpl
    def register_model(register):  # misspelled hook
        pass

    broken.register_model = register_model
    with pytest.raises(ht.ContractCheckError, match="'register_model' is not a harness hook.*register_models"):
        ht.plugin_registry(broken)


# -- contexts, fixtures, the in-process CLI ------------------------------------------------------------------------
def test_contexts_carry_the_smoke_profile():
    plugin = harness.ModelPlugin(
        "x", "d", lambda ctx: None, ("embedder",), options={"dim": harness.Option(8, "size", type=int)}
    )
    ctx = ht.model_context("unused", {"dim": "16"}, plugin=plugin)
    assert ctx.options == {"dim": 16} and ctx.profile.name == "smoke" and ctx.eval_batch_size == 32
    with pytest.raises(harness.HarnessError, match="pass trained_model="):
        ctx.trained_model("be")
    eval_ctx = ht.eval_context(ht.smoke_profile(max_eval_examples=3))
    assert eval_ctx.profile.max_eval_examples == 3 and eval_ctx.batch_size == 32


def test_run_harness_in_process_with_the_tiny_models(tmp_path):
    result = ht.run_harness(
        "run",
        "--models",
        "testing-embedder,testing-pair-scorer",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert result.exit_code == 0, result.stderr
    assert "| testing-embedder" in result.stdout and "| testing-pair-scorer" in result.stdout
    listed = ht.run_harness("list", plugins=["harness.testing"], autoload=False)
    assert "testing-trainable" in listed.stdout and " be " not in listed.stdout


def test_the_package_offers_what_the_single_module_did():
    """harness.testing is a package now: suites written against 0.2 import the same names from it, and
    ``pytest_plugins = ["harness.testing"]`` finds the four fixtures on it (pytest scans the module's attributes)."""
    from _pytest.fixtures import getfixturemarker

    namespace: dict = {}
    exec("from harness.testing import *", namespace)  # what `import *` gives is the point
    assert {"check_model", "check_task", "plugin_registry", "run_harness", "tiny_bert", "TESTING_MODELS"} <= set(
        namespace
    ) and "register_models" not in namespace  # the hook would make the importer a plugin
    assert ht.register_models.__module__ == "harness.testing.fakes" and ht.PROBE_TEXTS and ht.PICKLE_SUFFIXES
    fixtures = {getfixturemarker(value).name for value in vars(ht).values() if getfixturemarker(value)}
    assert fixtures == {"tiny_bert", "tiny_roberta", "smoke_profile", "harness_cli"}
