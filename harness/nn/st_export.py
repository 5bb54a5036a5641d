"""Writing a transformer as a sentence-transformers folder: the building blocks of ``harness export``.

A model that can leave the harness (``export_sentence_transformers(directory)`` / ``export_cross_encoder(directory)``,
see :mod:`harness.export`) calls :func:`write_sentence_transformer` or :func:`write_cross_encoder` with its
transformer, tokenizer and pooling or head. They put them under sentence-transformers' own modules
(``Transformer``, ``Pooling``, ``Dense``, ``Normalize``) and let sentence-transformers write the folder
(``SentenceTransformer.save`` / ``CrossEncoder.save``; reference: the installed sentence-transformers, https://sbert.net),
so the layout is exactly the one the installed sentence-transformers reads, and its ``encode`` / ``predict`` compute
what the harness model computes (tests/test_export.py: within 1e-5).

Deviations: the cross-encoder folder uses sentence-transformers' modular CrossEncoder (``Transformer`` ->
``Pooling(cls)`` -> ``Dense(d, 1)``), which sentence-transformers 6 reads; Hugging Face's
``*ForSequenceClassification`` head cannot hold a head on the raw CLS state (BERT's adds its pooler's tanh layer).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

POOLING_MODES = ("mean", "cls", "max", "lasttoken")


class ExportError(HarnessError):
    """A model that cannot be exported as asked (no checkpoint, no exporter, an occupied target folder)."""


def _sentence_transformers() -> Any:
    try:
        import sentence_transformers
    except ImportError:
        raise ExportError(
            "exporting needs the sentence-transformers package; install it with "
            "`pip install 'sentence-harness[interop]'`."
        ) from None
    return sentence_transformers


def _modules() -> tuple[Any, Any, Any, Any]:
    """sentence-transformers' Transformer, Pooling, Dense and Normalize module classes (version 6 layout)."""
    _sentence_transformers()
    try:
        from sentence_transformers.base.modules import Dense, Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        raise ExportError(
            "exporting needs sentence-transformers 6 or newer; upgrade with "
            "`pip install -U 'sentence-transformers>=6'`."
        ) from None
    return Transformer, Pooling, Dense, Normalize


def _transformer_module(staging: Path, transformer: Any, tokenizer: Any, max_seq_length: int) -> Any:
    """sentence-transformers' Transformer module around ``transformer`` (saved to ``staging`` and read back, so the
    module holds exactly these weights and this tokenizer)."""
    Transformer, _, _, _ = _modules()
    transformer.save_pretrained(str(staging), safe_serialization=True)
    tokenizer.save_pretrained(str(staging))
    return Transformer(str(staging), max_seq_length=max_seq_length)


def write_sentence_transformer(
    directory: Path,
    transformer: Any,
    tokenizer: Any,
    pooling: str,
    max_seq_length: int,
    *,
    dense: Any = None,
    normalize: bool = False,
    similarity: str = "cosine",
) -> None:
    """Write ``transformer -> Pooling(pooling) [-> Dense] [-> Normalize]`` as a sentence-transformers folder.

    ``pooling`` is one of :data:`POOLING_MODES`; ``dense`` an optional ``torch.nn.Linear`` whose weights become a
    ``Dense`` module without activation; texts are cut to ``max_seq_length`` tokens, as the harness model cuts them.
    """
    if pooling not in POOLING_MODES:
        raise ExportError(f"pooling {pooling!r} has no sentence-transformers Pooling mode ({', '.join(POOLING_MODES)})")
    import torch

    sentence_transformers = _sentence_transformers()
    _, Pooling, Dense, Normalize = _modules()
    with tempfile.TemporaryDirectory(prefix="harness-export-") as staging:
        word = _transformer_module(Path(staging), transformer, tokenizer, max_seq_length)
        modules = [word, Pooling(word.get_embedding_dimension(), pooling_mode=pooling)]
        if dense is not None:
            modules.append(
                Dense(
                    dense.in_features,
                    dense.out_features,
                    bias=dense.bias is not None,
                    activation_function=torch.nn.Identity(),
                    init_weight=dense.weight.detach().clone(),
                    init_bias=None if dense.bias is None else dense.bias.detach().clone(),
                )
            )
        if normalize:
            modules.append(Normalize())
        model = sentence_transformers.SentenceTransformer(modules=modules, device="cpu", similarity_fn_name=similarity)
        model.save(str(directory))


ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "none": "Identity"}


def write_cross_encoder(
    directory: Path, transformer: Any, tokenizer: Any, head: Any, activation: str, max_length: int
) -> None:
    """Write ``transformer -> CLS state -> head (Linear(d, 1)) -> activation`` as a sentence-transformers
    CrossEncoder folder; pairs are tokenised as the tokenizer's own pair encoding, cut longest-first to
    ``max_length`` tokens (what the harness cross-encoder does)."""
    if activation not in ACTIVATIONS:
        raise ExportError(f"activation {activation!r} has no export ({', '.join(ACTIVATIONS)})")
    import torch

    sentence_transformers = _sentence_transformers()
    _, Pooling, Dense, _ = _modules()
    with tempfile.TemporaryDirectory(prefix="harness-export-") as staging:
        word = _transformer_module(Path(staging), transformer, tokenizer, max_length)
        score = Dense(
            head.in_features,
            1,
            activation_function=torch.nn.Identity(),
            init_weight=head.weight.detach().clone(),
            init_bias=head.bias.detach().clone(),
            module_output_name="scores",
        )
        model = sentence_transformers.CrossEncoder(
            modules=[word, Pooling(word.get_embedding_dimension(), pooling_mode="cls"), score],
            device="cpu",
            activation_fn=getattr(torch.nn, ACTIVATIONS[activation])(),
        )
        model.save(str(directory))
