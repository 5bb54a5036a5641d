"""The shared model building blocks (harness.nn) on tiny random BERT- and RoBERTa-style transformers."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from harness.nn import (
    FIRST_SEGMENT,
    PADDING_SEGMENT,
    SECOND_SEGMENT,
    CosineRegression,
    InfoNCE,
    PairInputBuilder,
    ScoreRegression,
    SentenceEncoder,
    SupCon,
    TransformerDecoder,
    distinct_pairs,
    length_sorted_batches,
    load_tokenizer,
    load_transformer,
    mean_pool,
    pool,
    score_in_length_sorted_batches,
    sequence_limits,
)
from harness.nn.mlm import MaskedLanguageModeling, load_masked_lm, maskable_positions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- backbone: one sequence-limit function -----------------------------------------------------------------------------
def _config(model_type: str, positions: int, pad_token_id: int | None = 0):
    return SimpleNamespace(model_type=model_type, max_position_embeddings=positions, pad_token_id=pad_token_id)


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta", "camembert"])
def test_roberta_style_position_tables_lose_padding_idx_plus_one(tmp_path, model_type):
    tokenizer = SimpleNamespace(model_max_length=10**30)  # no tokenizer limit
    limits = sequence_limits(str(tmp_path), tokenizer, _config(model_type, 130, pad_token_id=1), None)
    assert limits.sentence == limits.pair == 128
    limits = sequence_limits(str(tmp_path), tokenizer, _config(model_type, 514, pad_token_id=1), 64)
    assert (limits.sentence, limits.pair) == (64, 128)


def test_sequence_limits_take_the_smallest_limit(tmp_path):
    tokenizer = SimpleNamespace(model_max_length=512)
    bert = _config("bert", 512)
    assert sequence_limits(str(tmp_path), tokenizer, bert, None) == sequence_limits(str(tmp_path), tokenizer, bert, 0)
    assert sequence_limits(str(tmp_path), tokenizer, bert, None).sentence == 512
    assert sequence_limits(str(tmp_path), tokenizer, bert, 128).pair == 256  # each sentence keeps its limit
    assert sequence_limits(str(tmp_path), tokenizer, bert, 300).pair == 512  # capped by the position table
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 100}))
    assert sequence_limits(str(tmp_path), tokenizer, bert, 128).sentence == 100
    assert sequence_limits(str(tmp_path), SimpleNamespace(model_max_length=50), bert, 128).sentence == 50


# -- pooling and encoding ----------------------------------------------------------------------------------------------
def test_mean_pooling_ignores_padding_and_cls_takes_the_first_token():
    hidden = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    torch.testing.assert_close(mean_pool(hidden, mask)[0], hidden[0, :2].mean(dim=0))
    torch.testing.assert_close(pool(hidden, mask, "mean")[1], hidden[1].mean(dim=0))
    torch.testing.assert_close(pool(hidden, mask, "cls"), hidden[:, 0])


def test_length_sorted_batches_are_longest_first_and_cover_every_index():
    batches = list(length_sorted_batches([3, 9, 1, 5, 7], batch_size=2))
    assert batches == [[1, 4], [3, 0], [2]]


def test_sentence_encoder_batches_equal_single_texts(tiny_roberta):
    encoder = SentenceEncoder.from_backbone(tiny_roberta, "mean", profile_limit=16)
    texts = ["a man is playing a guitar .", "the cat", "a man is playing a guitar .", "two dogs are running"]
    together = encoder.encode(texts, batch_size=2)
    alone = np.stack([encoder.encode([text])[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert encoder.max_length == 16


# -- pairs -------------------------------------------------------------------------------------------------------------
def test_pair_builder_follows_the_backbone(tiny_bert, tiny_roberta):
    for path, token_types in ((tiny_bert, True), (tiny_roberta, False)):
        tokenizer = load_tokenizer(path)
        config = load_transformer(path).config
        builder = PairInputBuilder.for_backbone(tokenizer, config, sequence_limits(path, tokenizer, config, 32))
        assert builder.use_token_types is token_types
        batch = builder.collate(builder.features(["a man plays", "the cat"], ["the cat sits", "a dog"]))
        assert ("token_type_ids" in batch) is token_types
        assert set(batch["segments"].unique().tolist()) == {PADDING_SEGMENT, FIRST_SEGMENT, SECOND_SEGMENT}


def test_maskable_positions_skip_segment_boundaries_and_padding():
    segments = torch.tensor(
        [[FIRST_SEGMENT, FIRST_SEGMENT, FIRST_SEGMENT, SECOND_SEGMENT, SECOND_SEGMENT, SECOND_SEGMENT, PADDING_SEGMENT]]
    )
    assert maskable_positions(segments).tolist() == [[False, True, False, False, True, False, False]]


def test_pair_scoring_runs_each_distinct_pair_once_in_input_order():
    pairs, rows = distinct_pairs(["a", "b", "a"], ["x", "y", "x"])
    assert pairs == [("a", "x"), ("b", "y")] and rows == [0, 1, 0]
    features = [{"input_ids": [1] * length} for length in (2, 5, 3)]
    seen = []

    def forward(batch):
        seen.append(batch["input_ids"].shape[1])
        return batch["input_ids"].sum(dim=1).float()

    def collate(rows):
        width = max(len(row["input_ids"]) for row in rows)
        return {"input_ids": torch.tensor([row["input_ids"] + [0] * (width - len(row["input_ids"])) for row in rows])}

    scores = score_in_length_sorted_batches(features, collate, forward, "cpu", 2, False, "test")
    assert scores.tolist() == [2.0, 5.0, 3.0] and seen == [5, 2]


def _sentence_transformers_loss(name: str):
    """A loss class of sentence-transformers (the reference implementation), wherever this version keeps it."""
    try:
        from sentence_transformers.sentence_transformer import losses  # sentence-transformers >= 5
    except ImportError:
        from sentence_transformers import losses
    return getattr(losses, name)


# -- losses ------------------------------------------------------------------------------------------------------------
class _Scorer(torch.nn.Module):
    """Score = sigmoid(w * x) with a logits method, like the Cross-Encoder network."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(2.0))

    def logits(self, features):
        return self.weight * features["x"]

    def forward(self, features):
        return torch.sigmoid(self.logits(features))


