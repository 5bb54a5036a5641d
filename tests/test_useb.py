"""USEB tasks against the reference implementation, the public ``useb`` package 0.0.1.

Both run on the same fixtures (``tests/fixtures/useb``, official formats) and the same deterministic embeddings;
useb receives them as float64 tensors so that both sides compute cosines in float64, and its rounding to two decimals
is switched off so the numbers can be compared to 1e-9. ``useb`` is installed with ``pip install --no-deps
useb==0.0.1 pytrec-eval-terrier``: its declared dependency ``pytrec-eval`` only builds with a network download of
trec_eval, and ``pytrec-eval-terrier`` provides the same ``pytrec_eval`` module as a wheel.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness import UNLABELED_SENTENCES, EvalContext, MissingDataError
from harness.profiles import get_profile

useb = pytest.importorskip("useb", reason="reference needs `pip install --no-deps useb==0.0.1 pytrec-eval-terrier`")
torch = pytest.importorskip("torch")

from harness.evaluation.bm25 import BM25Index, bm25_tokens  # noqa: E402
from harness.evaluation.ranking import trec_map_ndcg  # noqa: E402
from harness.tasks import useb as useb_tasks  # noqa: E402
from harness.tasks.useb.cqadupstack import SMOKE_POOL_FACTOR  # noqa: E402
from harness.tasks.useb.data import BUNDLED_TWITTERPARA, TRAIN_DOMAIN  # noqa: E402
from harness.tasks.useb.scidocs import SCIDOCS_SUBTASKS  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "useb"
DATA_EVAL = FIXTURES / "data-eval"


class HashEmbedder:
    """A fixed random vector per distinct text: deterministic, no model, no ties."""

    def __init__(self, dim: int = 16, buckets: int | None = None):
        self.dim = dim
        self.buckets = buckets  # with buckets, texts share a few vectors: many exact ties
        self.encoded_texts: list[str] = []

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        if self.buckets:
            seed %= self.buckets
        return np.random.default_rng(seed).standard_normal(self.dim)

    def encode(self, texts) -> np.ndarray:
        self.encoded_texts.extend(texts)
        return np.stack([self.vector(t) for t in texts]) if len(texts) else np.zeros((0, self.dim))


class PairOnly:
    """A pair scorer without ``encode`` (like a cross-encoder) whose scores are the embedder's cosines."""

    def __init__(self, embedder: HashEmbedder):
        self.embedder = embedder
        self.pairs = 0

    def score(self, first, second) -> np.ndarray:
        from harness import cosine_rows

        self.pairs += len(first)
        return cosine_rows(self.embedder.encode(list(first)), self.embedder.encode(list(second)))


@pytest.fixture()
def exact_useb(monkeypatch):
    """useb evaluators with unrounded scores (x100) and no progress output."""
    from useb.evaluators.base import BaseEvaluator

    monkeypatch.setattr(
        BaseEvaluator, "_round_percentage", lambda self, results: {key: 100 * value for key, value in results.items()}
    )
    return useb


def semb_fn(embedder: HashEmbedder):
    return lambda batch: torch.tensor(embedder.encode(batch), dtype=torch.float64)


def context(profile: str = "quick") -> EvalContext:
    return EvalContext(profile=get_profile(profile), device="cpu", seed=42, batch_size=16, progress=False)


def task(name: str, data_dir: Path | None = FIXTURES, **options):
    plugin = {p.name: p for p in useb_tasks.task_plugins()}[name]
    resolved = {key: option.default for key, option in plugin.options.items()}
    resolved.update(options)
    return plugin.factory(resolved, data_dir)


def assert_same(ours: dict, reference: dict, mapping: dict[str, str]) -> None:
    for our_key, reference_key in mapping.items():
        assert ours[our_key] == pytest.approx(reference[reference_key], abs=1e-9), (our_key, reference_key)


