"""Augmented SBERT: distil a pair-scoring teacher (Cross-Encoder, Cross-Bi-Encoder, ...) into the Bi-Encoder.

Thakur et al. 2021 (AugSBERT); thesis 2.4.7, 4.3 (4.3.1 domain-adaptive MLM, 4.3.2 iterative KDE), 5.3, 5.5, 6.1-6.4,
tables 6.3-6.8 and 6.11-6.13, figure 6.4. Spelled as options of the Bi-Encoder ``be`` (plugins/bi_encoder.py
delegates its ``fit`` here when ``teacher`` is set), with the run's ``--train-on`` naming the gold source:

    harness run --models be:teacher=cbe,sampler=kde-iterative --train-on bws-cross-topic --tasks bws-cross-topic
    harness run --models be:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb --train-on bws-cross-topic ...

Pipeline (``distill``):
1. Target sentences: the distinct sentences of the gold source's train pairs and the gold pairs between them; or,
   in domain transfer, the sentences of a source that offers only unlabeled sentences (e.g. a USEB domain, for the
   DomainSBERT / FullDomainSBERT rows of table 6.10, with ``sampler=semantic-search+random`` as in thesis 5.4.3).
2. A sampler (``plugins/samplers.py``, option ``sampler``) proposes candidate pairs (``top_k`` per sentence).
3. Optional domain adaptation (``teacher_mlm=true``, thesis 4.3.1, plugins/domain_mlm.py): MLM on the candidate
   pairs in the pairwise format, then the teacher is fine-tuned from that checkpoint with its embedding layer frozen
   (the teacher's option ``freeze_embeddings``). ``student_from_mlm=true`` starts the student from the MLM checkpoint
   too: DomainSBERT = ``teacher_mlm=true``; FullDomainSBERT = ``teacher_mlm=true,student_from_mlm=true``.
4. The teacher comes from ``ctx.trained_model(teacher, train_on=...)``, so its checkpoint is cached and shared by
   every cell (and by a plain ``ce``/``cbe`` row trained on the same source), and scores every candidate.
5. The sampler keeps a subset (KDE samplers compare with the gold score distribution; others keep all); at most
   ``max_silver`` pairs (default: the profile's training-set budget) survive, a seeded uniform subsample.
6. The student trains with the Bi-Encoder's own objective (MSE on cosine) on
   - ``mode=semi-supervised`` (default): gold + silver; teacher trained on the gold source (thesis 5.5, tables 6.12,
     6.13);
   - ``mode=self-distillation``: silver only; teacher trained on the gold source (label regularisation, tables 6.4,
     6.5; with ``sampler=none`` the teacher re-annotates the gold pairs);
   - ``mode=domain-transfer``: silver only; teacher trained on ``teacher_train_on`` (e.g. stsb), so the target's gold
     scores are never used for training (Thakur's unsupervised scenario; tables 6.7, 6.8, 6.10).
   The target's dev split (if any) selects the best epoch, as in every thesis experiment (5.1).
7. Silver pairs, their teacher scores and the gold scores are written to ``<work_dir>/silver_pairs.json`` (JSON, one
   record per candidate with a ``kept`` flag), from which the ``silver-density`` plot draws thesis figure 6.4.

Deviations: teacher scores are used as they come (a sigmoid CE gives (0, 1), a CBE a cosine in [-1, 1]: the thesis'
point about score ranges, so nothing is rescaled). The silver set is capped at the profile's training budget unless
``max_silver`` says otherwise (the thesis used all sampled pairs). KDE samplers need the target's gold scores and so
are refused in domain transfer. Options a teacher spec may carry are limited to what fits in one option value
(``teacher=ce:activation=tanh`` works; a second teacher option would be read as a ``be`` option).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import SCORED_PAIRS, UNLABELED_SENTENCES, Component, ScoredPairs, as_pair_scorer, hookimpl
from harness.capabilities import PAIR_SCORER, TRAINABLE, reachable_capabilities
from harness.errors import IncompatibleError, InvalidOptionError, close_matches_hint
from harness.options import Option
from harness.spec import stable_hash
from harness.store import CHECKPOINTS, atomic_write_text

SEMI_SUPERVISED = "semi-supervised"
SELF_DISTILLATION = "self-distillation"
DOMAIN_TRANSFER = "domain-transfer"
MODES = (SEMI_SUPERVISED, SELF_DISTILLATION, DOMAIN_TRANSFER)
SEARCH_MODELS = ("pretrained", "fine-tuned")
ARTIFACT = "silver_pairs.json"
ARTIFACT_VERSION = 1

# Options the Bi-Encoder accepts for distillation (merged into ``be``'s options by plugins/bi_encoder.py).
OPTIONS: dict[str, Option] = {
    "teacher": Option("", "pair-scoring teacher to distil from, a model spec such as ce or cbe (empty: none)"),
    "sampler": Option("none", "silver-pair sampler (components of kind 'sampler', e.g. bm25, kde-iterative)"),
    "mode": Option(SEMI_SUPERVISED, "student data: gold+silver, silver only (teacher on the gold source), or "
                   "silver only with a teacher trained on teacher_train_on", choices=MODES),
    "teacher_train_on": Option("", "domain-transfer only: the task whose gold pairs train the teacher, e.g. stsb"),
    "top_k": Option(3, "partners per sentence for random / bm25 / semantic-search sampling", type=int),
    "candidates": Option("", "kde samplers: proposal samplers for the candidates joined by '+', e.g. "
                         "semantic-search+random (empty: the sampler's default)"),
    "search_model": Option("pretrained", "semantic search with the backbone as is, or a be fine-tuned on the "
                           "teacher's training source", choices=SEARCH_MODELS),
    "max_silver": Option(-1, "cap on silver pairs (seeded subsample); -1: the profile's training budget, "
                         "0: no cap", type=int),
    "teacher_mlm": Option(False, "domain-adaptive MLM of the teacher on the candidate pairs, then fine-tuning with "
                          "frozen embeddings (thesis 4.3.1; DomainSBERT)", type=bool),
    "student_from_mlm": Option(False, "the student starts from the MLM checkpoint (FullDomainSBERT)", type=bool),
    "mlm_lr": Option(3e-5, "learning rate of the domain-adaptive MLM (thesis 5.4.3)", type=float),
}
DISTILLATION_ONLY = [key for key in OPTIONS if key != "teacher"]


# -- plan-time checks ------------------------------------------------------------------------------------------------
def teacher_spec_text(options: dict[str, Any], frozen_embeddings: bool) -> str:
    text = options["teacher"]
    if frozen_embeddings:
        text += ("," if ":" in text else ":") + "freeze_embeddings=true"
    return text


def validate(spec, registry) -> None:
    """Refuse, before anything trains, a distillation that cannot work; the message says what would."""
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    options = spec.options
    owner = f"model {spec.name!r}"
    target_has_gold = spec.train_on is None or SCORED_PAIRS in _offered_kinds(registry, spec.train_on)
    if not options["teacher"]:
        changed = [key for key in DISTILLATION_ONLY if options[key] != OPTIONS[key].default]
        if changed:
            raise InvalidOptionError(
                f"{owner}: option(s) {', '.join(changed)} only apply to distillation; add teacher=ce or teacher=cbe "
                f"(any pair-scoring model), e.g. {spec.name}:teacher=cbe,{changed[0]}={options[changed[0]]}."
            )
        if not target_has_gold:
            raise IncompatibleError(
                f"{spec.label} trains on scored pairs, and {spec.train_on!r} offers only unlabeled sentences; to "
                f"distil into those sentences use {spec.name}:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb,"
                "sampler=semantic-search+random (thesis 5.4.3), or train on a task with scored pairs, e.g. stsb."
            )
        return
    if spec.train_on is None:
        raise IncompatibleError(
            f"{spec.label} distils on a gold source's sentence pairs; add --train-on TASK (or train_on in the "
            "matrix), e.g. --train-on stsb or --train-on bws-cross-topic."
        )
    profile = get_profile(spec.profile)
    teacher = resolve_model_spec(registry, options["teacher"], profile, spec.backbone)
    teacher_plugin = registry.model(teacher.name)
    if PAIR_SCORER not in reachable_capabilities(teacher_plugin.capabilities):
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot score sentence pairs (it offers "
            f"{', '.join(teacher_plugin.capabilities)}); use a pair scorer: {', '.join(_pair_scorers(registry))}."
        )
    if TRAINABLE not in teacher_plugin.capabilities or SCORED_PAIRS not in teacher_plugin.training_kinds:
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot be trained on scored pairs; use one of: "
            f"{', '.join(_pair_scorers(registry, trainable=True))}."
        )
    if teacher.options.get("teacher"):
        raise IncompatibleError(f"teacher {options['teacher']!r} is itself a distilled model; use a plain teacher.")

    mode = options["mode"]
    if mode == DOMAIN_TRANSFER and not options["teacher_train_on"]:
        raise IncompatibleError(
            f"{spec.label}: mode=domain-transfer trains the teacher on another task; add teacher_train_on=TASK, "
            f"e.g. {spec.name}:teacher={options['teacher']},mode=domain-transfer,teacher_train_on=stsb."
        )
    if mode != DOMAIN_TRANSFER and options["teacher_train_on"]:
        raise IncompatibleError(
            f"{spec.label}: teacher_train_on only applies to mode=domain-transfer (mode={mode} trains the teacher "
            "on the --train-on source); add mode=domain-transfer or drop teacher_train_on."
        )
    if options["teacher_train_on"]:
        _check_scored_pair_source(registry, options["teacher_train_on"], "teacher_train_on")

    sampler = _sampler(registry, options["sampler"])
    candidate_names = [n for n in options["candidates"].split("+") if n] if options["candidates"] else []
    if candidate_names and not _selects_from_candidates(sampler):
        raise InvalidOptionError(
            f"{spec.label}: candidates=... only applies to samplers that select among candidates "
            f"({', '.join(_selection_samplers(registry))}); sampler {options['sampler']!r} proposes its own pairs."
        )
    for name in candidate_names:
        if _selects_from_candidates(_sampler(registry, name)):
            selecting = _selection_samplers(registry)
            proposal_samplers = [n for n in registry.component_names("sampler") if n not in selecting]
            raise InvalidOptionError(
                f"{spec.label}: candidates must be proposal samplers; {name!r} selects among candidates itself. "
                f"Use some of: {', '.join(proposal_samplers)}."
            )
    if not target_has_gold and mode != DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: {spec.train_on!r} offers unlabeled sentences only, so mode={mode} has no gold pairs to "
            "train the teacher on; use mode=domain-transfer,teacher_train_on=stsb (or another scored-pair source)."
        )
    if not target_has_gold and options["sampler"] == "none":
        raise IncompatibleError(
            f"{spec.label}: sampler none re-annotates gold pairs, and {spec.train_on!r} has none; pair its sentences "
            "with sampler=semantic-search+random (thesis 5.4.3), semantic-search, bm25 or random."
        )
    if getattr(sampler, "uses_gold_scores", False) and mode == DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: sampler {options['sampler']!r} matches the target's gold score distribution, which "
            "domain transfer must not use; choose mode=semi-supervised or a sampler such as bm25, "
            "semantic-search, random or none."
        )
    if options["top_k"] < 1:
        raise InvalidOptionError(f"{spec.label}: top_k must be at least 1, got {options['top_k']}.")
    if options["max_silver"] < -1:
        raise InvalidOptionError(f"{spec.label}: max_silver is -1 (profile budget), 0 (no cap) or a positive cap.")
    if options["student_from_mlm"] and not options["teacher_mlm"]:
        raise IncompatibleError(
            f"{spec.label}: student_from_mlm=true starts the student from the teacher's domain-adapted MLM "
            "checkpoint; add teacher_mlm=true (FullDomainSBERT) or drop student_from_mlm."
        )
    if options["teacher_mlm"] and "freeze_embeddings" not in teacher_plugin.options:
        able = [name for name, plugin in sorted(registry.models.items()) if "freeze_embeddings" in plugin.options]
        raise IncompatibleError(
            f"{spec.label}: teacher_mlm=true fine-tunes the teacher with a frozen embedding layer, but teacher "
            f"{teacher.name!r} has no option freeze_embeddings; use a teacher that has it: "
            f"{', '.join(able) or '(none)'}."
        )
    if options["teacher_mlm"]:
        resolve_model_spec(registry, teacher_spec_text(options, True), profile, spec.backbone)


def _pair_scorers(registry, trainable: bool = False) -> list[str]:
    return sorted(
        name for name, plugin in registry.models.items()
        if PAIR_SCORER in plugin.capabilities
        and (not trainable or (TRAINABLE in plugin.capabilities and SCORED_PAIRS in plugin.training_kinds))
    )


def _sampler(registry, name: str):
    return registry.component("sampler", name)  # unknown names: close matches and the list of samplers


def _selects_from_candidates(sampler) -> bool:
    return bool(getattr(sampler, "selects_from_candidates", False))


def _selection_samplers(registry) -> list[str]:
    names = registry.component_names("sampler")
    return [name for name in names if _selects_from_candidates(registry.component("sampler", name))]


def _offered_kinds(registry, source: str) -> tuple[str, ...]:
    from harness.spec import resolve_task_specs

    specs = resolve_task_specs(registry, source)
    return registry.task(specs[0].name).metadata.training_kinds if len(specs) == 1 else ()


def _check_scored_pair_source(registry, source: str, option: str) -> None:
    from harness.spec import resolve_task_specs

    specs = resolve_task_specs(registry, source)
    sources = sorted(n for n, p in registry.tasks.items() if SCORED_PAIRS in p.metadata.training_kinds)
    if len(specs) != 1:
        raise IncompatibleError(f"{option}={source!r} names a task family; name one task of it: "
                                f"{', '.join(s.name for s in specs)}.")
    if SCORED_PAIRS not in registry.task(specs[0].name).metadata.training_kinds:
        raise IncompatibleError(
            f"{option}={source!r} offers no scored sentence pairs to train a teacher on; sources that would work: "
            f"{', '.join(sources) or '(none installed)'}.{close_matches_hint(source, sources)}"
        )


# -- the pipeline ----------------------------------------------------------------------------------------------------
@dataclass
class DistillationReport:
    """The student's TrainReport plus what the pipeline did (stored in training.json and in cell records)."""

    student: Any
    details: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        record = self.student.as_record() if hasattr(self.student, "as_record") else dict(self.student)
        return {**record, "augmented_sbert": self.details}