def test_score_regression_mse_and_bce():
    scorer = _Scorer()
    features, gold = {"x": torch.tensor([0.1, -0.4, 1.0])}, torch.tensor([0.2, 0.5, 0.9])
    expected_mse = ((torch.sigmoid(2 * features["x"]) - gold) ** 2).mean()
    torch.testing.assert_close(ScoreRegression(scorer, "mse")(features, gold), expected_mse)
    expected_bce = torch.nn.functional.binary_cross_entropy(torch.sigmoid(2 * features["x"]), gold)
    torch.testing.assert_close(ScoreRegression(scorer, "bce")(features, gold), expected_bce)
    with pytest.raises(TypeError, match="logits"):
        ScoreRegression(torch.nn.Identity(), "bce")


def test_cosine_regression_is_mse_on_cosine():
    encoder = torch.nn.Linear(3, 4)
    first, second = torch.randn(5, 3), torch.randn(5, 3)
    gold = torch.rand(5)
    expected = ((torch.cosine_similarity(encoder(first), encoder(second)) - gold) ** 2).mean()
    torch.testing.assert_close(CosineRegression(encoder)(first, second, gold), expected)


@pytest.mark.parametrize("hard_negatives", [0, 1])
def test_info_nce_equals_multiple_negatives_ranking_loss(hard_negatives):
    MultipleNegativesRankingLoss = _sentence_transformers_loss("MultipleNegativesRankingLoss")
    generator = torch.Generator().manual_seed(0)
    columns = [torch.randn(6, 8, generator=generator) for _ in range(2 + hard_negatives)]
    reference = MultipleNegativesRankingLoss(model=torch.nn.Identity(), scale=1 / 0.05)
    expected = reference.compute_loss_from_embeddings(columns, labels=None)
    torch.testing.assert_close(InfoNCE(temperature=0.05)(*columns), expected)


def test_supcon_equals_its_definition_and_ignores_anchors_without_positives():
    generator = torch.Generator().manual_seed(1)
    vectors = torch.randn(6, 5, generator=generator)
    labels = torch.tensor([0, 0, 1, 1, 1, 2])  # the last vector has no positive
    temperature = 0.1
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    terms = []
    for i in range(6):
        others = [a for a in range(6) if a != i]
        positives = [p for p in others if labels[p] == labels[i]]
        if not positives:
            continue
        denominator = torch.logsumexp(torch.stack([unit[i] @ unit[a] / temperature for a in others]), dim=0)
        terms.append(-torch.stack([unit[i] @ unit[p] / temperature - denominator for p in positives]).mean())
    torch.testing.assert_close(SupCon(temperature)(vectors, labels), torch.stack(terms).mean())
    assert SupCon()(vectors, torch.arange(6)).item() == 0.0


# -- MLM head ----------------------------------------------------------------------------------------------------------
def test_a_bare_backbone_gets_an_mlm_head_tied_to_its_word_embeddings(tiny_bert):
    model = load_masked_lm(tiny_bert)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


# -- decoder -----------------------------------------------------------------------------------------------------------
def _targets(tokenizer, texts):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"]