@pytest.mark.parametrize("buckets", [None, 3])
@pytest.mark.parametrize("split", ["test", "valid"])
def test_askubuntu_equals_useb(exact_useb, buckets, split):
    embedder = HashEmbedder(buckets=buckets)  # buckets=3: ties everywhere, so the stable BM25 order decides
    reference = exact_useb.evaluators.AskubuntuEvaluator(
        semb_fn(embedder), str(DATA_EVAL / "askubuntu"), show=False
    ).run(split)
    for model in (HashEmbedder(buckets=buckets), PairOnly(HashEmbedder(buckets=buckets))):
        result = task("askubuntu", split=split).evaluate(model, context())
        assert_same(
            result.scores,
            reference,
            {
                "map": "map_askubuntu_title",
                "mrr": "mrr_askubuntu_title",
                "p@1": "p@1_askubuntu_title",
                "p@5": "p@5_askubuntu_title",
            },
        )
    assert result.details["queries"] == (9 if split == "test" else 4)  # the query without gold is skipped
    assert result.examples.value() == pytest.approx(result.scores["map"])  # per-query AP for its interval
    assert 0 <= result.scores["mrr@10"] <= result.scores["mrr"]


def test_askubuntu_text_components_equal_useb(exact_useb):
    reference = exact_useb.evaluators.AskubuntuEvaluator(
        semb_fn(HashEmbedder()), str(DATA_EVAL / "askubuntu"), text_components="title_and_body", show=False
    ).run("test")
    result = task("askubuntu", text="title_and_body").evaluate(HashEmbedder(), context())
    assert_same(result.scores, reference, {"map": "map_askubuntu_title_and_body"})


@pytest.mark.parametrize("split", ["test", "valid"])
def test_cqadupstack_embedder_equals_useb(exact_useb, split):
    reference = exact_useb.evaluators.CQADupStackEvaluator(
        semb_fn(HashEmbedder()), str(DATA_EVAL / "cqadupstack"), show=False
    ).run(split)
    embedder = HashEmbedder()
    result = task("cqadupstack", split=split).evaluate(embedder, context())
    assert len(embedder.encoded_texts) == len(set(embedder.encoded_texts))  # no text encoded twice
    mapping = {"map@100": "map@100_cqadupstack_avg", "ndcg@10": "ndcg@10_cqadupstack_avg"}
    for forum in ("android", "gis", "tex"):
        mapping[f"map@100.{forum}"] = f"map@100_cqadupstack_{forum}"
        mapping[f"ndcg@10.{forum}"] = f"ndcg@10_cqadupstack_{forum}"
    assert_same(result.scores, reference, mapping)
    assert result.examples.value() == pytest.approx(result.scores["map@100"])  # mean over forums of per-query AP
    assert result.details["ranking"].startswith("embedder")
    assert "first_stage" not in result.details


def test_cqadupstack_pair_scorer_reranks_bm25_top_100(exact_useb):
    reference = exact_useb.evaluators.CQADupStackEvaluator(
        semb_fn(HashEmbedder()), str(DATA_EVAL / "cqadupstack"), show=False
    ).run("test")
    scorer = PairOnly(HashEmbedder())
    result = task("cqadupstack").evaluate(scorer, context())
    assert result.details["first_stage"] == "bm25"
    assert "pair scorer" in result.details["ranking"]
    # android's pool has exactly 100 documents: the first stage keeps all of them, so reranking equals useb's
    # full ranking; the other forums are cut to 100 candidates per query by BM25.
    assert_same(
        result.scores,
        reference,
        {"map@100.android": "map@100_cqadupstack_android", "ndcg@10.android": "ndcg@10_cqadupstack_android"},
    )
    queries = sum(f["queries"] for f in result.details["forums"].values())
    assert scorer.pairs == 100 * queries


def test_cqadupstack_first_stage_is_an_embedder_built_by_the_context():
    built = []

    def build_embedder(spec: str) -> HashEmbedder:
        built.append(spec)
        return HashEmbedder()

    ctx = context()
    ctx.embedder = build_embedder
    scorer = PairOnly(HashEmbedder())
    result = task("cqadupstack", first_stage="be:pooling=cls").evaluate(scorer, ctx)
    assert built == ["be:pooling=cls"]  # built once per evaluation, through the context (never a global registry)
    assert result.details["first_stage"] == "be:pooling=cls"
    assert result.details["first_stage_used"].startswith("embedder be:pooling=cls")
    # The first stage ranks by the same cosines the pair scorer gives: reranking its top 100 changes nothing.
    reference = task("cqadupstack").evaluate(HashEmbedder(), context())
    assert result.scores == pytest.approx(reference.scores, abs=1e-9)


