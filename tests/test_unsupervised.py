"""Unsupervised objectives: tsdae against sentence-transformers' DenoisingAutoEncoderLoss/Dataset, simcse
against MultipleNegativesRankingLoss, the NM stop-gradient, bad input, and --train-on self."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import UNLABELED_SENTENCES, IncompatibleError, InvalidOptionError, TrainingSplits, UnlabeledSentences
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.nn import SentenceEncoder
from harness.nn.noise import WordDeletion, check_deletion_ratio, delete_words, split_words
from harness.nn.objectives import CLEAN, DELETED, ObjectiveSetup, ObjectiveSum, UnlabeledCollator
from harness.plugin_api import ModelContext
from harness.profiles import get_profile
from harness.run.config import RunConfig
from harness.run.driver import Run

SENTENCES = [
    "a man is playing a guitar on the stage tonight .",
    "the cat sits on the mat and looks outside .",
    "two dogs are running through a green field .",
    "scientists discovered a new species of frog in the rainforest .",
    "the stock market fell sharply today after the announcement .",
    "a woman is slicing an onion in the kitchen .",
    "the weather will be sunny tomorrow in most regions .",
    "a child is riding a horse near the river bank .",
]
OPTIONS = {"temperature": 0.05, "directions": "one", "ratio": 0.6, "mlm_probability": 0.2, "aux_weight": 1.0}


@pytest.fixture(scope="module")
def quiet_bert(tmp_path_factory) -> str:
    """The tiny BERT without dropout, so two implementations can be compared step by step."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from harness.testing import tiny_bert

    folder = tiny_bert(tmp_path_factory.mktemp("quiet-bert"))
    config = BertConfig.from_pretrained(folder)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    model = BertModel.from_pretrained(folder, config=config)
    model.save_pretrained(folder, safe_serialization=True)
    BertTokenizerFast.from_pretrained(folder).save_pretrained(folder)
    return str(folder)


@pytest.fixture()
def st_word_tokenize(monkeypatch):
    """sentence-transformers' delete() calls nltk.word_tokenize, whose Punkt model needs a download; tokenise each
    text as one line instead (what harness.nn.noise does; identical for one-sentence texts)."""
    pytest.importorskip("nltk")
    import nltk

    original = nltk.word_tokenize
    monkeypatch.setattr(nltk, "word_tokenize", lambda text, *a, **k: original(text, preserve_line=True))


def st_model(path: str, pooling: str = "cls"):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(path, max_seq_length=64)
    pool = Pooling(transformer.get_embedding_dimension(), pooling)
    return sentence_transformers.SentenceTransformer(modules=[transformer, pool], device="cpu")


# -- deletion noise ----------------------------------------------------------------------------------------------
def test_deletion_draws_exactly_as_sentence_transformers(st_word_tokenize):
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset

    texts = [*SENTENCES, "one", "Hello, world! It's 3.5 o'clock.", ""]
    for seed in range(40):
        np.random.seed(seed)
        theirs = [DenoisingAutoEncoderDataset.delete(text, 0.6) for text in texts]
        ours_rng = np.random.RandomState(seed)
        ours = [delete_words(text, 0.6, ours_rng) for text in texts]
        assert ours == theirs


def test_deletion_distribution(st_word_tokenize):
    """Kept-word counts of our seeded generator follow sentence-transformers' distribution (Binomial(n, 0.4), at
    least one word kept)."""
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset

    text = SENTENCES[3]
    words = len(split_words(text))
    np.random.seed(0)
    theirs = [len(split_words(DenoisingAutoEncoderDataset.delete(text, 0.6))) for _ in range(3000)]
    noise = WordDeletion(0.6, seed=1)
    ours = [len(split_words(noise(text))) for _ in range(3000)]
    assert min(ours) >= 1 and max(ours) <= words
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.15 and abs(np.mean(ours) - 0.4 * words) < 0.15
    histogram = lambda counts: np.bincount(counts, minlength=words + 1) / len(counts)  # noqa: E731
    assert np.abs(histogram(ours) - histogram(theirs)).max() < 0.03