def _log(message: str) -> None:
    print(message, flush=True)


def distill(student, splits, ctx) -> DistillationReport:
    """Augmented SBERT for ``student`` (a BiEncoder with ``fit_pairs``) on the gold source in ``splits``."""
    from harness.plugins.samplers import SamplingInput

    options = ctx.options
    mode = options["mode"]
    gold_source = ctx.train_on or splits.source
    teacher_source = options["teacher_train_on"] or gold_source
    started = time.perf_counter()

    if splits.kind == UNLABELED_SENTENCES:
        # Domain transfer into unlabeled target sentences (validate allows nothing else): no gold pairs or scores.
        gold = ScoredPairs([], [], np.zeros(0, dtype=np.float32))
        sentences = list(dict.fromkeys(splits.train.sentences))
    else:
        gold = splits.train
        sentences = gold.sentences()
    row_of = {text: row for row, text in enumerate(sentences)}
    gold_pairs = [(row_of[a], row_of[b]) for a, b in zip(gold.first, gold.second)]
    sampler = ctx.component("sampler", options["sampler"])
    candidate_names = tuple(n for n in options["candidates"].split("+") if n) or None

    search_model: dict[str, Any] = {}

    def embed(texts):
        # Built on first use: only semantic-search sampling needs a Bi-Encoder.
        if "model" not in search_model:
            search_source = teacher_source if options["search_model"] == "fine-tuned" else None
            search_model["model"] = ctx.trained_model("be", train_on=search_source)
        return search_model["model"].encode(texts)

    inputs = SamplingInput(
        sentences=sentences, gold_pairs=gold_pairs, top_k=options["top_k"], seed=ctx.seed, embed=embed,
        sampler=lambda name: ctx.component("sampler", name), candidates=candidate_names,
    )
    candidates = sampler.propose(inputs)
    if not candidates:
        raise IncompatibleError(
            f"sampler {options['sampler']!r} found no candidate pairs among {len(sentences)} target sentences of "
            f"{gold_source!r}; use a larger training source or another sampler."
        )
    first = [sentences[i] for i, _ in candidates]
    second = [sentences[j] for _, j in candidates]
    _log(f"  augmented sbert: {len(candidates)} candidate pairs from sampler {options['sampler']} "
         f"({len(sentences)} target sentences of {gold_source})")

    mlm_dir = None
    if options["teacher_mlm"]:
        from harness.plugins.domain_mlm import domain_adapted_backbone

        mlm_dir = domain_adapted_backbone(
            _mlm_directory(ctx, first, second), ctx.backbone, first, second, profile=ctx.profile, seed=ctx.seed,
            device=ctx.device, progress=ctx.progress, learning_rate=options["mlm_lr"], log=_log,
        )
    teacher_text = teacher_spec_text(options, frozen_embeddings=options["teacher_mlm"])
    teacher = ctx.trained_model(teacher_text, train_on=teacher_source,
                                backbone=str(mlm_dir) if mlm_dir is not None else None)
    candidate_scores = np.asarray(as_pair_scorer(teacher).score(first, second), dtype=np.float64)

    selection_rng = np.random.default_rng([ctx.seed, 7])
    kept = np.asarray(sampler.select(candidate_scores, gold.scores, selection_rng), dtype=int)
    limit = _silver_limit(options["max_silver"], ctx.profile)
    if limit is not None and len(kept) > limit:
        kept = np.sort(np.random.default_rng([ctx.seed, 11]).choice(kept, size=limit, replace=False))
    silver = ScoredPairs([first[i] for i in kept], [second[i] for i in kept], candidate_scores[kept])

    artifact = _write_artifact(ctx, options, gold_source, teacher_source, teacher_text, mlm_dir, gold, sentences,
                               candidates, candidate_scores, kept)
    if options["student_from_mlm"]:
        from harness.encoding import load_transformer

        # FullDomainSBERT: the student starts from the MLM-adapted encoder (saved without its MLM head).
        adapted = load_transformer(str(mlm_dir))
        student.encoder.transformer.load_state_dict(adapted.state_dict())
    train = _concat(gold, silver) if mode == SEMI_SUPERVISED else silver
    _log(f"  augmented sbert: {len(silver)} silver pairs kept; student trains on {len(train)} pairs ({mode})")
    preparation_seconds = time.perf_counter() - started
    report = student.fit_pairs(train, splits.dev, ctx, description="training be (distilled)")
    details = {
        "mode": mode, "teacher": teacher_text, "teacher_train_on": teacher_source, "gold_source": gold_source,
        "sampler": options["sampler"], "candidates": len(candidates), "silver": len(silver),
        "gold": len(gold), "student_examples": len(train), "domain_mlm_backbone": str(mlm_dir) if mlm_dir else None,
        "student_from_mlm": options["student_from_mlm"], "silver_artifact": str(artifact) if artifact else None,
        "preparation_seconds": round(preparation_seconds, 3),
    }
    return DistillationReport(report, details)


