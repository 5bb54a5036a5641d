"""Topic distillation (thesis 4.4, 5.6; the augsbert option ``topics``) and the supervised topic classifier
(thesis 5.6.1, plugins/topic_classifier.py) on tiny random transformers and in-code data."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from harness import (
    LABELED_SENTENCES,
    UNLABELED_SENTENCES,
    DataFileError,
    LabeledSentences,
    Task,
    TaskMetadata,
    TaskPlugin,
    TrainingSplits,
    UnlabeledSentences,
    hookimpl,
)
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.nn import DEFAULT_DELIMITER
from harness.profiles import get_profile
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.spec import resolve_model_spec

TOPIC_WORDS = {"Energy": "nuclear energy power plant reactor", "Schools": "school uniform pupils teachers class"}
COMMON_WORDS = "we should ban this because it is good bad for people and the law".split()
DISTILLATION = "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=random,top_k=2"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _labeled_sentences(count: int = 24, seed: int = 0) -> LabeledSentences:
    rng = np.random.default_rng(seed)
    sentences, labels = [], []
    for index in range(count):
        topic = sorted(TOPIC_WORDS)[index % 2]
        words = list(rng.choice(TOPIC_WORDS[topic].split(), 2)) + list(rng.choice(COMMON_WORDS, 4))
        sentences.append(f"{' '.join(words)} {index}")
        labels.append(topic)
    return LabeledSentences(sentences, labels)


class _ToyTopics(Task):
    """Labeled sentences of two topics; offers them as unlabeled sentences first (as 20ng-topic does)."""

    metadata = TaskMetadata(
        name="toy-topics",
        family="toy",
        description="two topics",
        main_score="f1_macro",
        metric="none",
        reference="test",
        dataset="toy",
        dataset_source="in code",
        license="CC0",
        training_kinds=(LABELED_SENTENCES, UNLABELED_SENTENCES),
    )
    labels = _labeled_sentences()

    def training_data(self, kind, ctx=None):
        if kind == UNLABELED_SENTENCES:
            return TrainingSplits("toy-topics", UnlabeledSentences(list(self.labels.sentences)), checksum="toy")
        if kind == LABELED_SENTENCES:
            return TrainingSplits("toy-topics", self.labels, _labeled_sentences(6, seed=1), checksum="toy")
        return None

    def check_data(self) -> str:
        return "toy"


class _ToyPlugin:
    @staticmethod
    @hookimpl
    def register_tasks(register):
        register(TaskPlugin(_ToyTopics.metadata, lambda options, data_dir: _ToyTopics(options, data_dir)))


def _runner(tiny_bert, tmp_path, models: list[str], train_on: str = "toy-topics", tasks=("stsb",)) -> Run:
    registry = build_registry(extra_plugins=[_ToyPlugin])
    config = RunConfig(
        models=[ModelEntry(m) for m in models],
        tasks=list(tasks),
        profile="smoke",
        backbone=tiny_bert,
        train_on=train_on,
        device="cpu",
        results_dir=tmp_path / "results",
        progress=False,
    )
    return Run(registry, config, log=lambda message: None)


class _Recorder:
    """Records the texts each Bi-Encoder (the students) trains on and encodes, and what the teacher scores."""

    def __init__(self, monkeypatch):
        from harness.plugins.bi_encoder import BiEncoder
        from harness.plugins.cross_bi_encoder import CrossBiEncoder

        # Keyed by a number given to each student when it trains (ids repeat once the runner releases a model).
        self.trained: dict[int, list[str]] = {}
        self.encoded: dict[int, list[str]] = {}
        self.scored: list[str] = []
        fit, encode, score = BiEncoder.fit_scored_pairs, BiEncoder.encode, CrossBiEncoder.score
        recorder = self

        def fit_scored_pairs(model, train, dev, ctx, description="training be"):
            model.recorded_as = len(recorder.trained)
            recorder.trained[model.recorded_as] = [*train.first, *train.second]
            return fit(model, train, dev, ctx, description)

        def encoded(model, texts):
            recorder.encoded.setdefault(getattr(model, "recorded_as", -1), []).extend(texts)
            return encode(model, texts)

        def scored(model, first, second):
            recorder.scored.extend([*first, *second])
            return score(model, first, second)

        monkeypatch.setattr(BiEncoder, "fit_scored_pairs", fit_scored_pairs)
        monkeypatch.setattr(BiEncoder, "encode", encoded)
        monkeypatch.setattr(CrossBiEncoder, "score", scored)


def _prompted(text: str) -> bool:
    return any(text.startswith(f"{topic} {DEFAULT_DELIMITER} ") for topic in TOPIC_WORDS)


def test_default_topic_options_keep_existing_spec_hashes(registry):
    """The published augsbert record augsbert-17737d92e02d (before topics existed) keeps its identity."""
    spec = resolve_model_spec(
        registry,
        "augsbert:mode=domain-transfer,teacher=ce,teacher_train_on=stsb",
        get_profile("quick"),
        "sentence-transformers/all-MiniLM-L6-v2",
        "bws-in-topic",
    )
    assert spec.hash.startswith("17737d92e02d")
    assert "topics" not in spec.identity()["options"] and "max_sentences" not in spec.identity()["options"]
    prompted = resolve_model_spec(
        registry,
        "augsbert:mode=domain-transfer,teacher=ce,teacher_train_on=stsb,topics=prompted",
        get_profile("quick"),
        None,
        "bws-topic",
    )
    assert prompted.identity()["options"]["topics"] == "prompted"


def test_prompted_and_hidden_distillation_end_to_end(tiny_bert, tmp_path, monkeypatch):
    """Thesis 5.6.1: one topic-prompted MLM, one teacher and one scoring serve Prompted and Hidden; the teacher
    scores ((t1, x1), (t2, x2)); the Prompted student learns prompted texts, the Hidden student never sees a topic token or
    the delimiter, neither in training nor when it is evaluated on a raw task."""
    recorder = _Recorder(monkeypatch)
    prompted = f"{DISTILLATION},teacher_mlm=true,topics=prompted"
    hidden = f"{DISTILLATION},teacher_mlm=true,student_from_mlm=true,topics=hidden"
    runner = _runner(tiny_bert, tmp_path, [prompted, hidden])
    outcomes = runner.run(LocalExecutor(), runner.plan())
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.message for o in outcomes]
    results = tmp_path / "results"
    details = {}
    for outcome in outcomes:
        record = json.loads(runner.store.record_path(outcome.spec.key, 42, "stsb").read_text())
        details[outcome.spec.options["topics"]] = record["training"]["augmented_sbert"]
    assert details["prompted"]["domain_mlm_backbone"] == details["hidden"]["domain_mlm_backbone"]
    assert details["hidden"]["topic_labels"] == sorted(TOPIC_WORDS)
    assert details["prompted"]["student_examples"] == details["hidden"]["student_examples"] > 0
    mlm_record = json.loads((Path(details["hidden"]["domain_mlm_backbone"]) / "domain_mlm.json").read_text())
    assert mlm_record["topic_prompts"] == {"delimiter": DEFAULT_DELIMITER, "topic_tokens_masked": False}
    assert len(list((results / "checkpoints").glob("cbe-*/seed-42"))) == 1  # one teacher for both settings

    # The teacher reads the target pairs with their prompts (it also scores STS-B dev pairs while it trains).
    toy = set(_ToyTopics.labels.sentences)
    target_scored = [text for text in recorder.scored if text in toy or _prompted(text)]
    assert target_scored and all(_prompted(text) for text in target_scored)
    # Scored once: the second student reads the teacher's scores from the store's cache.
    assert len(target_scored) == 2 * details["prompted"]["candidates"] == 2 * details["hidden"]["candidates"]
    assert len(list((results / "cache").glob("teacher-scores-*.npy"))) == 1
    students = list(recorder.trained.values())
    assert len(students) == 2
    prompted_texts, hidden_texts = sorted(students, key=lambda texts: not _prompted(texts[0]))
    assert all(_prompted(text) for text in prompted_texts)
    assert not any(DEFAULT_DELIMITER in text or _prompted(text) for text in hidden_texts)
    hidden_student = next(key for key, texts in recorder.trained.items() if texts is hidden_texts)
    evaluated = recorder.encoded[hidden_student]
    assert evaluated and not any(DEFAULT_DELIMITER in text for text in evaluated)

    artifact = json.loads(next((results / "artifacts").glob("augsbert-*/seed-42/silver_pairs.json")).read_text())
    assert artifact["topics"] in ("prompted", "hidden") and len(artifact["topic_labels"]) == 24


def test_topic_mlm_never_masks_topic_or_delimiter_tokens(tiny_bert, tmp_path, monkeypatch):
    """train_domain_mlm with topics passes the topic mask to the masking function: no label on a protected token."""
    from harness.nn import mlm

    seen = []
    maskable_positions, mask_tokens = mlm.maskable_positions, mlm.mask_tokens

    def recording_maskable(segments, protected=None):
        result = maskable_positions(segments, protected)
        seen.append({"protected": protected, "maskable": result})
        return result

    def recording_mask(input_ids, maskable, *args, **kwargs):
        masked, labels = mask_tokens(input_ids, maskable, *args, **kwargs)
        seen[-1]["labels"] = labels
        return masked, labels

    monkeypatch.setattr(mlm, "maskable_positions", recording_maskable)
    monkeypatch.setattr(mlm, "mask_tokens", recording_mask)
    data = _labeled_sentences(16)
    first, second = data.sentences[:8], data.sentences[8:]
    topics = mlm.PairTopics(data.labels[:8], data.labels[8:])
    mlm.train_domain_mlm(
        tiny_bert, first, second, tmp_path / "mlm", profile=get_profile("smoke"), seed=0, device="cpu", topics=topics
    )
    assert seen
    for batch in seen:
        protected = batch["protected"]
        assert protected is not None and protected.any()
        assert not (batch["maskable"] & protected).any()
        assert (batch["labels"][protected] == -100).all()
        assert (batch["labels"] != -100).any()


class _FakeTeacher:
    def score(self, first, second):
        return np.linspace(0.0, 1.0, len(first))


class _FakeContext:
    """What annotate_silver_pairs reads of a RecipeContext (no training)."""

    def __init__(self, registry, labeled: LabeledSentences, **options):
        recipe = registry.recipe("augsbert")
        self.options = {key: option.default for key, option in recipe.options.items()}
        self.options.update(teacher="cbe", mode="domain-transfer", teacher_train_on="stsb", sampler="random", **options)
        self.registry, self.labeled = registry, labeled
        self.seed, self.profile, self.train_on, self.backbone = 42, get_profile("smoke"), "my-topics", "unused"
        self.artifact_dir = self.cache_dir = self.cache = None
        self.student, self.device, self.progress = "be", "cpu", False
        self.logger = logging.getLogger("test")

    def component(self, kind, name):
        return self.registry.component(kind, name)

    def trained_model(self, text, train_on=None, backbone=None):
        return _FakeTeacher()

    def training_data(self, source, kind):
        assert kind == LABELED_SENTENCES
        return TrainingSplits(source, self.labeled)


@pytest.mark.parametrize("topics", ["prompted", "hidden"])
def test_the_pairs_are_the_same_with_and_without_topics(registry, topics):
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    labeled = _labeled_sentences()
    splits = TrainingSplits("my-topics", UnlabeledSentences(list(labeled.sentences)))
    original = annotate_silver_pairs(splits, _FakeContext(registry, labeled))
    topical = annotate_silver_pairs(splits, _FakeContext(registry, labeled, topics=topics))
    assert topical.candidates == original.candidates and topical.topics == labeled.labels
    silver = topical.silver
    assert all(_prompted(text) for text in silver.first) == (topics == "prompted")
    assert not any(DEFAULT_DELIMITER in text for text in original.silver.first)


@pytest.mark.parametrize(
    ("labels", "sentence", "expected"),
    [
        (
            [f"Energy {DEFAULT_DELIMITER} policy", "Schools"],
            None,
            f"recipe augsbert, topics=prompted, training source 'my-topics': the topic label 'Energy {DEFAULT_DELIMITER} "
            "policy' contains the topic delimiter",
        ),
        (
            ["Energy", "Schools"],
            f"prices in {DEFAULT_DELIMITER} rose",
            f"training source 'my-topics': the topic delimiter '{DEFAULT_DELIMITER}' occurs in the sentences of "
            "'my-topics'",
        ),
    ],
)
def test_a_label_or_sentence_with_the_delimiter_is_one_clear_error(registry, labels, sentence, expected):
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    labeled = _labeled_sentences(8)
    labeled = LabeledSentences(list(labeled.sentences), [labels[i % 2] for i in range(8)])
    if sentence:
        labeled.sentences[3] = sentence
    splits = TrainingSplits("my-topics", labeled)
    with pytest.raises(DataFileError) as error:
        annotate_silver_pairs(splits, _FakeContext(registry, labeled, topics="prompted"))
    assert expected in str(error.value) and "delimiter=CHARACTER" in str(error.value)


def test_max_sentences_cuts_the_target_sentences(registry):
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    labeled = _labeled_sentences()
    pairs = annotate_silver_pairs(
        TrainingSplits("my-topics", labeled), _FakeContext(registry, labeled, topics="hidden", max_sentences=10)
    )
    assert len(pairs.sentences) == 10 and set(pairs.sentences) <= set(labeled.sentences)
    assert max(max(pair) for pair in pairs.candidates) < 10


# -- the supervised classifier ----------------------------------------------------------------------------------------
def _classifier(tiny_bert, **options):
    from harness.plugins.topic_classifier import TopicClassifier, build
    from harness.testing import model_context

    registry = build_registry()
    plugin = registry.model("classifier")
    ctx = model_context(
        tiny_bert,
        options,
        plugin=plugin,
        profile=get_profile("smoke").with_budget({"epochs": 4, "max_steps": None, "batch_size": 8}),
    )
    model = build(ctx)
    assert isinstance(model, TopicClassifier)
    return model, ctx


@pytest.mark.parametrize("input_form", ["raw", "prompted"])
def test_the_classifier_trains_its_encoder_and_the_loss_falls(tiny_bert, tmp_path, input_form):
    model, ctx = _classifier(tiny_bert, input=input_form, lr=1e-3)
    before = model.encode(["nuclear energy power", "school uniform pupils"])
    splits = TrainingSplits("toy-topics", _labeled_sentences(32), _labeled_sentences(8, seed=1))
    report = model.fit(splits, ctx)
    assert report.loss_history[-1] < report.loss_history[0]
    assert len(report.dev_history) == 4 and report.best_epoch is not None  # the dev split picks the epoch
    assert model.labels == sorted(TOPIC_WORDS)
    after = model.encode(["nuclear energy power", "school uniform pupils"])
    assert after.shape == before.shape and not np.allclose(before, after)
    model.save(tmp_path)
    reloaded, _ = _classifier(tiny_bert, input=input_form)
    reloaded.load(tmp_path)
    np.testing.assert_allclose(reloaded.encode(["nuclear energy power"]), after[:1], rtol=1e-5, atol=1e-6)


def test_the_prompted_classifier_refuses_a_label_with_the_delimiter(tiny_bert):
    model, ctx = _classifier(tiny_bert, input="prompted")
    labeled = _labeled_sentences(8)
    splits = TrainingSplits(
        "my-topics", LabeledSentences(list(labeled.sentences), [f"A {DEFAULT_DELIMITER} B", "C"] * 4)
    )
    with pytest.raises(
        DataFileError,
        match="model classifier:input=prompted, training source 'my-topics': the topic "
        "label 'A ¥ B' contains the topic delimiter",
    ):
        model.fit(splits, ctx)


def test_the_classifier_runs_as_a_trained_model(tiny_bert, tmp_path):
    runner = _runner(tiny_bert, tmp_path, ["classifier", "classifier:input=prompted,head=thesis-code"])
    outcomes = runner.run(LocalExecutor(), runner.plan())
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.message for o in outcomes]
    assert len(list((tmp_path / "results" / "checkpoints").glob("classifier-*/seed-42"))) == 2


# -- the topic MLM's masking -------------------------------------------------------------------------------
def test_thesis_code_masking_uses_only_the_mask_token():
    import torch

    from harness.nn.mlm import BERT_MASKING, THESIS_CODE_MASKING, mask_tokens

    ids = torch.randint(1000, 2000, (64, 50))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    masked, labels = mask_tokens(
        ids, maskable, 103, 30522, torch.Generator().manual_seed(0), masking=THESIS_CODE_MASKING
    )
    chosen = labels != -100
    assert 0.17 < chosen.float().mean() < 0.23  # 20% predicted
    assert (masked[chosen] == 103).all() and (masked[~chosen] == ids[~chosen]).all()
    masked, labels = mask_tokens(ids, maskable, 103, 30522, torch.Generator().manual_seed(0), masking=BERT_MASKING)
    chosen = labels != -100
    assert 0.12 < chosen.float().mean() < 0.18 and 0.7 < (masked[chosen] == 103).float().mean() < 0.9


def test_topic_recipes_default_to_the_thesis_code_masking_and_get_new_hashes(registry):
    from harness.nn.mlm import BERT_MASKING, THESIS_CODE_MASKING
    from harness.plugins.augmented_sbert import mlm_masking

    base = "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,teacher_mlm=true"

    def spec(extra):
        return resolve_model_spec(registry, base + extra, get_profile("quick"), train_on="20ng-topic")

    original, prompted = spec(""), spec(",topics=prompted")
    assert mlm_masking(original.options) == BERT_MASKING and mlm_masking(prompted.options) == THESIS_CODE_MASKING
    assert "mlm_masking" not in original.identity()["options"]  # topics=original keeps its hash
    assert prompted.identity()["options"]["mlm_masking"] == "auto"  # the topic settings' meaning changed: new hash
    assert mlm_masking(spec(",topics=prompted,mlm_masking=bert").options) == BERT_MASKING
