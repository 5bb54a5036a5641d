"""The ``st`` / ``st-ce`` models run sentence-transformers models exactly as sentence-transformers does."""

from __future__ import annotations

import numpy as np
import pytest

import harness.testing as ht
from harness import HarnessError, IncompatibleError
from harness.plugins import sentence_transformers as st_plugin

TEXTS = [
    "a man is playing a guitar .",
    "the cat sits on the mat .",
    "stocks fell sharply today .",
    "a woman is slicing an onion .",
    "a man is playing a guitar .",
]


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory, tiny_bert) -> str:
    """A tiny sentence-transformers model built in code: BERT -> CLS pooling -> Dense(32->16, tanh) -> Normalize,
    with query/document prompts."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.manual_seed(0)
    transformer = Transformer(tiny_bert, max_seq_length=48)
    modules = [
        transformer,
        Pooling(32, pooling_mode="cls"),
        Dense(32, 16, activation_function=torch.nn.Tanh()),
        Normalize(),
    ]
    model = SentenceTransformer(modules=modules, device="cpu", prompts={"query": "query: ", "document": "doc: "})
    folder = tmp_path_factory.mktemp("tiny-st")
    model.save(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def ce_folder(tmp_path_factory, tiny_bert) -> str:
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.manual_seed(0)
    modules = [
        Transformer(tiny_bert, max_seq_length=64, transformer_task="feature-extraction"),
        Pooling(32, pooling_mode="cls"),
        Dense(32, 1, activation_function=torch.nn.Identity(), module_output_name="scores"),
    ]
    folder = tmp_path_factory.mktemp("tiny-ce")
    CrossEncoder(modules=modules, device="cpu").save(str(folder))
    return str(folder)


def build(name: str, folder: str, **options):
    registry = ht.plugin_registry(st_plugin)
    plugin = registry.model(name)
    return plugin.factory(ht.model_context(backbone=folder, options=options, plugin=plugin))


def test_st_embeddings_equal_sentence_transformers_encode(st_folder):
    from sentence_transformers import SentenceTransformer

    model = build("st", st_folder)
    ours = model.encode(TEXTS)
    reference = SentenceTransformer(st_folder, device="cpu").encode(TEXTS)
    assert ours.shape == (len(TEXTS), 16) and ours.dtype == np.float32
    cosines = (ours * reference).sum(axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosines.min() > 0.99999
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)  # its Normalize layer ran


def test_st_uses_the_models_prompts_for_queries_and_documents(st_folder):
    from sentence_transformers import SentenceTransformer

    model = build("st", st_folder)
    reference = SentenceTransformer(st_folder, device="cpu")
    assert np.allclose(model.encode_query(TEXTS[:2]), reference.encode(["query: " + t for t in TEXTS[:2]]), atol=1e-6)
    assert np.allclose(model.encode_document(TEXTS[:2]), reference.encode(["doc: " + t for t in TEXTS[:2]]), atol=1e-6)
    plain = build("st", st_folder, prompts="false")
    assert np.allclose(plain.encode_query(TEXTS[:2]), reference.encode(TEXTS[:2]), atol=1e-6)


def test_st_ce_scores_equal_cross_encoder_predict(ce_folder):
    from sentence_transformers import CrossEncoder

    model = build("st-ce", ce_folder)
    first, second = TEXTS[:4] + TEXTS[:1], TEXTS[1:5] + TEXTS[1:2]
    reference = CrossEncoder(ce_folder, device="cpu").predict(list(zip(first, second)))
    assert np.allclose(model.score(first, second), reference, atol=1e-6)


def test_a_plain_transformer_folder_is_refused_in_one_line(tiny_bert):
    with pytest.raises(HarnessError) as error:
        build("st", tiny_bert)
    message = str(error.value)
    assert "is not a sentence-transformers model" in message and "--models be" in message
    assert "\n" not in message


def test_the_wrong_kind_of_folder_names_the_right_model(st_folder, ce_folder, tmp_path):
    with pytest.raises(IncompatibleError, match="use --models st-ce"):
        build("st", ce_folder)
    with pytest.raises(IncompatibleError, match="use --models st "):
        build("st-ce", st_folder)
    with pytest.raises(HarnessError, match="no such folder"):
        build("st", str(tmp_path / "nowhere"))


def test_st_runs_a_task_through_the_runner(st_folder, tmp_path):
    run = ht.run_harness(
        "run",
        "--models",
        "st",
        "--backbone",
        st_folder,
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path / "results",
        "--no-progress",
    )
    assert run.exit_code == 0, run.stderr
    assert "stsb" in run.stdout


# -- harness run --runtime onnx: the Hugging Face model inside the Transformer module runs in ONNX Runtime -------------
@pytest.fixture(scope="module")
def classifier_ce_folder(tmp_path_factory, tiny_bert) -> str:
    """A sequence-classification CrossEncoder (a BertForSequenceClassification with a fresh, seeded head): the
    export must return its logits, since its head reads the pooler output."""
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(tiny_bert, device="cpu")
    with torch.no_grad():
        model[0].model.classifier.weight.normal_(0, 2.0)  # spread logits, so sigmoid scores differ visibly
    folder = tmp_path_factory.mktemp("tiny-classifier-ce")
    model.save(str(folder))
    return str(folder)


def onnx_calls(monkeypatch) -> list[str]:
    """The outputs ONNX Runtime computed from here on (so a test sees the stand-in really ran)."""
    from harness.nn.onnx_runtime import OnnxTransformer

    calls: list[str] = []
    computed = OnnxTransformer.token_states

    def counted(self, features):
        calls.append(self.output)
        return computed(self, features)

    monkeypatch.setattr(OnnxTransformer, "token_states", counted)
    return calls


def test_st_encodes_through_onnx_as_torch(st_folder, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    model = build("st", st_folder)
    texts = [*TEXTS, "a much longer sentence " * 20]  # one cut at the model's max_seq_length
    expected = model.encode(texts), model.encode_query(texts)
    hf_model = model.model[0].model
    calls = onnx_calls(monkeypatch)
    model.use_runtime("onnx", tmp_path)
    actual = model.encode(texts), model.encode_query(texts)
    assert calls == ["last_hidden_state", "last_hidden_state"]
    for ours, reference in zip(actual, expected):
        np.testing.assert_allclose(ours, reference, atol=1e-4)
    assert not np.allclose(actual[0], actual[1], atol=1e-3)  # the prompt is still sentence-transformers' own
    assert model.model[0].model is hf_model and len(list((tmp_path / "onnx").glob("*.onnx"))) == 1
    model.use_runtime("torch")
    np.testing.assert_allclose(model.encode(texts), expected[0], atol=1e-6)
    assert len(calls) == 2


@pytest.mark.parametrize("folder, output", [("ce_folder", "last_hidden_state"), ("classifier_ce_folder", "logits")])
def test_st_ce_scores_through_onnx_as_torch(request, folder, output, tmp_path, monkeypatch):
    """Modules over a feature-extraction Transformer (its hidden states exported) and a sequence classifier (its
    logits exported, head included); the activation stays sentence-transformers'."""
    pytest.importorskip("onnxruntime")
    model = build("st-ce", request.getfixturevalue(folder))
    first, second = TEXTS[:4] + TEXTS[:1], TEXTS[1:5] + TEXTS[1:2]
    expected = model.score(first, second)
    assert np.ptp(expected) > 1e-4  # the pairs score apart by more than the tolerance
    calls = onnx_calls(monkeypatch)
    model.use_runtime("onnx", tmp_path)
    np.testing.assert_allclose(model.score(first, second), expected, atol=1e-5)
    assert calls == [output]


