"""USEB, the Unsupervised Sentence Embedding Benchmark: AskUbuntu, CQADupStack, TwitterPara, SciDocs.

Reference: Wang, Reimers & Gurevych 2021, "TSDAE" (arXiv 2104.06979), which introduced USEB; thesis section 3.2
(table 3.4) and table 6.10. The protocol is the public ``useb`` package 0.0.1 (UKPLab/useb,
``useb/evaluators``); ``tests/test_useb.py`` runs that package and these tasks on the same embeddings and requires
equal numbers (scores x100, unrounded; useb rounds to two decimals).

One module per member (``askubuntu``, ``cqadupstack``, ``twitterpara``, ``scidocs``; each documents its protocol and
deviations), ``data`` (where the files are, reading them as useb does), ``base`` (what the members share). Metrics,
search, BM25 and the first stage are the shared ``harness.evaluation`` layer. Every member scores pairs through
``harness.as_pair_scorer`` (cross-encoders directly; embedders by cosine, each distinct text encoded once). The smoke
profile evaluates a seeded sample (``harness.evaluation.sampling``) of ``max_eval_examples`` queries/pairs per
sub-dataset.

Data: useb's ``data-eval/`` (evaluation) and ``data-train/<domain>/unsupervised/train.txt`` (unlabelled in-domain
sentences, offered as ``unlabeled_sentences`` training data). This module registers the four tasks and the
downloadable dataset ``useb`` (``harness data download useb``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from harness import Archive, ArchiveDataset, Component, Task, TaskPlugin, hookimpl

from .askubuntu import AskUbuntu
from .cqadupstack import CQADupStack
from .data import DATASET_NAME
from .scidocs import SciDocs
from .twitterpara import TwitterPara

logger = logging.getLogger(__name__)

TASKS: tuple[type[Task], ...] = (AskUbuntu, CQADupStack, TwitterPara, SciDocs)

# The official archives, as in useb 0.0.1's `useb/downloading.py`. UKP publishes no checksum or size for them, so
# the download verifies every zip member's CRC-32 and records the sha256 it saw in the dataset's manifest.
USEB_ARCHIVES: tuple[Archive, ...] = (
    Archive("https://public.ukp.informatik.tu-darmstadt.de/kwang/unsupse-benchmark/tsdae-evaluation/data-eval.zip"),
    Archive("https://public.ukp.informatik.tu-darmstadt.de/kwang/unsupse-benchmark/tsdae-evaluation/data-train.zip"),
)


def useb_dataset(archives: Sequence[Archive] = USEB_ARCHIVES) -> ArchiveDataset:
    """The downloadable USEB data (data-eval + data-train), from ``archives`` (the official ones by default)."""
    return ArchiveDataset(
        name=DATASET_NAME,
        description="USEB data-eval (AskUbuntu, CQADupStack, TwitterPara, SciDocs) and data-train (unlabelled "
        "sentences), official UKP archives; no published checksum: zip CRCs verified",
        archives=tuple(archives),
        license="per dataset: see https://github.com/UKPLab/useb and the original datasets",
    )


def task_plugins() -> list[TaskPlugin]:
    """The four members as the registry wraps them (for callers that build tasks without a registry)."""
    return [TaskPlugin.from_class(task_class) for task_class in TASKS]


@hookimpl
def register_tasks(register):
    for task_class in TASKS:
        register(task_class)


@hookimpl
def register_components(register):
    dataset = useb_dataset()
    register(Component("dataset", DATASET_NAME, dataset, dataset.description))