def test_cqadupstack_first_stage_needs_the_context_embedder_lookup():
    from harness import HarnessError

    with pytest.raises(HarnessError, match="first_stage='be'.*first_stage=bm25"):
        task("cqadupstack", first_stage="be").evaluate(PairOnly(HashEmbedder()), context())
    ctx = context()
    ctx.embedder = lambda spec: PairOnly(HashEmbedder())
    with pytest.raises(HarnessError, match="cannot embed texts"):
        task("cqadupstack", first_stage="ce").evaluate(PairOnly(HashEmbedder()), ctx)


def test_bm25_index_equals_rank_bm25():
    from rank_bm25 import BM25Okapi

    corpus = json.loads((DATA_EVAL / "cqadupstack" / "corpus.json").read_text())["gis"]
    docs = list(corpus.values())
    queries = docs[:5] + ["ubuntu ubuntu wifi", "no such words"]
    index = BM25Index(docs)
    reference = BM25Okapi([bm25_tokens(d) for d in docs])
    for query, row in zip(queries, index.scores(queries)):
        np.testing.assert_allclose(row, reference.get_scores(bm25_tokens(query)), rtol=1e-12, atol=1e-12)


def test_twitterpara_equals_useb(exact_useb):
    # No bucketed (tied) embeddings here: torch's cosine of (a, b) and of (b, a) can differ in the last bit, which
    # changes the tie structure AP sees; real ties (the same pair twice) are computed identically by both.
    reference = exact_useb.evaluators.TwitterParaEvaluator(
        semb_fn(HashEmbedder()), str(DATA_EVAL / "twitterpara"), show=False
    ).run("test")
    for model in (HashEmbedder(), PairOnly(HashEmbedder())):
        result = task("twitterpara").evaluate(model, context())
        assert_same(
            result.scores,
            reference,
            {
                "ap": "ap_twitter_avg",
                "ap.pit": "ap_twitter_pit",
                "ap.twitterurl": "ap_twitter_twitterurl",
                "spearman": "spearman_twitter_avg",
                "spearman.pit": "spearman_twitter_pit",
                "spearman.twitterurl": "spearman_twitter_twitterurl",
            },
        )
        assert result.examples.value() == pytest.approx(result.scores["ap"])  # judged pairs, mean over datasets