@pytest.mark.parametrize("ratio", [0, 1, 1.5, -0.1, True])
def test_deletion_ratio_outside_the_open_interval_is_refused(ratio):
    with pytest.raises(InvalidOptionError, match=r"open interval \(0, 1\)"):
        check_deletion_ratio(ratio)


def test_empty_and_one_word_sentences():
    rng = np.random.default_rng(0)
    assert delete_words("", 0.6, rng) == ""
    assert delete_words("   ", 0.6, rng) == "   "
    assert all(delete_words("word", 0.99, rng) == "word" for _ in range(20))  # never empties a sentence


# -- tsdae vs sentence-transformers --------------------------------------------------------------------------------
def build_tsdae_pair(path: str):
    """(our ObjectiveSum with the tsdae term, sentence-transformers' loss), with the same fresh decoder weights."""
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    from harness.plugins.tsdae import DenoisingReconstruction

    torch.manual_seed(0)
    reference = DenoisingAutoEncoderLoss(st_model(path), tie_encoder_decoder=True)
    encoder = SentenceEncoder.from_backbone(path, "cls", 64)
    term = DenoisingReconstruction(ObjectiveSetup(encoder, path, OPTIONS, 0))
    ours = dict(term.decoder.language_model.named_parameters())
    with torch.no_grad():  # the fresh weights (cross-attention, LM head transform) of their decoder
        for name, parameter in reference.decoder.named_parameters():
            ours[name].copy_(parameter)
    return ObjectiveSum(encoder, [("tsdae", term, 1.0)]), reference


def fixed_noise_batches(steps: int, batch_size: int = 4) -> list[tuple[list[str], list[str]]]:
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset

    np.random.seed(7)
    batches = []
    for step in range(steps):
        originals = [SENTENCES[(step * batch_size + i) % len(SENTENCES)] for i in range(batch_size)]
        batches.append((originals, [DenoisingAutoEncoderDataset.delete(s, 0.6) for s in originals]))
    return batches


def losses(ours, reference, batches, learning_rate: float = 1e-3) -> tuple[list[float], list[float]]:
    from harness.training import make_adamw

    curves: tuple[list[float], list[float]] = ([], [])
    for index, module in enumerate((ours, reference)):
        module.train()
        optimizer = make_adamw([{"params": list(module.parameters()), "weight_decay": 0.0}], learning_rate)
        for originals, deleted in batches:
            if index == 0:
                noise = dict(zip(originals, deleted))
                collate = UnlabeledCollator(ours.encoder.tokenizer, 64, [CLEAN, DELETED], noise.__getitem__)
                loss = module(**collate(originals))
            else:
                tokenize = reference.encoder.tokenize
                loss = module([dict(tokenize(deleted)), dict(tokenize(originals))], None)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            optimizer.step()
            curves[index].append(float(loss.detach()))
    return curves


def test_tsdae_matches_sentence_transformers(quiet_bert, st_word_tokenize):
    ours, reference = build_tsdae_pair(quiet_bert)
    ours_curve, reference_curve = losses(ours, reference, fixed_noise_batches(12))
    assert abs(ours_curve[0] - reference_curve[0]) < 1e-4  # step 0, same noise
    np.testing.assert_allclose(ours_curve, reference_curve, rtol=1e-3, atol=1e-3)  # the curves agree
    assert ours_curve[-1] < ours_curve[0]  # and it learns


