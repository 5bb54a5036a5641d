"""What each evaluation capability must do (``encode``, ``score``, ``encode_multi``, ``encode_spans``), probed on a
built model: the shapes, dtypes, finiteness and determinism :func:`~harness.testing.check_model` checks, and the
outputs its save/load round trip compares; part of the test kit :mod:`harness.testing`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..api import EMBEDDER, MULTI_VECTOR_EMBEDDER, PAIR_SCORER, SPAN_ENCODER
from .contract import _describe_exception


def _float_matrix(value: Any, rows: int, what: str, problems: list[str]) -> np.ndarray | None:
    """``value`` if it is a float32 [rows, d] array with finite values; else a problem is recorded."""
    if not isinstance(value, np.ndarray):
        problems.append(
            f"{what} returned {type(value).__name__}; expected a numpy float32 array [n, d] "
            "(convert tensors with .cpu().numpy())."
        )
        return None
    if value.ndim != 2 or value.shape[0] != rows or value.shape[1] < 1:
        problems.append(f"{what} returned shape {list(value.shape)} for {rows} inputs; expected [{rows}, d], d >= 1.")
        return None
    if value.dtype != np.float32:
        problems.append(f"{what} returned dtype {value.dtype}; expected float32.")
    if not np.isfinite(value).all():
        problems.append(f"{what} returned non-finite values (NaN or inf).")
        return None
    return value


def _rows_match(first: np.ndarray, second: np.ndarray) -> bool:
    return np.allclose(first, second, rtol=1e-3, atol=1e-5)


def _check_embedder(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    with_duplicate = [*texts, texts[0]]
    try:
        embeddings = _float_matrix(model.encode(with_duplicate), len(with_duplicate), "encode", problems)
    except Exception as exc:
        problems.append(
            f"encode raised {_describe_exception(exc)} on {len(with_duplicate)} texts (one longer than "
            "the smoke profile's max_seq_length: truncate to ctx.profile.max_seq_length)."
        )
        return None
    if embeddings is None:
        return None
    if not _rows_match(embeddings[0], embeddings[-1]):
        problems.append(
            "encode gave the same text two different rows in one call; put the model in eval mode "
            "(no dropout) and make encoding deterministic."
        )
    try:
        alone = model.encode([texts[1]])
    except Exception as exc:
        problems.append(f"encode raised {_describe_exception(exc)} on a single text.")
        return embeddings
    alone = _float_matrix(alone, 1, "encode (one text)", problems)
    if alone is not None:
        if alone.shape[1] != embeddings.shape[1]:
            problems.append(
                f"encode returned {alone.shape[1]} dimensions for one text and {embeddings.shape[1]} for "
                "several; the dimension must not depend on the batch."
            )
        elif not _rows_match(alone[0], embeddings[1]):
            problems.append(
                "encode gave a text a different row alone than inside a batch; the row of a text must "
                "not depend on the other texts of the call."
            )
    return embeddings


def _check_pair_scorer(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    first = texts
    second = [*texts[1:], texts[0]]
    try:
        raw = model.score(first, second)
    except Exception as exc:
        problems.append(
            f"score raised {_describe_exception(exc)} on {len(first)} pairs (one text longer than the "
            "smoke profile's max_seq_length: truncate to ctx.profile.max_seq_length)."
        )
        return None
    try:
        scores = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        problems.append(f"score returned {type(raw).__name__}, which is not an array of floats; expected float [n].")
        return None
    if scores.shape != (len(first),):
        problems.append(f"score returned shape {list(scores.shape)} for {len(first)} pairs; expected [{len(first)}].")
        return None
    if not np.isfinite(scores).all():
        problems.append("score returned non-finite values (NaN or inf).")
        return None
    again = np.asarray(model.score(first[:2], second[:2]), dtype=np.float64)
    if again.shape != (2,) or not _rows_match(again, scores[:2]):
        problems.append(
            "score gave the same pairs different scores in another call; put the model in eval mode "
            "and make scoring deterministic."
        )
    return scores


def _check_multi_vector(model: Any, texts: list[str], problems: list[str]) -> list[np.ndarray] | None:
    try:
        vectors = model.encode_multi(texts)
    except Exception as exc:
        problems.append(f"encode_multi raised {_describe_exception(exc)} on {len(texts)} texts.")
        return None
    if not isinstance(vectors, (list, tuple)) or len(vectors) != len(texts):
        problems.append(f"encode_multi returned {type(vectors).__name__}; expected a list of {len(texts)} arrays.")
        return None
    dimensions = set()
    for index, matrix in enumerate(vectors):
        checked = _float_matrix(
            matrix, getattr(matrix, "shape", (0,))[0] or 1, f"encode_multi (text {index})", problems
        )
        if checked is None:
            return None
        dimensions.add(checked.shape[1])
    if len(dimensions) > 1:
        problems.append(f"encode_multi returned vectors of several sizes {sorted(dimensions)}; use one size.")
    return list(vectors)


def _check_span_encoder(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    items = [(text, [(0, len(text))]) for text in texts]
    items.append((texts[0], [(0, max(1, len(texts[0]) // 2)), (len(texts[0]) // 2, len(texts[0]))]))
    try:
        return _float_matrix(model.encode_spans(items), len(items), "encode_spans", problems)
    except Exception as exc:
        problems.append(f"encode_spans raised {_describe_exception(exc)} on {len(items)} items.")
        return None


_BEHAVIOUR_CHECKS = {
    EMBEDDER: _check_embedder,
    PAIR_SCORER: _check_pair_scorer,
    MULTI_VECTOR_EMBEDDER: _check_multi_vector,
    SPAN_ENCODER: _check_span_encoder,
}


def _outputs(model: Any, capabilities: Iterable[str], texts: list[str]) -> dict[str, Any]:
    """What the model computes for ``texts`` through each declared evaluation capability (for round trips)."""
    outputs: dict[str, Any] = {}
    for capability in capabilities:
        if capability == EMBEDDER:
            outputs[capability] = np.asarray(model.encode(texts))
        elif capability == PAIR_SCORER:
            outputs[capability] = np.asarray(model.score(texts, [*texts[1:], texts[0]]))
        elif capability == MULTI_VECTOR_EMBEDDER:
            outputs[capability] = [np.asarray(m) for m in model.encode_multi(texts)]
        elif capability == SPAN_ENCODER:
            outputs[capability] = np.asarray(model.encode_spans([(t, [(0, len(t))]) for t in texts]))
    return outputs


def _same_outputs(first: Any, second: Any) -> bool:
    if isinstance(first, list):
        return len(first) == len(second) and all(_same_outputs(a, b) for a, b in zip(first, second))
    return first.shape == second.shape and _rows_match(first, second)
