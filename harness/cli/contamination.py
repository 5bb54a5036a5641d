"""`harness contamination`: the measured train/test overlap of a store's records (harness.run.overlap)."""

from __future__ import annotations

from ..contamination import NORMALISATION_VERSION, current_rule
from . import values
from .common import DEFAULT_PUBLISHED, DEFAULT_RESULTS, existing_store, load_registry, results_dir
from .parsing import add_command, add_data_dir_option, add_results_option


def add_parser(commands) -> None:
    overlap = add_command(
        commands,
        "contamination",
        "how many test pairs and sentences each trained record's model saw in training (measured; --write adds it "
        "to records that lack it)",
        ("harness contamination --results published", "harness contamination --write"),
    )
    add_results_option(
        overlap,
        f"the store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR; e.g. {DEFAULT_PUBLISHED})",
    )
    add_data_dir_option(overlap)
    overlap.add_argument(
        "--write", action="store_true", help="store the derived measurement in the records that lack it (sealed again)"
    )
    overlap.add_argument(
        "--recompute", action="store_true", help="derive it again for every record, also those that carry one"
    )
    overlap.set_defaults(handler=cmd_contamination)


def cmd_contamination(args) -> int:
    from tabulate import tabulate

    from ..run.overlap import OverlapDeriver, overlap_row

    registry = load_registry()
    store = existing_store(results_dir(args.results), "pass the store with --results (e.g. --results published)")
    deriver = OverlapDeriver(registry, store, values.checked_data_dir(args.data_dir))
    found = deriver.records(missing_only=not args.recompute)
    print(
        tabulate(
            [overlap_row(item) for item in found],
            headers=["model", "seed", "task", "test pairs seen", "test sentences seen", "trained on", "how"],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    # measured here: every record without a measurement under the current matching rule (--recompute: every one)
    derived = [
        item
        for item in found
        if item.contamination is not None and (args.recompute or not current_rule(item.record.get("contamination")))
    ]
    older = sum(isinstance(item.record.get("contamination"), dict) for item in derived)
    refused = [item for item in found if item.contamination is None and item.reason]
    if args.write:
        deriver.check_sealable(derived)  # a signed record without the key: refused before anything is written
        for item in derived:
            deriver.write(item)
        print(f"wrote the measurement into {len(derived)} record(s) of {store.root}")
        if refused:
            print(f"not written: {len(refused)} record(s) that cannot be measured here (the last column says why)")
    elif derived:
        print(
            f"{len(derived)} record(s) lack the measurement under matching rule {NORMALISATION_VERSION}"
            f"{f' ({older} measured under an older rule)' if older else ''}; --write stores it in them (derived "
            "from each record's spec and the data, marked 'derived from the record')"
        )
    return 0
