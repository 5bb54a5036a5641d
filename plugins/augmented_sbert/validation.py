"""Plan-time checks of an ``augsbert`` spec (Thakur et al. 2021; thesis 4.3, 4.4, 5.3-5.6): a distillation that
cannot work is refused before anything trains, in one line that says what would work.
"""

from __future__ import annotations

from harness import (
    EMBEDDER,
    LABELED_SENTENCES,
    PAIR_SCORER,
    SCORED_PAIRS,
    TRAINABLE,
    IncompatibleError,
    InvalidOptionError,
    close_matches_hint,
)
from harness.blocks import DEFAULT_DELIMITER, SamplingInput, TopicPromptError, check_delimiter

from .options import DOMAIN_TRANSFER, OPTIONS, ORIGINAL, teacher_spec_text


def validate(spec, registry) -> None:
    """Refuse, before anything trains, a distillation that cannot work; the message says what would."""
    # Spec resolution is the core's; the public API has no name for it yet, so the recipe borrows the runner's.
    from harness import get_profile, resolve_model_spec

    options = spec.options
    target_has_gold = SCORED_PAIRS in _offered_kinds(registry, spec.train_on)
    if not options["teacher"]:
        raise InvalidOptionError(
            f"recipe {spec.name!r} distils a teacher into its student; add teacher=ce or teacher=cbe (any "
            f"pair-scoring model: {', '.join(_pair_scorers(registry, trainable=True)) or '(none installed)'}), "
            f"e.g. {spec.name}:teacher=cbe,sampler=bm25."
        )
    profile = get_profile(spec.profile)
    teacher = resolve_model_spec(registry, options["teacher"], profile, spec.backbone)
    if teacher.recipe:
        raise IncompatibleError(
            f"teacher {options['teacher']!r} is itself a recipe (a distilled model); use a plain teacher such as "
            "ce or cbe."
        )
    teacher_plugin = registry.model(teacher.name)
    if PAIR_SCORER not in _reachable(teacher_plugin.capabilities):
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot score sentence pairs (it offers "
            f"{', '.join(teacher_plugin.capabilities)}); use a pair scorer: {', '.join(_pair_scorers(registry))}."
        )
    if TRAINABLE not in teacher_plugin.capabilities or SCORED_PAIRS not in teacher_plugin.training_kinds:
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot be trained on scored pairs; use one of: "
            f"{', '.join(_pair_scorers(registry, trainable=True))}."
        )

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

    sampler = registry.component("sampler", options["sampler"])  # unknown names: close matches and the list
    candidate_names = [n for n in options["candidates"].split("+") if n] if options["candidates"] else []
    if candidate_names and not _selects_from_candidates(sampler):
        raise InvalidOptionError(
            f"{spec.label}: candidates=... only applies to samplers that select among candidates "
            f"({', '.join(_selection_samplers(registry))}); sampler {options['sampler']!r} proposes its own pairs."
        )
    for name in candidate_names:
        if _selects_from_candidates(registry.component("sampler", name)):
            selecting = _selection_samplers(registry)
            proposal_samplers = [n for n in registry.component_names("sampler") if n not in selecting]
            raise InvalidOptionError(
                f"{spec.label}: candidates must be proposal samplers; {name!r} selects among candidates itself. "
                f"Use some of: {', '.join(proposal_samplers)}."
            )
    _check_search_encoder(spec, registry, sampler, candidate_names, profile)
    if not target_has_gold and mode != DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: {spec.train_on!r} offers sentences but no scored pairs, so mode={mode} has no gold pairs "
            "to train the teacher on; use mode=domain-transfer,teacher_train_on=stsb (or another scored-pair source)."
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
    if options["max_sentences"] < 0:
        raise InvalidOptionError(f"{spec.label}: max_sentences is 0 (all target sentences) or a positive cap.")
    if options["max_sentences"] and target_has_gold:
        raise IncompatibleError(
            f"{spec.label}: max_sentences cuts the sentences of a source without gold pairs; {spec.train_on!r} has "
            "gold pairs, so cut those instead (--set max_train_examples=N)."
        )
    validate_topics(spec, registry)


