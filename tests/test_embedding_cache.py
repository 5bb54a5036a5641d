"""The embedding cache (harness.embedding_cache): keyed by the model's content, verified, bounded, only inside an
evaluation scope, and invisible in the scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from harness.embedding_cache import EmbeddingCache, cached_encode, evaluation_scope
from harness.nn.encoder import SentenceEncoder

TEXTS = ["a man is playing a guitar.", "a woman slices an onion.", "a man is playing a guitar.", "the sky is blue."]


@pytest.fixture()
def encoder(tiny_bert) -> SentenceEncoder:
    return SentenceEncoder.from_backbone(tiny_bert).eval()


def _shards(root):
    return sorted(root.rglob("*.safetensors"))


def test_second_encode_is_served_from_the_cache_bit_for_bit(encoder, tmp_path):
    expected = encoder.encode(TEXTS)  # no scope: no cache
    assert not tmp_path.exists() or not _shards(tmp_path)
    cache = EmbeddingCache(tmp_path)
    with evaluation_scope(cache) as cold:
        first = encoder.encode(TEXTS)
    with evaluation_scope(EmbeddingCache(tmp_path)) as warm:  # a new process's cache object reads the shards
        second = encoder.encode(TEXTS)
    assert (cold.hits, cold.misses, warm.hits, warm.misses) == (0, 3, 3, 0)
    assert cold.as_record() == {"enabled": True, "hits": 0, "misses": 3}
    assert first.tobytes() == expected.tobytes() and second.tobytes() == expected.tobytes()
    with evaluation_scope(EmbeddingCache(tmp_path)) as partly:
        mixed = encoder.encode(["the sky is blue.", "a new sentence."])
    assert partly.as_record() == {"enabled": True, "hits": 1, "misses": 1}
    np.testing.assert_allclose(mixed, encoder.encode(["the sky is blue.", "a new sentence."]), atol=1e-6)
    assert len(_shards(tmp_path)) == 2  # one write-once shard per encode call that computed something


def test_two_models_never_share_a_vector(tiny_bert, tmp_path):
    """Same text, same architecture, one weight changed: the second model computes its own vector."""
    first = SentenceEncoder.from_backbone(tiny_bert).eval()
    second = SentenceEncoder.from_backbone(tiny_bert).eval()
    with torch.no_grad():
        next(second.transformer.parameters()).add_(0.5)
    cache = EmbeddingCache(tmp_path)
    with evaluation_scope(cache) as counts:
        a = first.encode(TEXTS[:1])
        b = second.encode(TEXTS[:1])
        cls = SentenceEncoder.from_backbone(tiny_bert, "cls").eval().encode(TEXTS[:1])  # another pooling
    assert counts.as_record() == {"enabled": True, "hits": 0, "misses": 3}
    assert not np.allclose(a, b) and not np.allclose(a, cls)
    assert len({path.parent.name for path in _shards(tmp_path)}) == 3
    # weights changed in place after a first encode (training between evaluations): keyed by the new content,
    # which is now the second model's (the same change), so its vector is served; one more change is a new model
    with evaluation_scope(cache) as counts, torch.no_grad():
        next(first.transformer.parameters()).add_(0.5)
        assert first.encode(TEXTS[:1]).tobytes() == b.tobytes()
        next(first.transformer.parameters()).add_(0.5)
        first.encode(TEXTS[:1])
    assert counts.as_record() == {"enabled": True, "hits": 1, "misses": 1}


def test_a_corrupted_or_swapped_shard_is_detected_and_recomputed(encoder, tmp_path, caplog):
    with evaluation_scope(EmbeddingCache(tmp_path)):
        expected = encoder.encode(TEXTS)
    (shard,) = _shards(tmp_path)
    content = bytearray(shard.read_bytes())
    content[-3] ^= 0xFF  # a flipped bit in the last vector
    shard.write_bytes(bytes(content))
    with evaluation_scope(EmbeddingCache(tmp_path)) as counts:
        again = encoder.encode(TEXTS)
    assert counts.as_record() == {"enabled": True, "hits": 0, "misses": 3}
    assert again.tobytes() == expected.tobytes()
    assert "checksum does not match" in caplog.text
    # a whole shard of another namespace copied in is refused too
    (good,) = _shards(tmp_path)
    other = tmp_path / ("0" * 32)
    other.mkdir()
    (other / good.name).write_bytes(good.read_bytes())
    cache = EmbeddingCache(tmp_path)
    assert cache.lookup("0" * 32, [bytes(32)]) == {} and "another model's namespace" in caplog.text
    assert not (other / good.name).exists()


def test_cache_is_cut_to_its_cap_least_recently_used_first(tmp_path):
    cache = EmbeddingCache(tmp_path, limit_mib=0.05)  # 52 kB: three 20 kB shards do not fit
    vectors = np.ones((10, 512), dtype=np.float32)  # 20 kB each
    old = cache.add("a" * 32, [bytes([i]) * 32 for i in range(10)], vectors)
    used = cache.add("b" * 32, [bytes([i + 10]) * 32 for i in range(10)], vectors * 2)
    os.utime(old, (1, 1))
    os.utime(used, (1, 1))
    assert cache.lookup("b" * 32, [bytes([10]) * 32])  # reading it makes it the most recently used
    newest = cache.add("c" * 32, [bytes([i + 20]) * 32 for i in range(10)], vectors * 3)
    assert not old.exists() and used.exists() and newest.exists()
    assert cache.size_bytes() <= 0.05 * 2**20
    assert EmbeddingCache(tmp_path, limit_mib=0).evict() == 2 and cache.size_bytes() == 0


@pytest.mark.parametrize("text", ["inf", "1e308", "nan", "-1", "big"])
def test_a_cap_that_is_not_a_size_is_refused_in_one_line_naming_the_allowed_values(text, monkeypatch):
    """HARNESS_EMBEDDING_CACHE_MIB=inf (or a cap whose byte count overflows) was an OverflowError."""
    from harness.embedding_cache import MAX_LIMIT_MIB, limit_mib_from_environment
    from harness.errors import InvalidOptionError

    monkeypatch.setenv("HARNESS_EMBEDDING_CACHE_MIB", text)
    with pytest.raises(
        InvalidOptionError, match=f"a number from 0 to {MAX_LIMIT_MIB:.0f} .default 2048., got"
    ) as error:
        EmbeddingCache("unused", limit_mib_from_environment())
    assert "\n" not in str(error.value)
    monkeypatch.setenv("HARNESS_EMBEDDING_CACHE_MIB", str(MAX_LIMIT_MIB))
    assert EmbeddingCache("unused", limit_mib_from_environment()).limit_bytes == 2**50


def test_nothing_is_cached_outside_an_evaluation_scope(tmp_path):
    calls = []

    def compute(texts):
        calls.append(list(texts))
        return np.zeros((len(texts), 2), dtype=np.float32)

    cached_encode(lambda: {"model": 1}, ["x", "y"], compute)
    with evaluation_scope(None):
        cached_encode(lambda: {"model": 1}, ["x", "y"], compute)
    with evaluation_scope(EmbeddingCache(tmp_path)):
        cached_encode(lambda: {"model": 1}, ["x", "y", "x"], compute)
        cached_encode(lambda: {"model": 1}, ["y", "x"], compute)
    assert calls == [["x", "y"], ["x", "y"], ["x", "y"]]


def _run(tiny_bert, results, *extra, tasks="stsb,sickr", env=None):
    import harness.testing as ht

    return ht.run_harness(
        "run", "--models", "be", "--backbone", tiny_bert, "--tasks", tasks, "--profile", "smoke",
        "--results", results, "--no-progress", *extra, env=env,
    )  # fmt: skip


def _records(results):
    return {path.name: json.loads(path.read_text()) for path in sorted(results.glob("*/seed-*/*.json"))}


def test_run_scores_are_identical_with_the_cache_on_and_off(tiny_bert, tmp_path):
    """The runner's cache (on by default): a second run with --overwrite serves every vector and scores the same;
    --no-embedding-cache computes everything and says so in the record's timings."""
    results = tmp_path / "store"
    cold = _run(tiny_bert, results)
    assert cold.exit_code == 0, cold.stderr
    first = _records(results)
    assert all(record["timings"]["embedding_cache"]["hits"] == 0 for record in first.values())
    warm = _run(tiny_bert, results, "--overwrite")
    assert warm.exit_code == 0, warm.stderr
    second = _records(results)
    for name, record in second.items():
        assert record["timings"]["embedding_cache"]["misses"] == 0, name
        assert record["timings"]["embedding_cache"]["hits"] > 0, name
        assert record["scores"] == first[name]["scores"], name
    off = _run(tiny_bert, tmp_path / "off", env={"HARNESS_EMBEDDING_CACHE": "0"})
    assert off.exit_code == 0, off.stderr
    for name, record in _records(tmp_path / "off").items():
        assert (
            record["timings"]["embedding_cache"] == {"enabled": False} and record["scores"] == first[name]["scores"]
        ), name
    assert not (tmp_path / "off" / "cache" / "embeddings").exists()
    flag = _run(tiny_bert, results, "--overwrite", "--no-embedding-cache", tasks="stsb")
    assert flag.exit_code == 0, flag.stderr
    assert _records(results)["stsb.json"]["timings"]["embedding_cache"] == {"enabled": False}


