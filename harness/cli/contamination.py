"""`harness contamination`: the measured train/test overlap of a store's records (harness.run.overlap)."""

from __future__ import annotations

from ..contamination import NORMALISATION_VERSION, current_rule
from . import values
from .common import existing_store, load_registry, results_dir


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