def test_tsdae_decoder_shares_the_encoder_weights(quiet_bert):
    from harness.plugins.tsdae import DenoisingReconstruction

    encoder = SentenceEncoder.from_backbone(quiet_bert, "cls", 64)
    term = DenoisingReconstruction(ObjectiveSetup(encoder, quiet_bert, OPTIONS, 0))
    decoder = term.decoder.language_model
    assert decoder.get_output_embeddings().weight is encoder.transformer.get_input_embeddings().weight
    assert (
        decoder.base_model.encoder.layer[0].attention.self.query.weight
        is encoder.transformer.encoder.layer[0].attention.self.query.weight
    )


# -- simcse vs MultipleNegativesRankingLoss ------------------------------------------------------------------------
@pytest.mark.parametrize("directions", ["one", "both"])
def test_simcse_loss_is_mnrl_on_duplicated_sentences(quiet_bert, directions):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from harness.plugins.simcse import DropoutContrast

    temperature = 0.05
    reference_model = st_model(quiet_bert)
    st_directions = ("query_to_doc",) if directions == "one" else ("query_to_doc", "doc_to_query")
    mnrl = MultipleNegativesRankingLoss(
        reference_model, scale=1 / temperature, directions=st_directions, partition_mode="per_direction"
    )
    encoder = SentenceEncoder.from_backbone(quiet_bert, "cls", 64)
    term = DropoutContrast(ObjectiveSetup(encoder, quiet_bert, {**OPTIONS, "directions": directions}, 0))
    ours = ObjectiveSum(encoder, [("simcse", term, 1.0)])
    collate = UnlabeledCollator(encoder.tokenizer, 64, [CLEAN])
    features = dict(reference_model.tokenize(SENTENCES))
    theirs = float(mnrl([features, dict(features)], None).detach())
    # the thesis code sums both directions; MNRL's per_direction mode averages them
    expected = theirs if directions == "one" else 2 * theirs
    assert float(ours(**collate(SENTENCES)).detach()) == pytest.approx(expected, abs=1e-5)


def test_simcse_views_differ_only_by_dropout(tiny_bert):
    from harness.plugins.simcse import DropoutContrast

    encoder = SentenceEncoder.from_backbone(tiny_bert, "cls", 64)
    term = DropoutContrast(ObjectiveSetup(encoder, tiny_bert, OPTIONS, 0))
    collate = UnlabeledCollator(encoder.tokenizer, 64, [CLEAN])
    module = ObjectiveSum(encoder, [("simcse", term, 1.0)])
    module.eval()
    without_dropout = float(module(**collate(SENTENCES)).detach())
    module.train()
    with_dropout = float(module(**collate(SENTENCES)).detach())
    assert with_dropout > without_dropout  # in eval mode both views are equal and the positives are easiest


