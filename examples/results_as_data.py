"""Results as data, notebook style: the committed published records as a pandas DataFrame.

Run it from the repository root: ``python examples/results_as_data.py [STORE] [FAMILY]`` (default ``published``,
``senteval``). Each step is a notebook cell; docs/guide/results-as-data.md walks through it.
"""

from __future__ import annotations

import logging
import sys

import pandas as pd

import harness

logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")  # damaged records are warnings
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 48)

store = sys.argv[1] if len(sys.argv) > 1 else "published"
family = sys.argv[2] if len(sys.argv) > 2 else "senteval"

# 1. Load: one row per cell and seed. Nothing is recomputed; records that do not verify are in .errors.
results = harness.load_results(store, families=family)
frame = results.frame
print(f"{len(frame)} rows from {store} ({len(results.errors)} not loaded); some columns:")
print(frame[["spec", "seed", "task", "metric", "score", "hardware"]].head(), end="\n\n")

# 2. The wide table: models x tasks, seeds aggregated as the leaderboard does (mean; average of complete rows).
wide = results.wide()
print(f"{family}, mean over seeds (as leaderboards/{family}.md):")
shown = wide.round(2).reset_index(level="model_key", drop=True)
shown.index = [label if len(label) <= 60 else label[:57] + "..." for label in shown.index]  # long specs shortened
print(shown.head(10).to_string(), end="\n\n")

# 3. A groupby over seeds: each row's average over the family's tasks per seed, then its spread across seeds.
ok = frame[frame["status"] == "ok"]
per_seed = ok.groupby(["spec", "seed"])["score"].mean().rename("mean over tasks").reset_index()
spread = per_seed.groupby("spec")["mean over tasks"].agg(["count", "mean", "std"]).rename(columns={"count": "seeds"})
print("per-seed averages, then mean and std across seeds (rows with more than one seed):")
spread.index = [label if len(label) <= 60 else label[:57] + "..." for label in spread.index]
print(spread[spread["seeds"] > 1].sort_values("mean", ascending=False).round(2).head(10).to_string(), end="\n\n")

# 4. Cost columns: filled for records written since harness measured cost (most published ones predate it).
costed = ok["evaluation_seconds"].notna().sum()
print(f"records with cost: {costed} of {len(ok)}; evaluation time by hardware (record timings, seconds):")
print(ok.groupby("hardware")["eval_seconds"].describe()[["count", "mean", "max"]].round(1).to_string())
