"""The Hugging Face Hub when it cannot be reached: fail in seconds, in one line that names the offline setting.

Without a network, huggingface_hub retries every request five times with back-off (about 23 s and a dozen
"Retrying in 8s" lines per file) before transformers, datasets or mteb give up. Before the first such request the
harness asks once per process whether the Hub's host answers (:func:`hub_reachable`: a TCP connection with a
3-second timeout); when it does not, it switches the process to offline mode (:func:`use_local_cache_only`, what
``HF_HUB_OFFLINE=1`` does), so what is in the local cache still loads and everything else fails at once.
:func:`check_backbone` is the plan-time check of a ``--backbone``.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

from .errors import HarnessError

logger = logging.getLogger(__name__)

OFFLINE_SETTING = "HF_HUB_OFFLINE=1"
PROBE_TIMEOUT = 3.0  # seconds to open a TCP connection to the Hub's host
_TRUE = ("1", "true", "yes", "on")
_reachable: bool | None = None  # the answer of the one probe of this process
_switched = False  # this process turned offline mode on itself (the Hub could not be reached)


class BackboneNotFoundError(HarnessError):
    """A ``--backbone`` that is neither a usable local folder nor a Hub id this machine can get."""


def offline_requested() -> bool:
    """The user asked for offline mode (HF_HUB_OFFLINE, or HF_DATASETS_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(
        os.environ.get(name, "").strip().lower() in _TRUE
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_reachable() -> bool:
    """Whether the Hub's host accepts a TCP connection within PROBE_TIMEOUT (asked once per process; False in
    offline mode). Proxies are honoured by not probing: with HTTPS_PROXY set the answer is True."""
    global _reachable
    if offline_requested():
        return False
    if _reachable is None:
        if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
            _reachable = True
        else:
            parsed = urlparse(hub_endpoint())
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            try:
                socket.create_connection((parsed.hostname or "huggingface.co", port), timeout=PROBE_TIMEOUT).close()
                _reachable = True
            except OSError as exc:
                logger.debug(
                    "%s cannot be reached (%s); only the local Hugging Face cache is used (as %s)",
                    parsed.hostname,
                    exc,
                    OFFLINE_SETTING,
                )
                _reachable = False
        if not _reachable:
            use_local_cache_only()
    return _reachable


def use_local_cache_only() -> None:
    """Switch this process (and the processes it starts) to the Hub's offline mode: loads read the local cache and
    fail at once instead of retrying. Patches the flags of the Hugging Face libraries already imported, which read
    the environment only when they are imported."""
    global _switched
    _switched = _switched or not offline_requested()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    for name in ("huggingface_hub.utils._http", "huggingface_hub.utils"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "HF_HUB_OFFLINE"):
            module.HF_HUB_OFFLINE = True
    hub = sys.modules.get("huggingface_hub")
    offline_mode = getattr(hub, "is_offline_mode", None)
    if offline_mode is not None and "HF_HUB_OFFLINE" in getattr(offline_mode, "__globals__", {}):
        offline_mode.__globals__["HF_HUB_OFFLINE"] = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True
        config.HF_DATASETS_OFFLINE = True


def offline_reason() -> str:
    """Why nothing can be fetched, naming the setting: for the end of a one-line error."""
    if offline_requested() and not _switched:
        return f"offline mode is on: {OFFLINE_SETTING} or HF_DATASETS_OFFLINE is set"
    return (
        f"{urlparse(hub_endpoint()).hostname} cannot be reached, so the harness runs as with {OFFLINE_SETTING}, "
        "from the local cache only"
    )


def _cached_in_hub(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # an id huggingface_hub refuses (bad characters): not cached
        return False
    return isinstance(found, str)


def _looks_like_path(location: str) -> bool:
    return location.startswith((".", "/", "~")) or "\\" in location or location.count("/") > 1


def check_backbone(location: str) -> str:
    """Refuse, in one line, a backbone that cannot load: a local folder needs ``config.json`` and safetensors
    weights (a sentence-transformers folder, with ``modules.json``, is left to the model that reads it); a Hub id
    must be in the local cache or the Hub must be reachable. Returns what it is ("folder", "cached hub id",
    "hub id")."""
    folder = Path(location).expanduser()
    if folder.is_dir():
        if (folder / "modules.json").is_file():
            return "folder"
        problems = []
        if not (folder / "config.json").is_file():
            problems.append("no config.json")
        if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.safetensors.index.json")):
            problems.append("no .safetensors weights (pickled weights are never loaded)")
        if problems:
            raise BackboneNotFoundError(
                f"--backbone {location}: {'; '.join(problems)}. Give a Hugging Face model "
                "folder (save_pretrained(..., safe_serialization=True)) or a Hub id."
            )
        return "folder"
    if folder.exists():
        raise BackboneNotFoundError(f"--backbone {location} is a file; give a model folder or a Hub id.")
    if _looks_like_path(location):
        raise BackboneNotFoundError(f"--backbone {location}: no such folder; give a local model folder or a Hub id.")
    reachable = hub_reachable()  # first: an unreachable Hub turns on offline mode, so a cached id loads quietly
    if _cached_in_hub(location):
        return "cached hub id"
    if not reachable:
        raise BackboneNotFoundError(
            f"--backbone {location} is not a local folder nor in the Hugging Face cache, and "
            f"{offline_reason()}; pass a local folder, or download it where there is a "
            "network."
        )
    return "hub id"
