"""Verdicts computed, not typed: the rule of harness.leaderboard.claims, a matrix's claims judged on a
store's records (the reproduction page and the matrix page show the same verdicts), and the committed
docs/reproduction.md against its inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.evaluation.bootstrap import ExampleScores, example_side_file
from harness.evaluation.significance import TOO_FEW_SEEDS, PairedResult, UnitComparison
from harness.leaderboard import claims as claims_module
from harness.leaderboard.claims import inputs_digest, render_reproduction, split_fingerprint
from harness.leaderboard.verdicts import (
    NO_DIFFERENCE,
    NOT_RUN,
    NOT_TESTABLE,
    OPPOSITE,
    REPRODUCED,
    SAME_DIRECTION,
    TIE_BROKEN,
    TIE_HOLDS,
    pair_verdict,
)
from harness.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _unit(difference, low, high, p_value, trained=False):
    examples = PairedResult(70 + difference, 70.0, difference, low, high, p_value, 100, 2, 2)
    return UnitComparison(examples, None, trained)


def test_the_verdict_rule():
    assert pair_verdict("order", _unit(2.0, 1.0, 3.0, 0.001), 2.5) == REPRODUCED  # the paper's size inside
    assert pair_verdict("order", _unit(2.0, 1.0, 3.0, 0.001), 9.0) == SAME_DIRECTION
    assert pair_verdict("order", _unit(2.0, 1.0, 3.0, 0.001), None) == SAME_DIRECTION  # no size to compare
    assert pair_verdict("order", _unit(-2.0, -3.0, -1.0, 0.001), 2.0) == OPPOSITE
    assert pair_verdict("order", _unit(0.3, -1.0, 1.6, 0.32), 2.0) == NO_DIFFERENCE
    assert pair_verdict("tie", _unit(0.3, -1.0, 1.6, 0.32), 0.1) == TIE_HOLDS
    assert pair_verdict("tie", _unit(3.0, 2.0, 4.0, 0.001), 0.1) == TIE_BROKEN
    assert pair_verdict("order", _unit(2.0, 1.0, 3.0, 0.001, trained=True), 2.0) == TOO_FEW_SEEDS  # no across runs


def test_a_benchmark_claim_needs_three_seeds_a_side_and_is_judged_against_their_spread():
    """One seed a side cannot tell a method difference from a seed difference (the TSDAE benchmark)."""
    from harness.leaderboard.verdicts import BENCHMARK_UNDECIDED, Claim, ClaimOutcome, numbers_text

    def claim(numbers):
        return Claim("m", "s", 0, "ours is theirs", benchmark={"bar": 1.5, "numbers": {"stsb": numbers}})

    assert claims_module._benchmark_verdict(claim([46.81, 47.56])) == BENCHMARK_UNDECIDED
    within = claim([[46.8, 47.0, 46.2], [47.5, 46.9, 47.1]])  # -0.50, spreads 0.80 and 0.60
    assert claims_module._benchmark_verdict(within) == REPRODUCED
    assert "46.67 (ours, 3 seeds, spread 0.80)" in numbers_text(ClaimOutcome(within, [], [], REPRODUCED))
    # within the bar but beyond both sides' seed spreads: the methods differ more than their seeds do
    beyond = claim([[46.8, 46.9, 46.85], [47.5, 47.6, 47.55]])
    assert claims_module._benchmark_verdict(beyond).startswith("not reproduced")


def _write(store, key, seed, task, data, trained, backbone="tiny"):
    record = {
        "status": "ok",
        "model": {
            "name": "be",
            "label": "be",
            "train_on": "stsb" if trained else None,
            "backbone": backbone,
            "profile": "smoke",
            "hash": f"{key}-hash",
        },
        "model_key": key,
        "seed": seed,
        "hardware": "cpu",
        "dataset_checksum": "0" * 64,
        "task": {
            "name": task,
            "key": task,
            "label": task,
            "family": "senteval",
            "version": "1",
            "main_score": "spearman",
        },
        "main_score": data.value(),
        "scores": {"spearman": data.value()},
        "training": {"steps": 1} if trained else None,
    }
    record["examples"], side_file = example_side_file(data, data.value(), task)
    store.write(key, seed, task, record, examples=side_file)


MATRIX = """profile: smoke
seeds: [42, 43]
tasks: [stsb]
models:
  - {model: be, name: Base}
  - {model: be, train_on: stsb, name: Trained}
  - {model: "be:pooling=cls", train_on: stsb, name: One seed}
  - {model: "be:pooling=cls", name: Never run}
paper:
  source: a table
  rows:
    Base: {stsb: 70.0}
    Trained: {stsb: 80.0}
claims:
  - section: A paper
    order: 2
    claim: training helps
    column: stsb
    higher: Trained
    lower: Base
  - section: A paper
    order: 2
    claim: one seed cannot tell
    column: stsb
    higher: One seed
    lower: Base
  - section: Another paper
    order: 1
    claim: never run
    column: stsb
    relation: tie
    pairs: [[Never run, Base]]
  - section: Another paper
    order: 1
    claim: needs a GPU
    not_testable: no GPU here