def test_twitterpara_bundled_release_equals_useb(exact_useb, tmp_path, monkeypatch):
    """The bundled original release, read by useb after removing its blank lines (useb's own copy has none)."""
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    bundled = BUNDLED_TWITTERPARA
    copy = tmp_path / "twitterpara"
    copy.mkdir()
    for name in ("test.data", "test.label"):
        shutil.copy(bundled / name, copy / name)
    lines = (bundled / "Twitter_URL_Corpus_test.txt").read_text(encoding="utf-8").split("\n")
    kept = [line for line in lines if line.strip()]
    (copy / "Twitter_URL_Corpus_test.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    embedder = HashEmbedder()
    reference = exact_useb.evaluators.TwitterParaEvaluator(semb_fn(embedder), str(copy), show=False).run("test")
    embedder_ours = HashEmbedder()
    result = task("twitterpara", data_dir=tmp_path / "nothing-here").evaluate(embedder_ours, context())
    assert result.details["folder"] == str(bundled)
    assert result.details["pairs"] == {
        "twitterurl": {"all": 10120, "judged": 9334, "paraphrases": 1821},  # the README's 9334 test pairs
        "pit": {"all": 972, "judged": 838, "paraphrases": 175},
    }
    assert_same(
        result.scores,
        reference,
        {
            "ap": "ap_twitter_avg",
            "spearman": "spearman_twitter_avg",
            "ap.twitterurl": "ap_twitter_twitterurl",
            "ap.pit": "ap_twitter_pit",
        },
    )
    # Each distinct text is encoded once by the cosine adapter.
    assert len(embedder_ours.encoded_texts) == len(set(embedder_ours.encoded_texts))


@pytest.mark.parametrize("split", ["test", "valid"])
def test_scidocs_equals_useb(exact_useb, split):
    reference = exact_useb.evaluators.SciDocsEvaluator(
        semb_fn(HashEmbedder()), str(DATA_EVAL / "scidocs"), show=False
    ).run(split)
    for model in (HashEmbedder(), PairOnly(HashEmbedder())):
        result = task("scidocs", split=split).evaluate(model, context())
        mapping = {"map": "map_scidocs_cosine_avg", "ndcg": "ndcg_scidocs_cosine_avg"}
        for subtask in SCIDOCS_SUBTASKS:
            mapping[f"map.{subtask}"] = f"map_scidocs_{subtask}_cosine"
            mapping[f"ndcg.{subtask}"] = f"ndcg_scidocs_{subtask}_cosine"
        assert_same(result.scores, reference, mapping)
        assert result.examples.value() == pytest.approx(result.scores["map"])  # mean over sub-tasks
    data = json.loads((DATA_EVAL / "scidocs" / "data.json").read_text())
    titled = {
        subtask: sum(1 for q in qrels if (data["corpus"].get(q) or {}).get("title"))
        for subtask, qrels in data[split].items()
    }
    assert result.details["queries"] == titled  # queries without a title are skipped, as useb does
    if split == "test":
        assert data["test"]["cite"]["p012"] and "p012" in data["corpus"]  # counted although no candidate has a title


def test_trec_metrics_equal_pytrec_eval_with_ties():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    qrels, run = {}, {}
    for q in range(40):
        docs = [f"d{rng.integers(1000):03d}" for _ in range(30)]
        docs = list(dict.fromkeys(docs))
        qrels[f"q{q}"] = {d: int(rng.integers(0, 3) if q % 2 else rng.random() < 0.2) for d in docs}
        ranked = [d for d in docs if rng.random() < 0.8]
        # Scores with many exact ties and ties that exist only in float32.
        run[f"q{q}"] = {d: float(np.round(rng.random(), 1) + (1e-9 if rng.random() < 0.3 else 0.0)) for d in ranked}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg"}).evaluate(run)
    for qid, scored in run.items():
        average_precision, ndcg = trec_map_ndcg(qrels[qid], list(scored), list(scored.values()))
        assert average_precision == pytest.approx(reference[qid]["map"], abs=1e-12)
        assert ndcg == pytest.approx(reference[qid]["ndcg"], abs=1e-12)


def test_evaluation_cut_of_the_smoke_profile_is_seeded_and_per_sub_dataset():
    from dataclasses import replace

    limit = 3
    ctx = context("smoke")
    ctx.profile = replace(ctx.profile, max_eval_examples=limit)
    details = {
        name: task(name).evaluate(HashEmbedder(), ctx).details
        for name in ("askubuntu", "cqadupstack", "twitterpara", "scidocs")
    }
    assert details["askubuntu"]["queries"] == limit
    assert all(counts["all"] == limit for counts in details["twitterpara"]["pairs"].values())
    assert all(count <= limit for count in details["scidocs"]["queries"].values())
    for forum in details["cqadupstack"]["forums"].values():
        assert forum["queries"] == limit and forum["pool"] <= SMOKE_POOL_FACTOR * limit + 3 * limit
    again = task("scidocs").evaluate(HashEmbedder(), ctx)
    assert again.details == details["scidocs"]


def test_missing_member_says_what_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    for name, needed in (("askubuntu", "text_tokenized.txt"), ("cqadupstack", "corpus.json"), ("scidocs", "data.json")):
        with pytest.raises(MissingDataError) as error:
            task(name, data_dir=tmp_path / "data").evaluate(HashEmbedder(), context())
        message = str(error.value)
        assert f"USEB {name}" in message and needed in message
        assert "harness data download useb" in message and "--data-dir" in message
        assert str(tmp_path / "data" / "useb" / "data-eval" / name) in message
    # twitterpara falls back to the bundled release.
    assert task("twitterpara", data_dir=tmp_path / "data").check_data()


def test_data_dir_layouts_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "data" / "useb"
    shutil.copytree(FIXTURES / "data-eval", root / "data-eval")
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path / "data"))
    assert task("scidocs", data_dir=None).eval_dir() == root / "data-eval" / "scidocs"
    # An explicit data dir with the official layout wins over the bundled twitterpara.
    assert task("twitterpara", data_dir=None).eval_dir() == root / "data-eval" / "twitterpara"
    # A folder holding useb's own data-eval/ (as `python -m useb.downloading` leaves it) works too.
    assert task("askubuntu", data_dir=FIXTURES).eval_dir() == DATA_EVAL / "askubuntu"


