"""pytest fixtures of the test kit (``tiny_bert``, ``tiny_roberta``, ``smoke_profile``, ``harness_cli``), collected
through ``pytest_plugins = ["harness.testing"]``, which re-exports them; importing this module needs pytest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..api import Profile
from .backbones import tiny_bert, tiny_roberta
from .contexts import HarnessRun, run_harness, smoke_profile


@pytest.fixture(scope="session", name="tiny_bert")
def tiny_bert_fixture(tmp_path_factory: Any) -> str:
    """Path of a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary."""
    return str(tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session", name="tiny_roberta")
def tiny_roberta_fixture(tmp_path_factory: Any) -> str:
    """Path of a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary."""
    return str(tiny_roberta(tmp_path_factory.mktemp("tiny-roberta")))


@pytest.fixture(name="smoke_profile")
def smoke_profile_fixture() -> Profile:
    """The smoke profile."""
    return smoke_profile()


@pytest.fixture(name="harness_cli")
def harness_cli_fixture() -> Callable[..., HarnessRun]:
    """:func:`run_harness`: runs the harness command in-process with a fresh registry."""
    return run_harness