def test_decoder_shares_the_encoders_weights_and_ties_embeddings(tiny_bert):
    encoder = load_transformer(tiny_bert)
    decoder = TransformerDecoder.from_encoder(encoder, share="all")
    language_model = decoder.language_model
    word_embeddings = encoder.get_input_embeddings().weight
    assert language_model.get_input_embeddings().weight is word_embeddings
    assert language_model.get_output_embeddings().weight is word_embeddings
    encoder_parameters = {id(p) for p in encoder.parameters()}
    decoder_only = [name for name, p in language_model.base_model.named_parameters() if id(p) not in encoder_parameters]
    assert decoder_only and all("crossattention" in name for name in decoder_only)
    query = language_model.base_model.encoder.layer[0].attention.self.query.weight
    assert query is encoder.encoder.layer[0].attention.self.query.weight


@pytest.mark.parametrize("backbone", ["tiny_bert", "tiny_roberta"])
def test_mlm_loss_at_masked_positions_only_equals_the_models_own_loss(backbone, request):
    """Domain MLM computes logits only where a token is predicted; the loss is the model's ``labels=`` loss."""
    model = load_masked_lm(request.getfixturevalue(backbone)).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 300, (4, 20), generator=generator)
    labels = torch.where(torch.rand(ids.shape, generator=generator) < 0.3, ids, torch.full_like(ids, -100))
    labels[:, 1] = ids[:, 1]
    attention = torch.ones_like(ids)
    expected = model(input_ids=ids, attention_mask=attention, labels=labels).loss
    torch.testing.assert_close(MaskedLanguageModeling(model)(ids, attention, labels), expected)


def test_decoder_reads_only_the_unmasked_memory(tiny_bert):
    torch.manual_seed(0)
    encoder = load_transformer(tiny_bert)
    decoder = TransformerDecoder.from_encoder(encoder, share="all").eval()
    target_ids, target_mask = _targets(load_tokenizer(tiny_bert), ["a man plays a guitar", "the cat"])
    memory = torch.randn(2, 2, encoder.config.hidden_size)
    memory_mask = torch.tensor([[1, 0], [1, 0]])  # the second memory position is padding
    with torch.no_grad():
        output = decoder(memory, target_ids, memory_mask, target_mask)
        changed_padding = memory.clone()
        changed_padding[:, 1] += 5.0
        same = decoder(changed_padding, target_ids, memory_mask, target_mask)
        changed_memory = memory.clone()
        changed_memory[:, 0] += 5.0
        different = decoder(changed_memory, target_ids, memory_mask, target_mask)
    assert output.logits.shape == (2, target_ids.shape[1] - 1, encoder.config.vocab_size)
    torch.testing.assert_close(same.logits, output.logits)
    assert not torch.allclose(different.logits, output.logits, atol=1e-4)
    # The loss is the mean cross-entropy of the real next tokens (padding excluded).
    labels = target_ids[:, 1:][target_mask[:, 1:] == 1]
    logits = output.logits[target_mask[:, 1:] == 1]
    torch.testing.assert_close(output.loss, torch.nn.functional.cross_entropy(logits, labels))


def test_reconstruction_gradients_reach_the_encoder_through_the_memory(tiny_roberta):
    encoder = SentenceEncoder.from_backbone(tiny_roberta, "cls", profile_limit=16)
    decoder = TransformerDecoder.from_encoder(encoder.transformer, share="embeddings", num_layers=1)
    top_layer = encoder.transformer.encoder.layer[-1].output.dense.weight
    assert all(p is not top_layer for p in decoder.parameters())  # only the word embeddings are shared
    features = encoder.tokenize(["a man is playing a guitar .", "the cat sits on the mat ."])
    memory = encoder(features)
    output = decoder(memory, features["input_ids"], target_mask=features["attention_mask"])
    output.loss.backward()
    assert top_layer.grad is not None and top_layer.grad.abs().sum() > 0
    assert encoder.transformer.get_input_embeddings().weight.grad.abs().sum() > 0


def test_decoder_loss_equals_sentence_transformers_tsdae_loss(tiny_bert):
    from sentence_transformers import SentenceTransformer

    DenoisingAutoEncoderLoss = _sentence_transformers_loss("DenoisingAutoEncoderLoss")

    torch.manual_seed(0)
    model = SentenceTransformer(tiny_bert, device="cpu")
    reference = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    encoder = model.transformers_model
    ours = TransformerDecoder.from_encoder(encoder, share="all", backbone=tiny_bert)
    ours.language_model.load_state_dict(reference.decoder.state_dict())  # the same fresh cross-attention weights
    model.eval()
    reference.eval()
    ours.eval()
    damaged = model.tokenize(["man playing guitar", "cat mat"])
    original = model.tokenize(["a man is playing a guitar .", "the cat sits on the mat ."])
    with torch.no_grad():
        expected = reference([damaged, original], labels=None)
        memory = model(damaged)["sentence_embedding"]
        actual = ours(memory, original["input_ids"], target_mask=original["attention_mask"]).loss
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
