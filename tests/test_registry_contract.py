"""The plugin contract over the whole registry: every built-in model and recipe through ``harness.testing.check_model``
(on the tiny BERT), every registered task through ``check_task`` (smoke profile, a tiny hashing model).

The parameters come from ``build_registry()``, so a new built-in joins without editing this file; one that cannot be
checked here goes into a skip list with its reason, and the skip lists are checked too (they name only registered
things, and a task skipped for missing data really lacks it)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import harness.testing as ht
from harness import MissingDataError, ModelPlugin, RecipeContext, RecipePlugin
from harness.options import resolve_options
from harness.registry import build_registry
from harness.spec_grammar import parse_spec_text

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REGISTRY = build_registry()
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Options the tiny 2-layer backbone needs (nugget's default layer is 3), and what a recipe needs to train at all.
MODEL_OPTIONS: dict[str, dict[str, Any]] = {
    "nugget": {"layer": 1},
    # The teacher is built untrained on the tiny BERT (see _recipe_as_model): what is checked is the recipe's own
    # pipeline (candidate pairs, teacher scores, the student's training, its checkpoint), not the teacher's quality.
    "augsbert": {"teacher": "ce", "sampler": "bm25"},
}
# Data a task reads that the repository bundles only as a test fixture (the real data is downloaded or licensed).
TASK_DATA_DIRS: dict[str, Path] = {
    "askubuntu": FIXTURES / "useb",
    "cqadupstack": FIXTURES / "useb",
    "scidocs": FIXTURES / "useb",
    "csts": FIXTURES,
}
# The fixtures are small (4 queries per USEB subset): a cut of 2 items, not the check's default 5, shows whether
# evaluate honours the profile's cut there.
FIXTURE_SMALL_CUT = 2
# What is not checked here, and why. Keys are registered names (a ``NAMESPACE:`` key: a task namespace).
SKIPPED_MODELS: dict[str, str] = {}
SKIPPED_TASKS: dict[str, str] = {
    "ukp-sentential-topic": "the UKP Sentential corpus may not be redistributed and no fixture is bundled; "
    "tests/test_ukp_sentential.py writes small corpora of its own",
    "mteb:": "a namespace: its tasks are named at run time and their data downloaded (tests/test_mteb.py checks "
    "them on tests/fixtures/mteb)",
    "beir:": "a namespace: its tasks are named at run time and their data downloaded (tests/test_beir.py checks "
    "them on tests/fixtures/beir)",
}

MODELS = sorted(REGISTRY.models)
RECIPES = sorted(REGISTRY.recipes)
TASKS = sorted(REGISTRY.tasks)


def _params(names: list[str], skipped: dict[str, str]) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.skip(reason=skipped[name])) if name in skipped else name for name in names
    ]


def _backbone(name: str, tiny_bert: str, request: pytest.FixtureRequest) -> str:
    if name in ("st", "st-ce"):  # wrappers of a sentence-transformers folder, not of a plain transformer
        return request.getfixturevalue("st_folders")[name]
    return tiny_bert


@pytest.mark.parametrize("name", _params(MODELS, SKIPPED_MODELS))
def test_every_model_keeps_the_contract(name, tiny_bert, tiny_wordnet, request, tmp_path):
    plugin = REGISTRY.model(name)
    report = ht.check_model(
        name,
        registry=REGISTRY,
        backbone=_backbone(name, tiny_bert, request),
        options=MODEL_OPTIONS.get(name),
        directory=tmp_path,
    )
    assert report.capabilities == plugin.capabilities
    if "embedder" in plugin.capabilities:
        assert report.dimension == 32  # the tiny BERT's width: the model embeds with its backbone
    if "trainable" in plugin.capabilities:  # the kit has tiny data of every training kind: fit/save/load ran
        assert report.checkpoint_files and report.training_report is not None
        json.dumps(report.training_report)


class _RecipeAsModel:
    """A recipe as the runner sees it: built, it is its fresh student; ``fit`` runs the recipe's ``train`` and keeps
    the student it returns; ``save``/``load`` are the student's own. So ``check_model`` checks the recipe's student
    behaviour, its report and its checkpoint round trip exactly as it checks a model."""

    def __init__(self, recipe: RecipePlugin, ctx: Any):
        self.recipe, self.ctx = recipe, ctx
        self.student = self._build_student()

    def _student_plugin(self) -> tuple[ModelPlugin, dict[str, str]]:
        name, raw_options = parse_spec_text(self.ctx.options["student"])
        return REGISTRY.model(name), raw_options

    def _build_student(self, backbone: str | None = None) -> Any:
        plugin, raw_options = self._student_plugin()
        return plugin.factory(
            ht.model_context(
                backbone or self.ctx.backbone,
                raw_options,
                plugin=plugin,
                profile=self.ctx.profile,
                seed=self.ctx.seed,
                registry=REGISTRY,
            )
        )

    def _untrained(self, text: str, train_on: str | None = None, backbone: str | None = None) -> Any:
        name, raw_options = parse_spec_text(text)
        plugin = REGISTRY.model(name)
        return plugin.factory(
            ht.model_context(
                backbone or self.ctx.backbone,
                raw_options,
                plugin=plugin,
                profile=self.ctx.profile,
                seed=self.ctx.seed,
                registry=REGISTRY,
            )
        )

    def __getattr__(self, method: str) -> Any:  # encode, score, encode_spans, ... of the current student
        if method in ("encode", "score", "encode_multi", "encode_spans"):
            return getattr(self.student, method)
        raise AttributeError(method)

    def fit(self, splits, ctx):
        values = {field.name: getattr(ctx, field.name) for field in dataclasses.fields(ctx)}
        values["trained_model"] = self._untrained
        recipe_ctx = RecipeContext(**values, student=ctx.options["student"], build_student=self._build_student)
        self.student, report = self.recipe.train(splits, recipe_ctx)
        return report.as_record() if hasattr(report, "as_record") else report

    def save(self, directory):
        self.student.save(directory)

    def load(self, directory):
        self.student.load(directory)


def _recipe_as_model(recipe: RecipePlugin) -> ModelPlugin:
    student, _ = parse_spec_text(recipe.options["student"].default)
    capabilities = REGISTRY.model(student).capabilities
    return ModelPlugin(
        recipe.name,
        recipe.description,
        lambda ctx: _RecipeAsModel(recipe, ctx),
        capabilities,
        options=recipe.options,
        training_kinds=recipe.training_kinds,
    )


@pytest.mark.parametrize("name", _params(RECIPES, SKIPPED_MODELS))
def test_every_recipe_keeps_the_contract(name, tiny_bert, tmp_path):
    recipe = REGISTRY.recipe(name)
    assert recipe.options["student"].default, f"recipe {name!r} declares no default student; give this test one"
    report = ht.check_model(
        _recipe_as_model(recipe),
        registry=REGISTRY,
        backbone=tiny_bert,
        options=MODEL_OPTIONS.get(name),
        directory=tmp_path,
    )
    assert report.checkpoint_files and report.training_report


@pytest.mark.parametrize("name", _params(TASKS, SKIPPED_TASKS))
def test_every_task_keeps_the_contract(name):
    metadata = REGISTRY.task(name).metadata
    fixture = TASK_DATA_DIRS.get(name)
    report = ht.check_task(name, registry=REGISTRY, data_dir=fixture, small_cut=FIXTURE_SMALL_CUT if fixture else 5)
    assert report.name == metadata.name and report.scores[metadata.main_score] == report.main_score
    assert report.texts_seen > 0
    # Offered training data is either checked or, when only its download is missing, listed as unavailable.
    assert set(report.training_kinds) | set(report.training_kinds_unavailable) == set(metadata.training_kinds)


def test_the_skip_lists_and_settings_name_only_registered_things():
    namespaces = {f"{namespace}:" for namespace in REGISTRY.task_namespaces()}
    assert set(SKIPPED_MODELS) | set(MODEL_OPTIONS) <= set(REGISTRY.models) | set(REGISTRY.recipes)
    assert set(SKIPPED_TASKS) <= set(REGISTRY.tasks) | namespaces
    assert set(TASK_DATA_DIRS) <= set(REGISTRY.tasks)
    assert all(reason.strip() for reason in [*SKIPPED_MODELS.values(), *SKIPPED_TASKS.values()])
    # Every namespace is either checked here or skipped with a reason: none slips through unmentioned.
    assert namespaces <= set(SKIPPED_TASKS)


@pytest.mark.parametrize("name", sorted(set(SKIPPED_TASKS) & set(REGISTRY.tasks)))
def test_a_task_skipped_for_its_data_really_lacks_it(name, tmp_path, monkeypatch):
    """Once its data is bundled, the task leaves the skip list (this fails and says so)."""
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path))  # the user's own downloads do not count
    plugin = REGISTRY.task(name)
    task = plugin.factory(resolve_options(name, plugin.options, {}), tmp_path)
    with pytest.raises(MissingDataError):
        task.check_data()