# -- Noise Matching stop-gradient ----------------------------------------------------------------------------------
def test_nm_stop_gradient_blocks_the_clean_view(tiny_bert):
    from harness.nn.objectives import TrainingStep, in_batch_contrastive
    from harness.plugins.nm import NoiseMatching

    encoder = SentenceEncoder.from_backbone(tiny_bert, "cls", 64)
    term = NoiseMatching(ObjectiveSetup(encoder, tiny_bert, OPTIONS, 0))
    batch = UnlabeledCollator(encoder.tokenizer, 64, [CLEAN, DELETED], WordDeletion(0.6, 0))(SENTENCES)
    encoder.train()
    original, noised = term.views(TrainingStep(encoder, batch))
    assert not original.requires_grad and original.grad_fn is None  # h_i = sg(f(x_i)), dropout still applied
    assert noised.requires_grad
    # With the noised view detached too, the loss has no path to the encoder: all gradient comes through T(x).
    assert not in_batch_contrastive(original, noised.detach(), 0.05, "both").requires_grad

    # The encoder's gradient is exactly that of the same loss with the clean side a constant (dropout off, so the
    # two computations see the same vectors).
    encoder.eval()
    term(TrainingStep(encoder, batch)).backward()
    ours = {name: p.grad.clone() for name, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad()
    constant = encoder(batch[CLEAN]).detach()
    in_batch_contrastive(constant, encoder(batch[DELETED]), term.temperature, term.directions).backward()
    reference = {name: p.grad for name, p in encoder.named_parameters() if p.grad is not None}
    assert ours.keys() == reference.keys() and any(g.abs().sum() > 0 for g in ours.values())
    for name in reference:  # equal up to float summation order (the embedding backward accumulates in parallel)
        assert (ours[name] - reference[name]).norm() <= 1e-4 * reference[name].norm() + 1e-7, name


# -- training through the embedder: bad input, report, checkpoint ------------------------------------------------
def context(backbone: str, registry, options: dict, tmp_path: Path) -> ModelContext:
    plugin = registry.model("tsdae")
    resolved = {key: option.default for key, option in plugin.options.items()} | options
    return ModelContext(
        options=resolved,
        backbone=backbone,
        profile=get_profile("smoke"),
        device="cpu",
        seed=3,
        progress=False,
        component=registry.component,
        artifact_dir=tmp_path,
        cache_dir=tmp_path,
        train_on="test",
    )


def test_empty_sentences_are_dropped_and_training_reports(tiny_bert, registry, tmp_path):
    ctx = context(tiny_bert, registry, {"aux": "nm"}, tmp_path)
    model = registry.model("tsdae").factory(ctx)
    sentences = ["", "   ", "word", ".", *SENTENCES]
    report = model.fit(TrainingSplits("test", UnlabeledSentences(sentences)), ctx)
    assert report["empty_sentences_dropped"] == 2 and report["sentences"] == len(sentences) - 2
    assert report["objectives"] == ["tsdae", "nm"] and report["setup"] == "thesis-5.4.2"  # a combination
    assert report["steps"] > 0 and report["examples_per_second"] > 0 and report["wall_seconds"] > 0
    assert set(report["loss_curve"]) == {"tsdae", "nm", "total"}
    model.save(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / "pooling.json").is_file()
    reloaded = registry.model("tsdae").factory(ctx)
    reloaded.load(tmp_path)
    np.testing.assert_allclose(reloaded.encode(SENTENCES[:2]), model.encode(SENTENCES[:2]), atol=1e-5)
    with pytest.raises(Exception, match="no non-empty training sentence"):
        model.fit(TrainingSplits("test", UnlabeledSentences(["", " "])), ctx)


def test_tsdae_alone_uses_the_replication_setup(tiny_bert, registry, tmp_path):
    ctx = context(tiny_bert, registry, {}, tmp_path)
    report = registry.model("tsdae").factory(ctx).fit(TrainingSplits("test", UnlabeledSentences(SENTENCES)), ctx)
    assert report["setup"] == "thesis-5.4.1" and report["schedule"] == "constant"


def test_mlm_shares_the_encoder(tiny_bert, registry, tmp_path):
    from harness.plugins.mlm import MaskedLanguageModelling

    encoder = SentenceEncoder.from_backbone(tiny_bert, "cls", 64)
    term = MaskedLanguageModelling(ObjectiveSetup(encoder, tiny_bert, OPTIONS, 0))
    shared = encoder.transformer.encoder.layer[1].output.dense.weight
    assert term.model.base_model.encoder.layer[1].output.dense.weight is shared
    ids = torch.tensor([[101, 2000, 2001, 102, 0]])
    masked, labels = term.mask(ids, torch.tensor([[1, 1, 1, 1, 0]]))
    assert (labels != -100).sum() >= 1 and masked[0, 0] == 101 and masked[0, 3] == 102 and labels[0, 4] == -100


# -- plan-time errors and --train-on self --------------------------------------------------------------------------
def plan(registry, models, tasks, train_on, tmp_path, backbone=None):
    config = RunConfig(
        models=[ModelEntry(m) for m in models],
        tasks=tasks,
        train_on=train_on,
        profile="smoke",
        results_dir=tmp_path / "results",
        progress=False,
        backbone=backbone,
    )
    return Run(registry, config, log=lambda _: None).plan()


def test_bad_specs_fail_at_plan_time(registry, tmp_path):
    with pytest.raises(InvalidOptionError, match=r"\(0, 1\)"):
        plan(registry, ["tsdae:ratio=1.0"], ["stsb"], "stsb", tmp_path)
    with pytest.raises(InvalidOptionError, match="no effect"):
        plan(registry, ["simcse:ratio=0.3"], ["stsb"], "stsb", tmp_path)
    with pytest.raises(InvalidOptionError, match="known objectives"):
        plan(registry, ["mlm:aux=simcsee"], ["stsb"], "stsb", tmp_path)
    with pytest.raises(IncompatibleError, match="stsb"):  # names the tasks that offer unlabeled sentences
        plan(registry, ["simcse"], ["stsb"], None, tmp_path)
    with pytest.raises(IncompatibleError, match="bws-cross-topic.*stsb|Training sources that would work"):
        plan(registry, ["simcse"], ["stsb"], "sts12", tmp_path)
    with pytest.raises(IncompatibleError, match="offers no unlabeled_sentences; tasks that do"):
        plan(registry, ["simcse"], ["sts12"], "self", tmp_path)


def test_tasks_offer_only_train_text(registry):
    from harness.plugin_api import EvalContext

    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=0, batch_size=8)
    for name in ("stsb", "sickr", "bws-cross-topic"):
        assert UNLABELED_SENTENCES in registry.task(name).metadata.training_kinds
        task = registry.task(name).factory({}, None)
        train = task.training_data(UNLABELED_SENTENCES, ctx).train.sentences
        assert train and all(s.strip() == s and s for s in train) and len(set(train)) == len(train)
    bws = registry.task("bws-cross-topic").factory({}, None)
    test = bws.split_pairs()["test"]
    assert not set(bws.training_data(UNLABELED_SENTENCES, ctx).train.sentences) & {*test.first, *test.second}