def _silver_limit(max_silver: int, profile) -> int | None:
    if max_silver == 0:
        return None
    if max_silver > 0:
        return max_silver
    return profile.max_train_examples


def _concat(gold: ScoredPairs, silver: ScoredPairs) -> ScoredPairs:
    return ScoredPairs(gold.first + silver.first, gold.second + silver.second,
                       np.concatenate([gold.scores, silver.scores.astype(np.float32)]))


def _mlm_directory(ctx, first, second) -> Path:
    """Shared by every student whose MLM would be identical (same backbone, pairs, budgets, seed): DomainSBERT and
    FullDomainSBERT reuse one MLM checkpoint, and so one teacher checkpoint."""
    key = stable_hash({
        "backbone": ctx.backbone, "pairs": stable_hash([first, second]), "profile": ctx.profile.as_record(),
        "mlm_lr": ctx.options["mlm_lr"], "seed": ctx.seed,
    }, 16)
    if ctx.work_dir is not None:
        # work_dir is <results>/artifacts/<model-key>/seed-<seed>; the MLM checkpoint sits beside the model
        # checkpoints, under a key of its own so that every student with the same MLM inputs finds it.
        base = Path(ctx.work_dir).resolve().parents[2] / CHECKPOINTS
    else:
        base = Path.cwd() / CHECKPOINTS
    return base / f"domain-mlm-{key}" / f"seed-{ctx.seed}"


