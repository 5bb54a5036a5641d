"""Where a main job's minutes went, from its store alone: per model, the training (optimisation seconds, with dev
evaluations, steps, seconds per step, the precision asked for and the one that ran) and the evaluation seconds over
its tasks; then the totals.

Made to explain a slower run after the fact: the 2026-11-27 main job trained at the 2026-11-25 float32 speed
(``cbe`` 377 s against 372 s in float32 and 196 s under bfloat16), and a training that ran in float32 shows here as
``precision used fp32`` whatever was asked for (benchmarks/README.md).

Usage: python benchmarks/main_job_stages.py [--results results] [--models be,ce,cbe]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from harness.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results", help="the main job's store (default ./results)")
    parser.add_argument("--models", default=None, help="comma-separated model labels to show (default: all)")
    args = parser.parse_args()
    wanted = set(args.models.split(",")) if args.models else None

    evaluation: dict[str, float] = defaultdict(float)
    tasks: dict[str, int] = defaultdict(int)
    trainings: dict[str, dict] = {}
    hardware: set[str] = set()
    for record in Store(args.results).records():
        label = record.get("model", {}).get("label") or record.get("model_key", "?")
        if (wanted is not None and label not in wanted) or record.get("status", "ok") != "ok":
            continue  # another model, or a cell stored as missing data (nothing was evaluated)
        runtime = record.get("runtime")
        if runtime and runtime != "torch":
            label = f"{label} @{runtime}"
        evaluation[label] += float(record.get("timings", {}).get("eval_seconds") or 0.0)
        tasks[label] += 1
        hardware.add(str(record.get("hardware")))
        training = record.get("training")
        if training and label not in trainings:  # every record of a trained model carries the same training report
            trainings[label] = {"report": training, "budget": record.get("budget") or {}}

    if not tasks:
        raise SystemExit(f"no records in {args.results}: pass --results the main job's store")
    print(f"store {args.results}; hardware: {', '.join(sorted(hardware))}")
    print(
        "\n| model | training: optimisation s | with dev s | steps | s/step | precision asked / used | "
        "evaluation s | tasks |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    total_training = total_evaluation = 0.0
    for label in sorted(tasks):
        trained = trainings.get(label)
        if trained:
            report = trained["report"]
            applied = trained["budget"].get("applied") or report.get("applied_budget") or {}
            steps = int(report.get("steps") or 0)
            seconds, wall = float(report.get("seconds") or 0.0), float(report.get("wall_seconds") or 0.0)
            total_training += wall
            asked, used = applied.get("precision", "auto"), applied.get("precision_used", "not recorded")
            training_cells = (
                f"{seconds:,.1f} | {wall:,.1f} | {steps:,} | {seconds / max(1, steps):.3f} | {asked} / {used}"
            )
        else:
            training_cells = "not trained | – | – | – | –"
        total_evaluation += evaluation[label]
        print(f"| {label} | {training_cells} | {evaluation[label]:,.1f} | {tasks[label]} |")
    print(
        f"\ntraining (with dev evaluations) {total_training:,.0f} s, evaluation {total_evaluation:,.0f} s, together "
        f"{total_training + total_evaluation:,.0f} s (the rest of a run's wall time is start-up, model loading, data "
        f"reading and writing the store)"
    )


if __name__ == "__main__":
    main()