def test_train_on_self_trains_one_model_per_task(registry, tmp_path, tiny_bert):
    config = RunConfig(
        models=[ModelEntry("simcse")],
        tasks=["stsb", "sickr"],
        train_on="self",
        profile="smoke",
        results_dir=tmp_path / "results",
        progress=False,
        backbone=tiny_bert,
    )
    runner = Run(registry, config, log=lambda _: None)
    outcomes = runner.run(LocalExecutor())
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert len({o.spec.key for o in outcomes}) == 1  # one leaderboard row
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "results").glob("simcse-*/seed-42/*.json"))]
    assert {r["model"]["train_on"] for r in records} == {"self"}
    assert records[0]["training_data_checksum"] != records[1]["training_data_checksum"]
    checkpoints = list((tmp_path / "results" / "checkpoints").glob("simcse-*"))
    assert len(checkpoints) == 2  # one model per task
    again = Run(registry, config, log=lambda _: None).run(LocalExecutor())
    assert [o.status for o in again] == ["cached", "cached"]


# -- SimCSE's MLP head and checkpoint selection on dev pairs, the transductive STS source ----------------
def test_simcse_mlp_head_and_step_selection(tiny_bert, registry, tmp_path):
    from harness.data import ScoredPairs

    plugin = registry.model("simcse")
    options = {key: option.default for key, option in plugin.options.items()}
    assert options["select_every"] == 0 and not options["mlp_head"]  # the thesis code's setting by default
    options |= {"mlp_head": True, "select_every": 2}
    dev = ScoredPairs(SENTENCES[:4], SENTENCES[4:8], np.array([0.1, 0.9, 0.4, 0.6]))
    asked = []

    def training_data(source, kind):
        asked.append((source, kind))
        return TrainingSplits(source, dev, dev=dev)

    ctx = ModelContext(
        options=options,
        backbone=tiny_bert,
        profile=get_profile("smoke"),
        device="cpu",
        seed=3,
        progress=False,
        component=registry.component,
        artifact_dir=tmp_path,
        cache_dir=tmp_path,
        train_on="test",
        training_data=training_data,
    )
    model = plugin.factory(ctx)
    report = model.fit(TrainingSplits("test", UnlabeledSentences(SENTENCES)), ctx)
    assert asked == [("stsb", "scored_pairs")]
    selection = report["selection"]
    steps = report["steps"]
    assert selection["every_steps"] == 2 and selection["on"] == "stsb" and 1 <= selection["best_step"] <= steps
    assert len(report["dev_history"]) == steps // 2 + (steps % 2 > 0)
    assert selection["best_dev_spearman"] == max(report["dev_history"])
    # The MLP is training-only: the saved checkpoint is the encoder alone.
    model.save(tmp_path / "ckpt")
    assert not any("head" in name for name in model.encoder.state_dict())