def _write_artifact(ctx, options, gold_source, teacher_source, teacher_text, mlm_dir, gold, sentences, candidates,
                    candidate_scores, kept) -> Path | None:
    if ctx.work_dir is None:
        return None
    kept_set = set(kept.tolist())
    payload = {
        "artifact": "augmented-sbert-silver-pairs",
        "version": ARTIFACT_VERSION,
        "mode": options["mode"],
        "sampler": options["sampler"],
        "candidate_samplers": options["candidates"] or None,
        "teacher": teacher_text,
        "teacher_train_on": teacher_source,
        "gold_source": gold_source,
        "teacher_mlm": options["teacher_mlm"],
        "domain_mlm_backbone": str(mlm_dir) if mlm_dir else None,
        "backbone": ctx.backbone,
        "profile": ctx.profile.name,
        "seed": ctx.seed,
        "top_k": options["top_k"],
        "gold_scores": [round(float(s), 6) for s in gold.scores],
        "sentences": sentences,
        # One row per candidate: index of the first and second sentence, teacher score, kept as silver (0/1).
        "columns": ["first", "second", "teacher_score", "kept"],
        "pairs": [[i, j, round(float(score), 6), int(row in kept_set)]
                  for row, ((i, j), score) in enumerate(zip(candidates, candidate_scores))],
    }
    path = Path(ctx.work_dir) / ARTIFACT
    atomic_write_text(path, json.dumps(payload, separators=(",", ":")) + "\n")
    return path


