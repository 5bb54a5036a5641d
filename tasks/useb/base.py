"""What the USEB members share: the task base class (data location, unlabelled training sentences, checksum) and
the metadata fields and options common to all four."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from harness import (
    UNLABELED_SENTENCES,
    Option,
    Task,
    TaskMetadata,
    TrainingSplits,
    UnlabeledSentences,
    files_checksum,
)

from .data import DATASET_NAME, REQUIRED_FILES, file_lines, find_eval_dir, find_train_file

logger = logging.getLogger(__name__)

FAMILY = "useb"
REFERENCE = "Wang, Reimers & Gurevych 2021, TSDAE (arXiv 2104.06979), USEB; thesis 3.2, table 6.10"
SOURCE = "official USEB data-eval.zip / data-train.zip (UKP TU Darmstadt), via `harness data download useb`"
SPLIT_OPTION = Option("test", "useb's eval_type: test, or valid (the development queries)", choices=("test", "valid"))


def useb_metadata(
    name: str,
    *,
    description: str,
    main_score: str,
    metric: str,
    dataset_reference: str,
    license: str,
    dataset_source: str = SOURCE,
    version: str = "1",
) -> TaskMetadata:
    """A member's metadata: its own fields plus the family's reference, dataset and training kind."""
    return TaskMetadata(
        name=name,
        family=FAMILY,
        description=description,
        main_score=main_score,
        metric=metric,
        reference=f"{REFERENCE}; {dataset_reference}",
        dataset=DATASET_NAME,
        dataset_source=dataset_source,
        license=license,
        version=version,
        training_kinds=(UNLABELED_SENTENCES,),
    )


class UsebTask(Task):
    """A USEB member: ``member`` names its ``data-eval`` folder; ``bundled`` is a bundled copy of it, if any."""

    member: ClassVar[str]
    bundled: ClassVar[Path | None] = None

    def eval_dir(self) -> Path:
        return find_eval_dir(self.member, self.data_dir, self.bundled)

    def data_files(self) -> list[Path]:
        folder = self.eval_dir()
        return [folder / name for name in REQUIRED_FILES[self.member]]

    def load(self) -> Any:  # pragma: no cover - interface
        """Read and check the member's evaluation data (DataFileError / MissingDataError on problems)."""
        raise NotImplementedError

    def check_data(self) -> str:
        self.load()
        return files_checksum(self.data_files())

    def training_data(self, kind: str, ctx: Any = None) -> TrainingSplits | None:
        if kind != UNLABELED_SENTENCES:
            return None
        path = find_train_file(self.member, self.data_dir)
        sentences = [line.strip() for line in file_lines(path)]
        return TrainingSplits(
            source=self.metadata.name,
            train=UnlabeledSentences([s for s in sentences if s]),
            checksum=files_checksum([path]),
        )