def test_step_selection_keeps_the_best_step():
    from harness.training import TrainConfig, fit

    module = torch.nn.Linear(1, 1, bias=False)
    scores = iter([0.1, 0.7, 0.3])
    weights = []

    def dev_score():
        weights.append(float(module.weight.detach()))
        return next(scores)

    config = TrainConfig(epochs=1, batch_size=1, learning_rate=0.1, max_steps=6, progress=False, warmup_ratio=0.0)
    report = fit(
        LossOf(module), [1.0] * 6, lambda rows: {"x": torch.tensor([[rows[0]]])}, config, dev_score, dev_every_steps=2
    )
    assert report.steps == 6 and report.dev_history == [0.1, 0.7, 0.3] and report.best_step == 4
    assert float(module.weight.detach()) == pytest.approx(weights[1])  # the weights scored 0.7, not the last ones


class LossOf(torch.nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        return (self.linear(x) - 5.0).pow(2).mean()


def test_selection_options_are_checked_at_plan_time(registry, tmp_path):
    with pytest.raises(InvalidOptionError, match="select_on"):
        plan(registry, ["tsdae:select_every=5"], ["stsb"], "stsb", tmp_path)  # no select_on for tsdae
    with pytest.raises(InvalidOptionError, match="no effect"):
        plan(registry, ["tsdae:mlp_head=true"], ["stsb"], "stsb", tmp_path)
    plan(
        registry,
        ["simcse:select_every=250,mlp_head=true", "paser:select_every=125,select_on=stsb,synonyms=0"],
        ["stsb"],
        "stsb",
        tmp_path,
    )


def test_simcse_mlp_head_only_over_cls(registry, tmp_path):
    """SimCSE's MLP sits on [CLS]; under MEAN pooling it is refused in one line (also as an auxiliary)."""
    for spec in ("simcse:mlp_head=true,pooling=mean", "mlm:aux=simcse,mlp_head=true,pooling=mean"):
        with pytest.raises(InvalidOptionError, match="needs pooling=cls"):
            plan(registry, [spec], ["stsb"], "stsb", tmp_path)
    plan(registry, ["simcse:mlp_head=true", "simcse:pooling=mean"], ["stsb"], "stsb", tmp_path)


def test_seven_sts_transductive_source_is_labeled_and_holds_test_text(registry):
    from harness.plugin_api import EvalContext

    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=0, batch_size=8)
    task = registry.task("stsb").factory({"unlabeled": "seven-sts-transductive"}, None)
    splits = task.training_data(UNLABELED_SENTENCES, ctx)
    assert splits.source == "stsb:unlabeled=seven-sts-transductive"
    sentences = set(splits.train.sentences)
    test_pairs, _ = task.load()
    assert set(test_pairs[0].first) <= sentences  # transductive: the evaluated sentences, never their scores
    default = registry.task("stsb").factory({}, None).training_data(UNLABELED_SENTENCES, ctx).train.sentences
    assert set(default) < sentences and not set(test_pairs[0].first) <= set(default)