def validate_topics(spec, registry) -> None:
    """Topic distillation needs labeled sentences, domain transfer and a usable delimiter (thesis 4.4, 5.6)."""
    options = spec.options
    topics = options["topics"]
    if topics == ORIGINAL:
        if options["delimiter"] != DEFAULT_DELIMITER:
            raise InvalidOptionError(f"{spec.label}: delimiter only applies to topics=prompted or topics=hidden.")
        return
    try:
        check_delimiter(options["delimiter"], [])
    except TopicPromptError as exc:
        raise InvalidOptionError(f"{spec.label}: option delimiter: {exc}") from None
    if spec.train_on is None:
        return  # the core asks for --train-on
    if LABELED_SENTENCES not in _offered_kinds(registry, spec.train_on):
        labeled = sorted(
            name for name, plugin in registry.tasks.items() if LABELED_SENTENCES in plugin.metadata.training_kinds
        )
        raise IncompatibleError(
            f"{spec.label}: topics={topics} distils the topic labels of labeled sentences, and {spec.train_on!r} "
            f"offers none; train on a source that does: {', '.join(labeled) or '(none installed)'}."
        )
    if options["mode"] != DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: topics={topics} pairs the labeled sentences and scores them with a teacher trained on "
            "another source (thesis 5.6.1: a CBE trained on STS-B); add mode=domain-transfer,teacher_train_on=stsb."
        )


def _check_search_encoder(spec, registry, sampler, candidate_names: list[str], profile) -> None:
    """Option search_encoder: used only by samplers that embed sentences (refused elsewhere unless at its default);
    it must embed, and learn from scored pairs when search_model=fine-tuned trains it on the teacher's source."""
    from harness import resolve_model_spec

    options = spec.options
    text = options["search_encoder"]
    inputs = SamplingInput(
        [], [], sampler=lambda name: registry.component("sampler", name), candidates=tuple(candidate_names) or None
    )
    if not sampler.uses_embedder(inputs):
        if text != OPTIONS["search_encoder"].default:
            raise InvalidOptionError(
                f"{spec.label}: search_encoder only applies to samplers that embed sentences (semantic-search, or a "
                f"kde sampler with semantic-search candidates); sampler {options['sampler']!r} does not, so drop it."
            )
        return
    encoder = resolve_model_spec(registry, text, profile, spec.backbone)
    plugin = None if encoder.recipe else registry.model(encoder.name)
    if plugin is None or EMBEDDER not in _reachable(plugin.capabilities):
        raise IncompatibleError(
            f"{spec.label}: search_encoder={text!r} cannot embed sentences for semantic search; use a plain "
            "embedding model such as be."
        )
    if options["search_model"] == "fine-tuned" and (
        TRAINABLE not in plugin.capabilities or SCORED_PAIRS not in plugin.training_kinds
    ):
        raise IncompatibleError(
            f"{spec.label}: search_model=fine-tuned trains search_encoder={text!r} on the teacher's scored pairs, "
            "which it cannot learn from; use search_model=pretrained or an encoder trainable on scored pairs (be)."
        )


def _reachable(capabilities) -> set[str]:
    from harness import reachable_capabilities  # what the core's adapters make of them

    return reachable_capabilities(capabilities)


def _pair_scorers(registry, trainable: bool = False) -> list[str]:
    return sorted(
        name
        for name, plugin in registry.models.items()
        if PAIR_SCORER in plugin.capabilities
        and (not trainable or (TRAINABLE in plugin.capabilities and SCORED_PAIRS in plugin.training_kinds))
    )


def _selects_from_candidates(sampler) -> bool:
    return bool(getattr(sampler, "selects_from_candidates", False))


def _selection_samplers(registry) -> list[str]:
    names = registry.component_names("sampler")
    return [name for name in names if _selects_from_candidates(registry.component("sampler", name))]


def _offered_kinds(registry, source: str | None) -> tuple[str, ...]:
    """Training kinds the (single-task) source offers; () for none or a family (the core refuses both)."""
    from harness import resolve_task_specs

    if source is None:
        return ()
    specs = resolve_task_specs(registry, source)
    return registry.task(specs[0].name).metadata.training_kinds if len(specs) == 1 else ()


def _check_scored_pair_source(registry, source: str, option: str) -> None:
    from harness import resolve_task_specs

    specs = resolve_task_specs(registry, source)
    sources = sorted(n for n, p in registry.tasks.items() if SCORED_PAIRS in p.metadata.training_kinds)
    if len(specs) != 1:
        raise IncompatibleError(
            f"{option}={source!r} names a task family; name one task of it: {', '.join(s.name for s in specs)}."
        )
    if SCORED_PAIRS not in registry.task(specs[0].name).metadata.training_kinds:
        raise IncompatibleError(
            f"{option}={source!r} offers no scored sentence pairs to train a teacher on; sources that would work: "
            f"{', '.join(sources) or '(none installed)'}.{close_matches_hint(source, sources)}"
        )