def test_st_model_the_export_cannot_stand_in_for_is_refused_in_one_line(st_folder, tmp_path):
    pytest.importorskip("onnxruntime")
    model = build("st", st_folder)
    model.model[0].model.config.output_hidden_states = True  # every layer's states: not in the export
    with pytest.raises(IncompatibleError) as error:
        model.use_runtime("onnx", tmp_path)
    message = str(error.value)
    assert "every layer's hidden states" in message and "--runtime torch" in message and "\n" not in message


@pytest.mark.parametrize("name, folder", [("st", "st_folder"), ("st-ce", "classifier_ce_folder")])
def test_st_runs_through_onnx_runtime_as_torch(request, name, folder, tmp_path):
    import json

    scores = {}
    for runtime in ("torch", "onnx"):
        results = tmp_path / runtime
        run = ht.run_harness(
            "run",
            "--models",
            name,
            "--backbone",
            request.getfixturevalue(folder),
            "--tasks",
            "stsb",
            "--profile",
            "smoke",
            "--results",
            results,
            "--no-progress",
            "--runtime",
            runtime,
        )
        assert run.exit_code == 0, run.stderr
        (record,) = [json.loads(path.read_text()) for path in results.glob("*/seed-*/*.json")]
        assert record.get("runtime") == (None if runtime == "torch" else "onnx")
        scores[runtime] = record["main_score"]
    assert abs(scores["onnx"] - scores["torch"]) < 1e-4
