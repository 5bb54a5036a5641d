"""Augmented SBERT (the ``augsbert`` recipe, plugins/augmented_sbert.py; the silver-density plot,
plugins/silver_density.py; domain MLM, harness.nn.mlm) end to end on a tiny random BERT."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from harness import (
    UNLABELED_SENTENCES,
    Component,
    IncompatibleError,
    ModelPlugin,
    Task,
    TaskMetadata,
    TaskPlugin,
    TrainingSplits,
    UnlabeledSentences,
    as_pair_scorer,
    hookimpl,
)
from harness.errors import HarnessError
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.nn.mlm import freeze_embedding_layer, mask_tokens, maskable_positions, pairwise_features
from harness.nn.sampling import PairSampler
from harness.nn.silver_pairs import ARTIFACT, read_silver_pairs
from harness.plugins.silver_density import draw_silver_density
from harness.profiles import get_profile
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.spec import resolve_model_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _matrix(tmp_path: Path, backbone: str, models: list, train_on: str, tasks: list[str]) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "profile": "smoke",
                "seeds": [42],
                "backbone": backbone,
                "train_on": train_on,
                "tasks": tasks,
                "models": models,
            }
        )
    )
    return path


def _ok_records(results: Path) -> dict[str, dict]:
    records = [json.loads(p.read_text()) for p in results.glob("*/seed-*/*.json")]
    return {r["model"]["label"]: r for r in records if r.get("status") == "ok"}


def _artifact(results: Path, record: dict) -> dict:
    return json.loads((results / "artifacts" / record["model_key"] / "seed-42" / ARTIFACT).read_text())


def test_semi_supervised_and_self_distillation_share_one_teacher(run_cli, tiny_bert, tmp_path):
    results = tmp_path / "results"
    matrix = _matrix(
        tmp_path,
        tiny_bert,
        [
            "augsbert:teacher=cbe,sampler=bm25",
            "augsbert:teacher=cbe,sampler=kde-iterative",
            "augsbert:teacher=cbe,mode=self-distillation",
        ],
        "stsb",
        ["stsb"],
    )
    code, out, err = run_cli("run", "--matrix", matrix, "--device", "cpu", "--results", results, "--no-progress")
    assert code == 0, err
    assert out.count("training cbe on stsb") == 1  # the teacher checkpoint is trained once and shared
    records = _ok_records(results)
    assert len(records) == 3

    bm25 = records["augsbert:sampler=bm25,teacher=cbe"]
    details = bm25["training"]["augmented_sbert"]
    assert details["teacher"] == "cbe" and details["teacher_train_on"] == "stsb"
    assert details["student_examples"] == details["gold"] + details["silver"]  # gold + silver
    assert 0 < details["silver"] <= 64  # capped at the smoke profile's training budget
    artifact = _artifact(results, bm25)
    rows = artifact["pairs"]
    assert len(rows) == details["candidates"] and sum(row[3] for row in rows) == details["silver"]
    assert all(i != j for i, j, _, _ in rows)
    assert len({frozenset((i, j)) for i, j, _, _ in rows}) == len(rows)
    assert all(-1.0001 <= score <= 1.0001 for _, _, score, _ in rows)  # a CBE teacher scores cosines
    assert len(artifact["gold_scores"]) == details["gold"] == 64

    self_distilled = records["augsbert:mode=self-distillation,teacher=cbe"]
    details = self_distilled["training"]["augmented_sbert"]
    assert details["sampler"] == "none" and details["student_examples"] == details["silver"] == details["gold"]
    artifact = _artifact(results, self_distilled)
    sentences = artifact["sentences"]
    gold_pairs = [(sentences[i], sentences[j]) for i, j, _, _ in artifact["pairs"]]
    assert len(gold_pairs) == 64 and all(row[3] == 1 for row in artifact["pairs"])

    kde = records["augsbert:sampler=kde-iterative,teacher=cbe"]["training"]["augmented_sbert"]
    assert 2 <= kde["silver"] <= kde["candidates"]

    # Figure 6.4 from the store, through the CLI's generic plot command.
    code, out, err = run_cli("plot", "silver-density", "--results", results, "--output", tmp_path / "plots")
    assert code == 0, err
    pngs = sorted((tmp_path / "plots").glob("*.png"))
    assert len(pngs) == 2  # (stsb, cbe, semi-supervised) and (stsb, cbe, self-distillation)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert len(read_silver_pairs(results)) == 3


def test_domain_transfer_with_mlm_adapted_teacher(run_cli, tiny_bert, tmp_path):
    results = tmp_path / "results"
    spec = (
        "augsbert:teacher=ce,mode=domain-transfer,teacher_train_on=stsb,sampler=random,teacher_mlm=true,"
        "student_from_mlm=true"
    )
    matrix = _matrix(tmp_path, tiny_bert, [spec], "bws-cross-topic", ["bws-cross-topic"])
    code, out, err = run_cli("run", "--matrix", matrix, "--device", "cpu", "--results", results, "--no-progress")
    assert code == 0, err
    (record,) = _ok_records(results).values()
    details = record["training"]["augmented_sbert"]
    assert details["student_examples"] == details["silver"]  # the target's gold scores never train the student
    assert details["teacher"] == "ce:freeze_embeddings=true" and details["teacher_train_on"] == "stsb"
    mlm_dir = Path(details["domain_mlm_backbone"])
    assert mlm_dir.parent.parent == results / "cache"  # the store's shared cache, not a rebuilt path
    assert json.loads((mlm_dir / "domain_mlm.json").read_text())["pairs"] == details["candidates"]

    (teacher_dir,) = (results / "checkpoints").glob("ce-*/seed-42")
    teacher_record = json.loads((teacher_dir / "training.json").read_text())
    assert teacher_record["spec"]["train_on"] == "stsb"
    assert teacher_record["spec"]["backbone"] == str(mlm_dir)
    assert teacher_record["spec"]["options"]["freeze_embeddings"] is True
    # The teacher was fine-tuned from the MLM checkpoint with its embedding layer frozen.
    teacher_weights = load_file(str(teacher_dir / "model.safetensors"))
    mlm_weights = load_file(str(mlm_dir / "model.safetensors"))
    word = "embeddings.word_embeddings.weight"
    assert torch.equal(teacher_weights[f"transformer.{word}"], mlm_weights[word])
    layer = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(teacher_weights[f"transformer.{layer}"], mlm_weights[layer])
    original = load_file(str(Path(tiny_bert) / "model.safetensors"))
    assert not torch.equal(original[word], mlm_weights[word])  # the MLM itself did train
    assert _artifact(results, record)["teacher_train_on"] == "stsb"


@pytest.mark.parametrize(
    ("spec", "train_on", "expected"),
    [
        ("augsbert:teacher=cbe,sampler=kde-iterativ", "stsb", "Did you mean: kde-iterative"),
        ("augsbert:teacher=cbe,sampler=kde-iterativ", "stsb", "Known samplers: bm25, bm25+semantic-search"),
        ("augsbert:teacher=cbe", None, "add --train-on TASK"),
        ("augsbert:teacher=cbe,mode=domain-transfer", "bws-cross-topic", "add teacher_train_on=TASK"),
        (
            "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=bws-topic",
            "bws-cross-topic",
            "offers no scored sentence pairs",
        ),
        ("augsbert:teacher=cbe,teacher_train_on=stsb", "bws-cross-topic", "only applies to mode=domain-transfer"),
        (
            "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=kde",
            "bws-cross-topic",
            "matches the target's gold score distribution",
        ),
        ("augsbert:teacher=cbe,student_from_mlm=true", "stsb", "add teacher_mlm=true"),
        ("augsbert:sampler=bm25", "stsb", "distils a teacher into its student; add teacher=ce or teacher=cbe"),
        ("augsbert:teacher=augsbert", "stsb", "is itself a recipe"),
        ("augsbert:student=augsbert,teacher=cbe", "stsb", "is itself a recipe; name a model, e.g. student=be"),
        ("augsbert:teacher=cbe,sampler=bm25,candidates=random", "stsb", "only applies to samplers that select"),
        ("augsbert:teacher=cbe,sampler=kde,candidates=kde-iterative", "stsb", "candidates must be proposal samplers"),
        ("augsbert:teacher=nope", "stsb", "unknown model 'nope'"),
        ("augsbert:teacher=cbe", "propsegment-facts", "Training sources that would work"),
        (
            "augsbert:teacher=cbe",
            "bws-topic",
            "offers sentences but no scored pairs, so mode=semi-supervised has no gold",
        ),
        (
            "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=random,topics=prompted",
            "stsb",
            "offers none; train on a source that does: 20ng-parent, 20ng-topic, bws-topic",
        ),
        (
            "augsbert:teacher=cbe,sampler=random,topics=hidden",
            "bws-topic",
            "use mode=domain-transfer,teacher_train_on=stsb",
        ),
        (
            "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=random,topics=prompted,delimiter= ",
            "bws-topic",
            "the topic delimiter must be a non-blank string",
        ),
        (
            "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=random,delimiter=#",
            "bws-topic",
            "delimiter only applies to topics=prompted or topics=hidden",
        ),
        ("augsbert:teacher=cbe,max_sentences=10", "stsb", "has gold pairs, so cut those instead"),
        (
            "augsbert:teacher=cbe,sampler=bm25,search_encoder=simcse",
            "stsb",
            "search_encoder only applies to samplers that embed sentences",
        ),
        (
            "augsbert:teacher=cbe,sampler=semantic-search,search_encoder=cbe",
            "stsb",
            "search_encoder='cbe' cannot embed sentences for semantic search",
        ),
        (
            "augsbert:teacher=cbe,sampler=kde,candidates=semantic-search,search_encoder=simcse",
            "stsb",
            "search_model=fine-tuned trains search_encoder='simcse' on the teacher's scored pairs",
        ),
    ],
)
def test_refused_before_training_with_a_message_that_helps(run_cli, tiny_bert, tmp_path, spec, train_on, expected):
    argv = ["validate", "--models", spec, "--tasks", "stsb", "--profile", "smoke", "--backbone", tiny_bert]
    if train_on:
        argv += ["--train-on", train_on]
    code, out, err = run_cli(*argv)
    assert code == 2 and expected in err, err
    assert not (tmp_path / "results").exists()


class _UnlabeledTask(Task):
    """A domain that offers only unlabeled sentences (like a USEB domain); it is never evaluated here."""

    metadata = TaskMetadata(
        name="toy-unlabeled",
        family="toy",
        description="unlabeled sentences only",
        main_score="spearman",
        metric="none",
        reference="test",
        dataset="toy",
        dataset_source="in code",
        license="CC0",
        training_kinds=(UNLABELED_SENTENCES,),
    )

    def training_data(self, kind, ctx=None):
        words = "argument nuclear energy school uniform wage cloning abortion gun death penalty law".split()
        rng = np.random.default_rng(0)
        sentences = [" ".join(rng.choice(words, 6)) for _ in range(40)]
        return TrainingSplits("toy-unlabeled", UnlabeledSentences(sentences)) if kind == UNLABELED_SENTENCES else None

    def check_data(self) -> str:
        return "toy"


class _ThirdParty:
    """An in-process plugin: a model that cannot score pairs, a sampler of its own, an unlabeled-only domain."""

    class EveryOtherGoldPair(PairSampler):
        name = "every-other"

        def propose(self, inputs):
            return inputs.gold_pairs[::2]

    @staticmethod
    @hookimpl
    def register_models(register):
        register(
            ModelPlugin(
                name="classifier-only",
                description="trainable, but scores no pairs",
                factory=lambda ctx: None,
                capabilities=("trainable",),
                training_kinds=("scored_pairs",),
            )
        )

    @staticmethod
    @hookimpl
    def register_tasks(register):
        register(TaskPlugin(_UnlabeledTask.metadata, lambda options, data_dir: _UnlabeledTask(options, data_dir)))

    @staticmethod
    @hookimpl
    def register_components(register):
        register(Component("sampler", "every-other", _ThirdParty.EveryOtherGoldPair(), "every other gold pair"))


def _runner(tiny_bert, tmp_path, spec: str, train_on: str = "stsb") -> Run:
    registry = build_registry(extra_plugins=[_ThirdParty])
    config = RunConfig(
        models=[ModelEntry(spec)],
        tasks=["stsb"],
        profile="smoke",
        backbone=tiny_bert,
        train_on=train_on,
        device="cpu",
        results_dir=tmp_path / "results",
        progress=False,
    )
    return Run(registry, config, log=lambda message: None)


def test_a_teacher_that_cannot_score_pairs_is_refused(tiny_bert, tmp_path):
    with pytest.raises(IncompatibleError, match="cannot score sentence pairs.*use a pair scorer: .*cbe.*ce"):
        _runner(tiny_bert, tmp_path, "augsbert:teacher=classifier-only").plan()


def test_third_party_sampler_and_be_as_a_stand_in_teacher(tiny_bert, tmp_path):
    runner = _runner(tiny_bert, tmp_path, "augsbert:teacher=be,sampler=every-other,mode=self-distillation")
    (outcome,) = runner.run(LocalExecutor(), runner.plan())
    assert outcome.status == "ok"
    record = json.loads(runner.store.record_path(outcome.spec.key, 42, "stsb").read_text())
    details = record["training"]["augmented_sbert"]
    assert details["candidates"] == details["silver"] == details["student_examples"] == 32
    # A Bi-Encoder teacher's scores are its cosines: the artifact holds exactly the stand-in teacher's scores.
    artifact = _artifact(tmp_path / "results", record)
    profile = get_profile("smoke")
    teacher = runner.models.checkpoints.trained_model(
        resolve_model_spec(runner.registry, "be", profile, tiny_bert, "stsb"), profile, "cpu", 42
    )
    sentences = artifact["sentences"]
    first = [sentences[i] for i, _, _, _ in artifact["pairs"]]
    second = [sentences[j] for _, j, _, _ in artifact["pairs"]]
    np.testing.assert_allclose(
        as_pair_scorer(teacher).score(first, second), [row[2] for row in artifact["pairs"]], atol=1e-5
    )


def test_the_student_is_any_spec_that_learns_from_scored_pairs(tiny_bert, tmp_path):
    runner = _runner(
        tiny_bert, tmp_path, "augsbert:student=be:pooling=cls,teacher=be,sampler=every-other,mode=self-distillation"
    )
    (outcome,) = runner.run(LocalExecutor(), runner.plan())
    assert outcome.status == "ok"
    record = json.loads(runner.store.record_path(outcome.spec.key, 42, "stsb").read_text())
    assert record["training"]["augmented_sbert"]["student"] == "be:pooling=cls"
    student = runner.models.checkpoints.trained_model(outcome.spec, get_profile("smoke"), "cpu", 42)
    assert student.encoder.pooling == "cls"


def test_domain_transfer_into_unlabeled_sentences(tiny_bert, tmp_path):
    """Thesis 5.4.3 / table 6.10 (AugSBERT on a USEB domain): semantic-search + random pairs of plain sentences."""
    spec = "augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,sampler=semantic-search+random"
    runner = _runner(tiny_bert, tmp_path, spec, train_on="toy-unlabeled")
    (outcome,) = runner.run(LocalExecutor(), runner.plan())
    assert outcome.status == "ok"
    record = json.loads(runner.store.record_path(outcome.spec.key, 42, "stsb").read_text())
    details = record["training"]["augmented_sbert"]
    assert details["candidates"] > 64  # ~3 neighbours + ~3 random partners per sentence, minus repeats
    assert details["gold"] == 0 and details["student_examples"] == details["silver"] == 64  # smoke budget
    artifact = _artifact(tmp_path / "results", record)
    assert artifact["gold_scores"] == [] and len(artifact["sentences"]) == 40
    assert draw_silver_density(tmp_path / "results", tmp_path / "plots")  # drawn without a gold curve


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("be", "model 'be' learns from scored_pairs, but task 'toy-unlabeled' offers unlabeled_sentences"),
        ("augsbert:teacher=cbe", "has no gold pairs to train the teacher on"),
        ("augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb", "sampler none re-annotates gold pairs"),
    ],
)
def test_unlabeled_targets_need_domain_transfer(tiny_bert, tmp_path, spec, expected):
    with pytest.raises(HarnessError, match=expected):
        _runner(tiny_bert, tmp_path, spec, train_on="toy-unlabeled").plan()


def test_silver_density_plot_without_artifacts_says_what_to_run(tmp_path):
    with pytest.raises(HarnessError, match="no silver-pair artifacts.*harness run --models augsbert:teacher=cbe"):
        draw_silver_density(tmp_path, tmp_path / "plots")


# -- domain-adaptive MLM pieces ---------------------------------------------------------------------------------------
def test_pairwise_mlm_input_is_cls_s1_sep_cls_s2_sep(tiny_bert):
    from harness.nn import load_tokenizer, load_transformer

    tokenizer = load_tokenizer(tiny_bert)
    config = load_transformer(tiny_bert).config
    builder, (row,) = pairwise_features(
        tokenizer, ["a man plays"], ["the cat sits"], tiny_bert, config, get_profile("smoke").max_seq_length
    )
    tokens = tokenizer.convert_ids_to_tokens(row["input_ids"])
    assert tokens == ["[CLS]", "a", "man", "plays", "[SEP]", "[CLS]", "the", "cat", "sits", "[SEP]"]
    batch = builder.collate([row])
    assert batch["token_type_ids"].tolist() == [[0] * 5 + [1] * 5]
    assert maskable_positions(batch["segments"]).tolist() == [[False, True, True, True, False] * 2]


def test_mask_tokens_masks_only_content_and_at_least_one_per_pair():
    input_ids = torch.arange(100, 140).reshape(4, 10)
    maskable = torch.zeros(4, 10, dtype=torch.bool)
    maskable[:, 1:4] = True
    maskable[:, 6:9] = True
    maskable[3] = False  # a row with nothing to mask
    generator = torch.Generator().manual_seed(0)
    masked, labels = mask_tokens(input_ids, maskable, mask_token_id=1, vocab_size=50, generator=generator)
    predicted = labels != -100
    assert not (predicted & ~maskable).any()
    assert predicted[:3].any(dim=1).all() and not predicted[3].any()
    assert torch.equal(labels[predicted], input_ids[predicted])
    assert torch.equal(masked[~predicted], input_ids[~predicted])
    big_ids = torch.arange(20000).reshape(100, 200) + 100
    big_mask = torch.ones(100, 200, dtype=torch.bool)
    masked, labels = mask_tokens(big_ids, big_mask, 1, 50, torch.Generator().manual_seed(1))
    share = (labels != -100).float().mean().item()
    assert 0.13 < share < 0.17
    to_mask_token = (masked == 1) & (labels != -100)
    assert 0.75 < to_mask_token.sum().item() / (labels != -100).sum().item() < 0.85


def test_freeze_embedding_layer_freezes_only_embeddings(tiny_bert):
    from harness.nn import load_transformer

    transformer = load_transformer(tiny_bert)
    frozen = freeze_embedding_layer(transformer)
    assert frozen == sum(p.numel() for p in transformer.embeddings.parameters())
    assert all(not p.requires_grad for p in transformer.embeddings.parameters())
    assert all(p.requires_grad for p in transformer.encoder.parameters())


# -- thesis-code defaults of the pipeline, on a fake context (no training) -------------------------------------------
class _FakeTeacher:
    """Scores a pair by the length difference of its sentences (deterministic, distinct from the gold scores)."""

    def score(self, first, second):
        return np.array([1.0 / (1.0 + abs(len(a) - len(b))) for a, b in zip(first, second)])


class _FakeSearchEncoder:
    def encode(self, texts):
        return np.array([[len(t), t.count(" ") + 1.0] for t in texts], dtype=np.float32)


class _FakeContext:
    def __init__(self, registry, **options):
        from harness.plugin_api import RecipePlugin  # noqa: F401  (the recipe's options are the registered ones)

        recipe = registry.recipe("augsbert")
        self.options = {key: option.default for key, option in recipe.options.items()}
        self.options.update(teacher="ce", **options)
        self.registry = registry
        self.seed = 42
        self.profile = get_profile("smoke")
        self.train_on = "stsb"
        self.backbone = "unused"
        self.artifact_dir = None
        self.cache_dir = self.cache = None
        self.student = "be"
        self.device = "cpu"
        self.progress = False
        self.calls: list[tuple[str, str | None]] = []
        import logging

        self.logger = logging.getLogger("test")

    def component(self, kind, name):
        return self.registry.component(kind, name)

    def trained_model(self, text, train_on=None, backbone=None):
        self.calls.append((text, train_on))
        return _FakeSearchEncoder() if text == self.options["search_encoder"] else _FakeTeacher()


def _gold_splits(held_out=frozenset()):
    from harness import ScoredPairs

    first = ["a man plays a guitar", "a dog runs in a park", "the market fell today", "she sings a song"]
    second = ["a man is playing guitar", "a cat sleeps on a sofa", "stocks dropped sharply", "a woman sings"]
    gold = ScoredPairs(first, second, np.array([0.9, 0.1, 0.7, 0.8]))
    return TrainingSplits("stsb", gold, None, held_out_sentences=frozenset(held_out))


def test_semi_supervised_student_learns_teacher_labels_of_gold_and_silver(registry):
    """Thesis 5.5 and its code: the teacher re-annotates the gold train pairs; AugSBERT-None = teacher labels only."""
    from harness.plugins.augmented_sbert import annotate_silver_pairs, student_pairs

    splits = _gold_splits()
    teacher = _FakeTeacher().score(splits.train.first, splits.train.second)
    pairs = annotate_silver_pairs(splits, _FakeContext(registry, sampler="random", top_k=2))
    trained = student_pairs(pairs, "semi-supervised", "teacher", "random")
    np.testing.assert_allclose(trained.scores[:4], teacher, rtol=1e-6)  # gold pairs with the teacher's scores
    assert len(trained) == 4 + len(pairs.silver)
    kept_gold = student_pairs(pairs, "semi-supervised", "gold", "random")
    np.testing.assert_allclose(kept_gold.scores[:4], splits.train.scores)  # gold_labels=gold: today's behaviour

    none = annotate_silver_pairs(splits, _FakeContext(registry))  # sampler none
    only_teacher = student_pairs(none, "semi-supervised", "teacher", "none")
    assert len(only_teacher) == 4 and list(only_teacher.first) == splits.train.first
    np.testing.assert_allclose(only_teacher.scores, teacher, rtol=1e-6)
    assert len(student_pairs(none, "semi-supervised", "gold", "none")) == 8  # gold + teacher-labelled duplicates


@pytest.mark.parametrize("kde_fit", ["teacher", "gold"])
def test_kde_fits_the_gold_density_on_the_teachers_scores_of_the_gold_pairs(registry, kde_fit, monkeypatch):
    from harness.plugins import augmented_sbert

    seen = {}
    sampler = registry.component("sampler", "kde-iterative")

    def select(candidate_scores, reference, rng):
        seen["reference"] = np.asarray(reference)
        return np.arange(len(candidate_scores))

    monkeypatch.setattr(sampler, "select", select)
    splits = _gold_splits()
    augmented_sbert.annotate_silver_pairs(splits, _FakeContext(registry, sampler="kde-iterative", kde_fit=kde_fit))
    expected = (
        _FakeTeacher().score(splits.train.first, splits.train.second) if kde_fit == "teacher" else splits.train.scores
    )
    np.testing.assert_allclose(seen["reference"], expected, rtol=1e-6)


@pytest.mark.parametrize("search_model, expected_source", [(None, "stsb"), ("pretrained", None)])
def test_semantic_search_embeds_with_a_bi_encoder_fine_tuned_on_the_gold_pairs(registry, search_model, expected_source):
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    options = {"sampler": "semantic-search"} | ({"search_model": search_model} if search_model else {})
    ctx = _FakeContext(registry, **options)
    annotate_silver_pairs(_gold_splits(), ctx)
    assert ("be", expected_source) in ctx.calls  # default: fine-tuned on the teacher's gold source


def test_the_search_encoder_is_the_option_search_encoder(registry, run_cli, tiny_bert):
    """Option search_encoder (default be) embeds for semantic search; a pretrained embedder that cannot learn from
    scored pairs validates with search_model=pretrained, and the default keeps published keys (its hash is unchanged)."""
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    ctx = _FakeContext(registry, sampler="semantic-search", search_encoder="simcse", search_model="pretrained")
    annotate_silver_pairs(_gold_splits(), ctx)
    assert ("simcse", None) in ctx.calls and not [call for call in ctx.calls if call[0] == "be"]
    code, out, err = run_cli(
        "validate",
        "--models",
        "augsbert:teacher=cbe,sampler=semantic-search,search_encoder=simcse,search_model=pretrained",
        "--tasks",
        "stsb",
        "--train-on",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
    )
    assert code == 0, err
    profile = get_profile("smoke")
    plain = resolve_model_spec(registry, "augsbert:teacher=cbe,sampler=semantic-search", profile, tiny_bert, "stsb")
    named = resolve_model_spec(
        registry, "augsbert:teacher=cbe,sampler=semantic-search,search_encoder=be", profile, tiny_bert, "stsb"
    )
    other = resolve_model_spec(
        registry,
        "augsbert:teacher=cbe,sampler=semantic-search,search_encoder=simcse,search_model=pretrained",
        profile,
        tiny_bert,
        "stsb",
    )
    assert plain.key == named.key != other.key


def test_pipeline_never_pairs_two_held_out_sentences(registry):
    from harness.plugins.augmented_sbert import annotate_silver_pairs

    splits = _gold_splits(
        held_out={"a man plays a guitar", "a man is playing guitar", "a dog runs in a park", "a cat sleeps on a sofa"}
    )
    pairs = annotate_silver_pairs(splits, _FakeContext(registry, sampler="random", top_k=7))
    held = {pairs.sentences.index(s) for s in splits.held_out_sentences}
    assert pairs.held_out_count == 4
    assert not [c for c in pairs.candidates if set(c) <= held]
    assert pairs.held_out_pairs_dropped > 0


def test_cache_entries_keep_the_names_of_earlier_releases(tmp_path):
    """The recipe's cache moved to the core (harness.cache, ctx.cache): the names are those harness 0.3 computed
    (pinned here), so existing stores keep hitting their teacher scores and MLM checkpoints."""
    import logging

    import harness
    from harness.cache import ArtifactCache
    from harness.plugins.augmented_sbert import cached_teacher_scores, mlm_directory

    ctx = harness.ModelContext(
        options={"mlm_lr": 3e-5},
        backbone="minilm",
        profile=get_profile("smoke"),
        device="cpu",
        seed=42,
        cache_dir=tmp_path,
    )
    assert ctx.cache.root == tmp_path and harness.ModelContext(**{**vars(ctx), "cache_dir": None}).cache is None
    first, second = ["a b", "c d"], ["e f", "g h"]
    assert mlm_directory(ctx, first, second) == tmp_path / "domain-mlm-9a8fee6417cf0822" / "seed-42"

    class Teacher:
        def __init__(self):
            self.network = torch.nn.Linear(2, 1)
            torch.nn.init.constant_(self.network.weight, 0.5)
            torch.nn.init.constant_(self.network.bias, -1.0)

        def score(self, first, second):
            return np.arange(len(first), dtype=np.float64)

    Teacher.__qualname__ = "Teacher"  # the class name is part of the key; pinned as computed at module level

    class Context:
        cache = ArtifactCache(tmp_path)
        profile = get_profile("smoke")
        logger = logging.getLogger("test")

    cached_teacher_scores(Context, Teacher(), "ce", first, second)
    assert sorted(path.name for path in tmp_path.glob("teacher-scores-*")) == [
        "teacher-scores-8a4f45b2d7e8af7f.npy",
        "teacher-scores-8a4f45b2d7e8af7f.npy.sha256",
    ]