"""


def test_claims_are_judged_on_the_records_and_both_pages_agree(tmp_path, registry):
    from harness.leaderboard.matrix_board import build_board, render_markdown
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX)
    profile = get_profile("smoke")
    keys = {
        name: resolve_model_spec(registry, spec, profile, None, train_on).key
        for name, spec, train_on in (
            ("Base", "be", None),
            ("Trained", "be", "stsb"),
            ("One seed", "be:pooling=cls", "stsb"),
        )
    }
    rng = np.random.default_rng(0)
    gold = rng.normal(size=300)
    store = Store(tmp_path / "store")
    _write(
        store,
        keys["Base"],
        42,
        "stsb",
        ExampleScores("spearman", {"predicted": gold + 2.0 * rng.normal(size=300), "gold": gold}),
        trained=False,
    )
    for seed in (42, 43):  # two runs, both far better than the base: significant across runs too
        _write(
            store,
            keys["Trained"],
            seed,
            "stsb",
            ExampleScores("spearman", {"predicted": gold + 0.3 * rng.normal(size=300), "gold": gold}),
            trained=True,
        )
    _write(
        store,
        keys["One seed"],
        42,
        "stsb",
        ExampleScores("spearman", {"predicted": gold + 0.3 * rng.normal(size=300), "gold": gold}),
        trained=True,
    )
    page = render_reproduction([matrix], store, registry)
    body, digests = split_fingerprint(page)
    assert digests["inputs"] == inputs_digest([matrix], store, registry)
    assert body.index("## Another paper") < body.index("## A paper")  # sections ordered by the claims' order
    rows = {line.split(" | ")[0].lstrip("| "): line for line in body.splitlines() if line.startswith("| ")}
    assert "(across runs)" in rows["training helps (paper: Trained - Base +10.00)"]
    assert f"**{SAME_DIRECTION}** (at the smoke profile only)" in rows["training helps (paper: Trained - Base +10.00)"]
    assert f"**{TOO_FEW_SEEDS}**" in rows["one seed cannot tell"]
    assert f"**{NOT_RUN}**" in rows["never run"] and f"**{NOT_TESTABLE}** (no GPU here)" in rows["needs a GPU"]
    # the matrix page shows the very same rows
    outcomes = claims_module.matrix_outcomes(matrix, store, registry)
    board_page = render_markdown(build_board(matrix, store, registry), outcomes)
    for line in rows.values():
        if "claim |" not in line and "---" not in line:
            assert line in board_page


def test_a_claim_naming_an_unknown_row_is_one_clear_error(tmp_path, registry):
    from harness.errors import HarnessError

    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.replace("higher: Trained", "higher: Traned"))
    with pytest.raises(HarnessError, match="names row 'Traned', which is not an entry"):
        render_reproduction([matrix], Store(tmp_path / "store"), registry)


def test_the_committed_reproduction_page_is_the_generated_one(registry):
    """docs/reproduction.md ends with the digest of its inputs (matrix files with claims, their rows' records in
    published/, the verdict code) and of its own body: a hand edit or a page older than its inputs fails here.
    Regenerate: harness leaderboard --results published --reproduction docs/reproduction.md"""
    page = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    body, digests = split_fingerprint(page)
    import hashlib

    assert digests, "docs/reproduction.md has no fingerprint line: regenerate it"
    assert digests["page"] == hashlib.sha256(body.encode()).hexdigest(), "docs/reproduction.md was edited by hand"
    assert digests["inputs"] == inputs_digest(
        sorted((ROOT / "matrices").glob("*.yaml")), Store(ROOT / "published"), registry
    ), "docs/reproduction.md is older than its inputs: regenerate it"


def test_rows_trained_under_an_older_default_are_marked(tmp_path, registry):
    """A record whose spec now resolves to another model key (a default changed since it was
    trained) is left out and counted, and when asked keeps its row, marked, with a note naming the current model."""
    from harness.leaderboard import STALE, stale_models, write_leaderboards
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    spec = resolve_model_spec(registry, "be", get_profile("smoke"))
    current = spec.key
    store = Store(tmp_path / "store")
    rng = np.random.default_rng(1)
    gold = rng.normal(size=50)
    for key in (current, "be-0123456789ab"):  # the second: the same label, trained under an older default
        _write(
            store,
            key,
            42,
            "stsb",
            ExampleScores("spearman", {"predicted": gold + rng.normal(size=50), "gold": gold}),
            trained=False,
            backbone=spec.backbone,
        )
    stale = stale_models(store, registry)
    assert stale == {"be-0123456789ab": current}
    (path,) = write_leaderboards(store, tmp_path / "boards", ("md",), stale=stale)
    hidden = path.read_text()  # by default left out, counted
    assert "be-0123456789ab" not in hidden and "1 superseded model(s) left out" in hidden
    (path,) = write_leaderboards(store, tmp_path / "boards", ("md",), stale=stale, show_superseded=True)
    text = path.read_text()
    assert (
        "be {key=be-0123456789ab} " + STALE in text
        and f"{STALE} `be` (be-0123456789ab): trained before a default" in text
    )
    assert current in text
