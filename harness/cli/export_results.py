"""`harness export-results --format NAME`: results formats are ``results-format`` components, callables
``(records, output_dir) -> written paths``."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import HarnessError
from ..files import prepare_output_dir
from .common import existing_store, load_registry, results_dir
from .parsing import WORKING_STORE, add_command, add_results_option


def add_parser(commands) -> None:
    export_results = add_command(
        commands,
        "export-results",
        "write stored results in another benchmark's results layout (e.g. --format mteb)",
        ("harness export-results --format mteb --to mteb-results",),
    )
    export_results.add_argument(
        "--format",
        required=True,
        help="a results format (`harness list`, components of kind 'results-format'), e.g. mteb",
    )
    export_results.add_argument("--to", type=Path, required=True, help="the folder to write into")
    export_results.add_argument(
        "--include-samples",
        action="store_true",
        help="also export records computed on an evaluation sample (max_eval_examples, e.g. "
        "--profile smoke), marked as samples; left out by default",
    )
    add_results_option(export_results, f"store to read ({WORKING_STORE})")
    export_results.add_argument(
        "--overwrite", action="store_true", help="write into a folder that already holds files (they may be replaced)"
    )
    export_results.set_defaults(handler=cmd_export_results)


def cmd_export_results(args) -> int:
    from ..leaderboard import sample_size

    write = load_registry().component("results-format", args.format)
    store = existing_store(results_dir(args.results))
    target = Path(args.to).expanduser()
    if target.is_dir() and any(target.iterdir()) and not args.overwrite:  # never replace an earlier export silently
        raise HarnessError(
            f"{target} already holds files (an earlier export?); choose an empty or new folder, or "
            "add --overwrite to replace what the export writes."
        )
    prepare_output_dir(target, "the export folder")  # writable; leftovers of a killed export removed
    records = list(store.records())
    samples = [r for r in records if sample_size(r) is not None]
    if samples and not args.include_samples:
        sizes = ", ".join(str(n) for n in sorted({sample_size(r) for r in samples}))
        why = (
            f"{len(samples)} record(s) of {store.root} were computed on a sample of the evaluation data "
            f"(max_eval_examples={sizes}), so their scores are not the benchmark's"
        )
        records = [r for r in records if sample_size(r) is None]
        if not records:
            raise HarnessError(
                f"{why}; nothing else to export. Run with --profile quick (or paper), or pass "
                "--include-samples to export them marked as samples."
            )
        print(f"left out: {why} (--include-samples exports them, marked as samples).", file=sys.stderr)
    written = write(records, args.to)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} files from {len(records)} records of {store.root}")
    return 0