# -- figure 6.4: silver score densities --------------------------------------------------------------------------------
def read_silver_artifacts(results_dir: Path) -> list[dict]:
    from harness.store import ARTIFACTS

    artifacts = []
    for path in sorted(Path(results_dir).glob(f"{ARTIFACTS}/*/seed-*/{ARTIFACT}")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a damaged artifact is skipped rather than breaking every plot
        if payload.get("artifact") == "augmented-sbert-silver-pairs":
            payload["_path"] = str(path)
            artifacts.append(payload)
    return artifacts


def _series_label(artifact: dict) -> str:
    label = artifact["sampler"]
    if artifact.get("candidate_samplers"):
        label += f" ({artifact['candidate_samplers']} candidates)"
    if artifact.get("teacher_mlm"):
        label += " [MLM teacher]"
    return label


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text).strip("-")


def draw_silver_density(results_dir: Path, output_dir: Path) -> list[Path]:
    """Thesis figure 6.4: per gold source and teacher, the density of teacher scores on the silver pairs of each
    sampler (seeds pooled) against the density of the gold scores. One PNG per (gold source, teacher, mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.errors import HarnessError
    from harness.plugins.samplers import GaussianKde

    artifacts = read_silver_artifacts(results_dir)
    if not artifacts:
        raise HarnessError(
            f"no silver-pair artifacts under {Path(results_dir) / 'artifacts'}; run a distilled model first, e.g. "
            "`harness run --models be:teacher=cbe,sampler=kde-iterative --train-on bws-cross-topic --tasks "
            f"bws-cross-topic --results {results_dir}`."
        )
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for artifact in artifacts:
        groups.setdefault((artifact["gold_source"], artifact["teacher"], artifact["mode"]), []).append(artifact)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (gold_source, teacher, mode), members in sorted(groups.items()):
        series: dict[str, list[float]] = {}
        gold_scores: dict[int, list[float]] = {}
        for artifact in members:
            kept_scores = [row[2] for row in artifact["pairs"] if row[3]]
            series.setdefault(_series_label(artifact), []).extend(kept_scores)
            gold_scores.setdefault(artifact["seed"], artifact["gold_scores"])
        gold = [s for scores in gold_scores.values() for s in scores]
        everything = gold + [s for scores in series.values() for s in scores]
        if len(everything) < 2:
            continue
        grid = np.linspace(min(everything) - 0.1, max(everything) + 0.1, 400)
        figure, axes = plt.subplots(figsize=(7, 4.5))
        if len(gold) >= 2:  # unlabeled targets (domain transfer into plain sentences) have no gold scores
            axes.plot(grid, GaussianKde(gold)(grid), color="black", linewidth=2.5, label=f"gold ({len(gold)} pairs)")
        for label, scores in sorted(series.items()):
            if len(scores) >= 2:
                axes.plot(grid, GaussianKde(scores)(grid), linewidth=1.5, label=f"{label} ({len(scores)} pairs)")
        seeds = sorted({a["seed"] for a in members})
        axes.set_title(f"Silver-pair teacher scores vs gold: {gold_source}, teacher {teacher} ({mode})", fontsize=10)
        axes.set_xlabel("score (gold, or teacher score on silver pairs)")
        axes.set_ylabel(f"density (Gaussian KDE; seeds pooled: {', '.join(map(str, seeds))})")
        axes.legend(fontsize=8)
        figure.tight_layout()
        path = output_dir / f"silver-density-{_slug(gold_source)}-{_slug(teacher)}-{mode}.png"
        figure.savefig(path, dpi=120)
        plt.close(figure)
        written.append(path)
    return written


@hookimpl
def register_components(register):
    register(Component(
        "plot", "silver-density", draw_silver_density,
        "thesis figure 6.4: teacher-score density of each sampler's silver pairs vs the gold scores",
    ))
