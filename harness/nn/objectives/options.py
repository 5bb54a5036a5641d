"""The options every objective model has, their plan-time check, and what a spec trains: its objectives (the
primary and the auxiliaries of ``aux``), the training setup they train in (thesis 5.4.2: every combination in the
contrastive setup) and that setup's budget (``ModelPlugin.budget_for``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness import (
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    HarnessError,
    IncompatibleError,
    InvalidOptionError,
    Option,
)

from ..noise import DELETION_RATIO, check_deletion_ratio
from ..pooling import POOLING_CHOICES
from .composition import DELETED, OBJECTIVE_KIND, Objective
from .contrastive import DIRECTIONS
from .setups import CONTRASTIVE_SETUP, TrainingSetup, setup_budget

AUX_SEPARATOR = "+"


def require_unlabeled_source(owner: str, spec: Any, registry: Any) -> None:
    """Refuse, at plan time, a spec of a model that learns from unlabeled sentences but names no ``--train-on``
    source: the one-line error lists the installed tasks that offer unlabeled sentences, and ``self``."""
    if spec.train_on is not None:
        return
    sources = sorted(
        name for name, task in registry.tasks.items() if UNLABELED_SENTENCES in task.metadata.training_kinds
    )
    raise IncompatibleError(
        f"{owner} learns from unlabeled sentences; add --train-on TASK "
        f"({', '.join(sources)}) or --train-on self (each task's own train sentences)."
    )


def objective_options(lr: float = 3e-5) -> dict[str, Option]:
    """The options every objective model has (one set, so any objective can be an auxiliary of any model)."""
    return {
        "pooling": Option(
            "cls", "how token states become the sentence vector (the thesis reports both)", choices=POOLING_CHOICES
        ),
        "lr": Option(lr, "AdamW learning rate (thesis 5.4: 3e-5)", type=float, bounds="(0, inf)"),
        "aux": Option("", "auxiliary objectives added to this one, joined by '+', e.g. simcse or nm", type=str),
        "aux_weight": Option(
            1.0,
            "weight of each auxiliary loss (thesis code: 1, the contrastive term summed over both directions)",
            type=float,
            bounds="[0, inf)",
        ),
        "temperature": Option(0.05, "contrastive temperature tau (scale 1/tau = 20)", type=float, bounds="(0, inf)"),
        "directions": Option(
            "both",
            "contrastive term: one (anchor -> positive, SimCSE eq. 1) or both (plus the "
            "transposed term, the thesis code)",
            choices=DIRECTIONS,
        ),
        "ratio": Option(
            DELETION_RATIO, "word-deletion ratio of the noised view, in (0, 1)", type=float, bounds="(0, 1)"
        ),
        "mlm_probability": Option(
            0.2,
            "share of tokens masked for MLM (thesis code: 0.2, all replaced by [MASK])",
            type=float,
            bounds="(0, 1)",
        ),
        "init": Option("", "start from this unsupervised model spec trained on the same source (e.g. mlm)", type=str),
        # Added in harness 0.3: at their defaults they stay out of the spec hash.
        "select_every": Option(
            0,
            "checkpoint selection: score the dev pairs of select_on every this many steps and "
            "keep the best step (SimCSE: 250 on STS-B dev); 0: keep the last step",
            type=int,
            hash_default=False,
        ),
        "select_on": Option(
            "",
            "the task whose scored-pair dev split select_every scores (cosine, Spearman)",
            type=str,
            hash_default=False,
        ),
        "mlp_head": Option(
            False,
            "contrastive term through a training-only MLP (Linear + tanh) on the pooled "
            "vector (SimCSE's unsupervised setting; thesis code: none)",
            type=bool,
            hash_default=False,
        ),
    }


ALWAYS_READ = ("pooling", "lr", "aux", "init", "select_every", "select_on")


def aux_names(options: Mapping[str, Any]) -> list[str]:
    text = str(options.get("aux") or "").strip()
    return [name.strip() for name in text.split(AUX_SEPARATOR)] if text else []


def _objective(lookup: Callable[[str, str], Any], name: str) -> Objective:
    objective = lookup(OBJECTIVE_KIND, name)
    if not isinstance(objective, Objective):
        raise HarnessError(
            f"component {name!r} of kind {OBJECTIVE_KIND!r} is a {type(objective).__name__}, not a "
            "harness.nn.objectives.Objective; this is a bug in the plugin that registered it."
        )
    return objective


def resolve_objectives(lookup: Callable[[str, str], Any], primary: str, options: Mapping[str, Any]) -> list[Objective]:
    """The primary objective followed by the auxiliaries of ``options["aux"]``."""
    return [_objective(lookup, name) for name in [primary, *aux_names(options)]]


def training_setup(objectives: Sequence[Objective]) -> TrainingSetup:
    """An objective alone keeps its own setup; every combination is trained in the contrastive setup (thesis
    5.4.2: only the TSDAE replication ran with the 5.4.1 setup)."""
    return objectives[0].setup if len(objectives) == 1 else CONTRASTIVE_SETUP


def validate_objective_spec(primary: str) -> Callable[[Any, Any], None]:
    """The plan-time check of an objective model's spec (ModelPlugin.validate)."""

    def validate(spec: Any, registry: Any) -> None:
        owner = f"model {spec.label!r}"
        options = spec.options
        known = registry.component_names(OBJECTIVE_KIND)
        names = aux_names(options)
        for name in names:
            if name not in known:
                raise InvalidOptionError(
                    f"{owner}: aux objective {name!r} is not registered; known objectives: "
                    f"{', '.join(known)} (join several with '+')."
                )
        if primary in names or len(set(names)) != len(names):
            raise InvalidOptionError(f"{owner}: aux={options['aux']!r} repeats an objective; name each one once.")
        objectives = [registry.component(OBJECTIVE_KIND, name) for name in [primary, *names]]
        if any(o.views for o in objectives) and DELETED in {v for o in objectives for v in o.views}:
            check_deletion_ratio(options["ratio"], f"{owner}, option ratio")
        if "mlm_probability" in {r for o in objectives for r in o.reads} and not 0 < options["mlm_probability"] < 1:
            raise InvalidOptionError(
                f"{owner}: mlm_probability must lie in (0, 1), e.g. 0.2; got {options['mlm_probability']!r}."
            )
        if not options["temperature"] > 0:
            raise InvalidOptionError(f"{owner}: temperature must be positive, e.g. 0.05; got {options['temperature']}.")
        if not options["lr"] > 0:
            raise InvalidOptionError(f"{owner}: lr must be positive, e.g. 3e-5; got {options['lr']}.")
        check_selection(options, owner, registry)
        plugin = registry.model(spec.name)
        for objective in objectives:
            lacking = sorted(set(objective.options) - set(plugin.options))
            if lacking:
                raise InvalidOptionError(
                    f"{owner}: objective {objective.name!r} needs its own options "
                    f"({', '.join(lacking)}), which this model lacks; train it as the primary "
                    f"objective ({objective.name}:aux=...)."
                )
            if objective.check is not None:
                objective.check(options, owner)
        read = (
            set(ALWAYS_READ)
            | {r for o in objectives for r in (*o.reads, *o.options)}
            | ({"aux_weight"} if names else set())
        )
        ignored = sorted(
            key for key, option in plugin.options.items() if key not in read and options[key] != option.default
        )
        if ignored:
            readers = {key: [n for n in known if key in registry.component(OBJECTIVE_KIND, n).reads] for key in ignored}
            hint = "; ".join(f"{key} is read by {', '.join(readers[key]) or 'aux objectives only'}" for key in ignored)
            raise InvalidOptionError(
                f"{owner}: option(s) {', '.join(ignored)} have no effect on objectives "
                f"{', '.join(o.name for o in objectives)} ({hint}); drop them or add the "
                "objective with aux=...."
            )
        require_unlabeled_source(owner, spec, registry)
        init = str(options.get("init") or "").strip()
        if init:
            from harness.options import parse_spec_text

            init_name, init_options = parse_spec_text(init)
            models = [n for n in known if n in registry.models]
            if init_name not in models:
                raise InvalidOptionError(
                    f"{owner}: init={init!r} must name an unsupervised objective model "
                    f"({', '.join(models)}), trained on the same source."
                )
            if init_options.get("init"):
                raise InvalidOptionError(f"{owner}: init={init!r} itself has an init; chain at most one level.")

    return validate