def test_a_reloaded_checkpoint_is_served_the_vectors_its_training_run_computed(tiny_bert, tmp_path):
    """`harness rescore` loads the checkpoint with a fresh tokenizer, while the run that trained it had called its
    tokenizer (which leaves truncation and padding state on a fast tokenizer's backend): the two share vectors. Found
    on a GPU machine, where the rescore wrote a second namespace instead of reading the first."""
    results = tmp_path / "store"
    trained = _run(tiny_bert, results, "--train-on", "stsb", tasks="stsb")
    assert trained.exit_code == 0, trained.stderr
    first = _records(results)["stsb.json"]
    # In another process, as a user's rescore runs: this one holds the tokenizer object the training run called.
    rescored = subprocess.run(
        [sys.executable, "-m", "harness", "rescore", "--models", "be", "--backbone", tiny_bert, "--tasks", "stsb",
         "--train-on", "stsb", "--profile", "smoke", "--results", results, "--no-progress"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert rescored.returncode == 0, rescored.stderr
    again = _records(results)["stsb.json"]
    assert again["timings"]["embedding_cache"]["misses"] == 0
    assert again["timings"]["embedding_cache"]["hits"] > 0
    assert again["scores"] == first["scores"]
    assert len(list((results / "cache" / "embeddings").iterdir())) == 1  # one namespace


def test_the_tokenizer_key_ignores_the_state_a_call_leaves(tiny_bert):
    from transformers import AutoTokenizer

    from harness.nn.encoder import tokenizer_key

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    before = tokenizer_key(tokenizer)
    tokenizer(["a man is playing a guitar."], truncation=True, max_length=7, padding=True)
    assert tokenizer_key(tokenizer) == before
    lowered = AutoTokenizer.from_pretrained(tiny_bert, do_lower_case=not tokenizer.do_lower_case)
    assert tokenizer_key(lowered) != before  # what the tokenizer does still counts


def test_matrix_key_turns_the_cache_off_and_a_wrong_value_is_refused(tiny_bert, tmp_path):
    from harness.errors import InvalidOptionError
    from harness.run.config import RunConfig

    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"models: [be]\ntasks: [stsb]\nbackbone: {tiny_bert}\nembedding_cache: false\n")
    import harness.testing as ht

    run = ht.run_harness("run", "--matrix", matrix, "--profile", "smoke", "--results", tmp_path / "r", "--no-progress")
    assert run.exit_code == 0, run.stderr
    (record,) = _records(tmp_path / "r").values()
    assert record["timings"]["embedding_cache"] == {"enabled": False}
    with pytest.raises(InvalidOptionError, match="embedding_cache must be true or false"):
        RunConfig(models=[], tasks=[], embedding_cache="no")  # type: ignore[arg-type]


def test_concurrent_writers_and_evictors_share_one_cache(tmp_path):
    """Several workers (threads here; processes and Ray workers write the same way) encode overlapping texts into
    one cache while it is cut to a small cap: every answer is right, and no half-written shard is ever read."""
    import threading

    def vectors_of(texts):
        return np.stack([np.full(64, float(len(text)), dtype=np.float32) for text in texts])

    texts = [f"sentence {i}" * (i % 5 + 1) for i in range(40)]
    problems = []

    def worker(offset):
        cache = EmbeddingCache(tmp_path, limit_mib=0.01)  # about 40 vectors: shards are evicted all the time
        for round_number in range(5):
            chosen = texts[offset : offset + 20] + texts[: round_number + 1]
            with evaluation_scope(cache):
                got = cached_encode(lambda: {"model": "shared"}, chosen, vectors_of)
            if not np.array_equal(got, vectors_of(chosen)):
                problems.append((offset, round_number))

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in (0, 10, 20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert not list(tmp_path.rglob(".*"))  # no temporaries left behind