def test_unlabeled_training_sentences(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    for name, domain in TRAIN_DOMAIN.items():
        splits = task(name).training_data(UNLABELED_SENTENCES)
        expected = [
            line.strip()
            for line in (FIXTURES / "data-train" / domain / "unsupervised" / "train.txt").read_text().splitlines()
            if line.strip()
        ]
        assert splits.kind == UNLABELED_SENTENCES and splits.train.sentences == expected and len(expected) == 12
        assert splits.source == name and splits.checksum
        assert task(name).training_data("scored_pairs") is None
    with pytest.raises(MissingDataError, match="data-train/twitter/unsupervised/train.txt"):
        task("twitterpara", data_dir=tmp_path).training_data(UNLABELED_SENTENCES)


def test_bad_file_names_file_and_line(tmp_path):
    folder = tmp_path / "data-eval" / "askubuntu"
    shutil.copytree(DATA_EVAL / "askubuntu", folder)
    lines = (folder / "test.txt").read_text().splitlines()
    lines[3] = "only\ttwo fields"
    (folder / "test.txt").write_text("\n".join(lines) + "\n")
    from harness import DataFileError

    with pytest.raises(DataFileError, match=r"test.txt:4: expected 4 tab-separated fields"):
        task("askubuntu", data_dir=tmp_path).evaluate(HashEmbedder(), context())


def test_family_runs_end_to_end_with_missing_members(tmp_path, monkeypatch):
    """Runner + store + leaderboard: twitterpara scores (bundled), the other members are recorded as missing."""
    import harness
    from harness.executors.local import LocalExecutor
    from harness.leaderboard import write_leaderboards
    from harness.matrix import ModelEntry
    from harness.registry import build_registry
    from harness.run.config import RunConfig
    from harness.run.driver import Run
    from harness.store import Store

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)

    class HashModelPlugin:
        @harness.hookimpl
        def register_models(self, register):
            register(
                harness.ModelPlugin(
                    "hash-embedder", "test model: a random vector per text", lambda ctx: HashEmbedder(), ("embedder",)
                )
            )

    registry = build_registry([HashModelPlugin()])
    (tmp_path / "data").mkdir()  # an existing but empty data dir (a missing one is an error of its own)
    config = RunConfig(
        models=[ModelEntry("hash-embedder")],
        tasks=["useb"],
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "data",
        progress=False,
        device="cpu",
    )
    outcomes = Run(registry, config, log=lambda message: None).run(LocalExecutor())
    status = {o.task.name: o.status for o in outcomes}
    assert status == {"askubuntu": "missing", "cqadupstack": "missing", "scidocs": "missing", "twitterpara": "ok"}
    assert all("harness data download useb" in o.message for o in outcomes if o.status == "missing")
    written = write_leaderboards(Store(tmp_path / "results"), tmp_path / "boards", ("md",))
    table = next(p for p in written if p.name == "useb.md").read_text()
    row = next(line for line in table.splitlines() if "| hash-embedder" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    header_row = next(text for text in table.splitlines() if "| rank" in text)
    header = [cell.strip() for cell in header_row.strip("|").split("|")]
    by_column = dict(zip(header, cells))
    assert [by_column[m] for m in ("askubuntu", "cqadupstack", "scidocs")] == ["missing"] * 3
    value, interval = by_column["twitterpara"].split(" ", 1)  # the score and its bootstrap interval
    assert float(value) == pytest.approx(outcome_score(outcomes, "twitterpara"), abs=0.005) and interval.startswith("[")
    average_column = next(column for column in header if column.startswith("average"))  # "average (map)"
    assert by_column[average_column] == "incomplete"


def outcome_score(outcomes, task_name: str) -> float:
    return next(o.main_score for o in outcomes if o.task.name == task_name)


def test_askubuntu_keeps_each_querys_top_hits_as_it_ranked_them():
    """The stored hits (for the results site) are the ranking the scores came from: MRR is 1 / the gold rank."""
    result = task("askubuntu").evaluate(HashEmbedder(), context())
    hits = result.examples.hits
    assert hits.top.shape[1] == 10 and hits.top.dtype.kind == "U" and len(hits) == result.details["queries"]
    reciprocal = [1 / rank if rank else 0.0 for rank in hits.gold_rank.tolist()]
    assert 100 * np.mean(reciprocal) == pytest.approx(result.scores["mrr"])
    for top, gold, rank in zip(hits.top, hits.gold, hits.gold_rank):
        assert rank == 0 or rank > 10 or top[rank - 1] in set(gold.tolist())


def test_cqadupstack_keeps_each_querys_top_hits_named_by_forum():
    result = task("cqadupstack").evaluate(HashEmbedder(), context())
    hits, ids = result.examples.hits, result.examples.ids.tolist()
    assert len(hits) == len(ids) and hits.top.shape[1] == 10
    for query, top, rank in zip(ids, hits.top, hits.gold_rank):
        forum = query.split("/")[0]
        assert all(doc.startswith(f"{forum}/") for doc in top.tolist() if doc)
        assert rank == 0 or rank > 10 or top[rank - 1] in set(hits.gold[ids.index(query)].tolist())


def test_scidocs_keeps_each_querys_top_hits_in_trec_evals_order():
    """SciDocs' stored hits are the rankings its MAP came from: trec_eval's reciprocal rank (pytrec_eval, over the
    same cosines) is 1 / the stored gold rank; queries are named <sub-task>/<paper id>, documents by paper id."""
    import pytrec_eval

    embedder = HashEmbedder()
    result = task("scidocs").evaluate(embedder, context())
    hits, ids = result.examples.hits, result.examples.ids.tolist()
    assert len(hits) == len(ids) == len(set(ids)) and hits.top.shape[1] == 10
    data = json.loads((DATA_EVAL / "scidocs" / "data.json").read_text())
    titles = {pid: (paper or {}).get("title") for pid, paper in data["corpus"].items()}
    for query, top, gold, rank in zip(ids, hits.top, hits.gold, hits.gold_rank.tolist()):
        subtask, paper = query.split("/")
        qrel = data["test"][subtask][paper]
        candidates = [doc for doc in qrel if titles.get(doc)]
        vectors = [embedder.vector(titles[doc].strip()) for doc in candidates]
        query_vector = embedder.vector(titles[paper].strip())
        cosines = [float(v @ query_vector / np.linalg.norm(v) / np.linalg.norm(query_vector)) for v in vectors]
        measured = pytrec_eval.RelevanceEvaluator({query: qrel}, {"recip_rank"}).evaluate(
            {query: dict(zip(candidates, cosines))}
        )[query]["recip_rank"]
        assert measured == pytest.approx(1 / rank if rank else 0.0, abs=1e-6)
        assert set(gold.tolist()) - {""} == {doc for doc, level in qrel.items() if level >= 1}
        assert set(top.tolist()) - {""} <= set(candidates)


@pytest.mark.parametrize("name", ["askubuntu", "cqadupstack", "scidocs"])
def test_ranked_texts_give_the_texts_of_the_stored_hits_ids(name):
    """Every id the stored hits name has the text the model read; exactly the ids asked for; unknown ids: an error."""
    from harness import DataFileError, RankedTexts

    ranking_task = task(name)
    result = ranking_task.evaluate(HashEmbedder(), context())
    ids, hits = result.examples.ids.tolist(), result.examples.hits
    queries = set(ids)
    documents = {d for d in hits.top.ravel().tolist() + hits.gold.ravel().tolist() if d}
    texts = ranking_task.ranked_texts(context(), queries, documents)
    assert isinstance(texts, RankedTexts) and set(texts.queries) == queries and set(texts.documents) == documents
    assert all(isinstance(text, str) and text for text in texts.queries.values())
    assert all(texts.documents[d] for d in hits.top.ravel().tolist() if d)  # what was ranked was read
    embedder = HashEmbedder()  # what was encoded: every query's text (and, but for pair scoring, the documents)
    ranking_task.evaluate(embedder, context())
    assert set(texts.queries.values()) <= set(embedder.encoded_texts)
    with pytest.raises(DataFileError, match="no query 'nowhere/1'"):
        ranking_task.ranked_texts(context(), {"nowhere/1"}, ())