def objective_budget(objective: Objective) -> Callable[[Mapping[str, Any], str], dict]:
    """``ModelPlugin.budget_for`` of an objective model: the budget of the training setup it trains in (its own
    alone, the contrastive one in any combination, as :func:`training_setup`)."""

    def budget_for(options: Mapping[str, Any], profile_name: str) -> dict[str, Any]:
        setup = CONTRASTIVE_SETUP if aux_names(options) else objective.setup
        return setup_budget(setup, profile_name)

    return budget_for


def check_selection(options: Mapping[str, Any], owner: str, registry: Any) -> None:
    """Options select_every / select_on: a non-negative step count, and a task that offers scored-pair dev data."""
    every, source = int(options["select_every"]), str(options["select_on"]).strip()
    if every < 0:
        raise InvalidOptionError(
            f"{owner}: select_every must be 0 (keep the last step) or a step count, e.g. 250; got {every}."
        )
    if every == 0:
        return
    offering = sorted(name for name, task in registry.tasks.items() if SCORED_PAIRS in task.metadata.training_kinds)
    if source.split(":")[0] not in offering:
        raise InvalidOptionError(
            f"{owner}: select_every={every} scores the dev pairs of select_on, which must name "
            f"a task with scored-pair dev data ({', '.join(offering)}); got {source!r}."
        )
