"""MTEB in and out: every MTEB task as ``mteb:NAME`` and stored results in MTEB's results layout.

- :mod:`.task`: the ``task-namespace`` component ``mteb`` (``--tasks mteb:STS22,mteb:SciFact``) and the Task that
  runs mteb's own task object and evaluator on a harness model.
- :mod:`.adapters`: harness models behind mteb's encoder and cross-encoder protocols.
- :mod:`.results`: the ``results-format`` component ``mteb`` (``harness export-results --format mteb --to DIR``)
  and the documented mapping of harness tasks to their MTEB counterparts.

Reference: mteb 2 (https://github.com/embeddings-benchmark/mteb), imported only when an mteb task or export runs
(importing it takes seconds), so ``harness list`` stays fast and works without mteb installed.
"""

from __future__ import annotations

from pathlib import Path

from harness import Component, hookimpl

from .task import MtebNamespace


def write_mteb_results(records: list[dict], output_dir: Path) -> list[Path]:
    """``harness export-results --format mteb``: see :mod:`.results` (mteb is imported there, on use)."""
    from .results import write_mteb_results as write

    return write(records, output_dir)


def read_mteb_results(folder: Path) -> tuple[list[dict], list[tuple[Path, str]]]:
    """``harness.load_results(exported={"mteb": folder})``: the rows of a folder the export wrote (.results)."""
    from .results import read_mteb_results as read

    return read(folder)


write_mteb_results.read_results = read_mteb_results  # type: ignore[attr-defined]  # the format reads back too


@hookimpl
def register_components(register):
    namespace = MtebNamespace()
    register(Component("task-namespace", "mteb", namespace, namespace.description))
    register(
        Component(
            "results-format",
            "mteb",
            write_mteb_results,
            "MTEB's results layout (results/<model>/<revision>/<Task>.json, mteb.ResultCache reads it)",
        )
    )
