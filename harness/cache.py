"""The store's shared cache folder as plugins see it (``ctx.cache``): content-addressed entries that every spec in a
store may reuse, each named ``<kind>-<content key>`` where the key is a hash of everything that determines it.

Two kinds of entry: a checksummed bytes file (:meth:`ArtifactCache.bytes_entry`, :meth:`ArtifactCache.array_entry`;
its side file names what it was made from, and an edited, damaged or swapped file is computed again, never used) and
a folder another building block fills and verifies itself (:meth:`ArtifactCache.folder`, e.g. a domain-adapted MLM
checkpoint, thesis 4.3.1). Augmented SBERT (Thakur et al. 2021; thesis 4.3) keeps its teacher scores and MLM
checkpoints here. Entry names and formats are part of the store: a key computed by :func:`content_key` must stay what
it was, so existing caches keep hitting.

Deviations: none (no paper describes a cache).
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .files import atomic_write_json, cached_bytes, temporary_prefix
from .fingerprint import stable_hash
from .store_files import UnsafeFileError, read_store_json, remove_store_tree

logger = logging.getLogger(__name__)
FOLDER_MADE_FROM = "MADE_FROM.json"  # in a folder entry: the payload its key was computed from


def content_key(payload: Any, length: int = 16) -> str:
    """:func:`harness.fingerprint.stable_hash` of ``payload``, 16 hex digits unless told: the same payload always
    names the same entry."""
    return stable_hash(payload, length)


class ArtifactCache:
    """Content-addressed entries under ``root`` (the store's ``cache/`` folder, ``ModelContext.cache_dir``)."""

    content_key = staticmethod(content_key)

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ArtifactCache({str(self.root)!r})"

    def entry_path(self, kind: str, payload: Any, suffix: str = "") -> Path:
        """``<root>/<kind>-<content key of payload><suffix>``."""
        return self.root / f"{kind}-{content_key(payload)}{suffix}"

    def bytes_entry(
        self,
        path: Path,
        compute: Callable[[], bytes],
        check: Callable[[bytes], bool] | None = None,
        what: str = "cache entry",
        made_from: Any = None,
    ) -> tuple[bytes, bool]:
        """The verified content of the entry file ``path`` (under ``root``), else ``compute()`` written there
        atomically with its sha256 and ``made_from`` (the payload its key was computed from; default: its file
        name); returns ``(content, True if it came from the cache)``. An entry whose checksum does not match, that
        names another payload (copied over this one) or that ``check`` rejects is logged and computed again."""
        return cached_bytes(path, compute, check, what=what, made_from=made_from, root=self.root)

    def array_entry(
        self,
        path: Path,
        compute: Callable[[], Any],
        check: Callable[[Any], bool] | None = None,
        what: str = "cache entry",
        made_from: Any = None,
    ) -> tuple[Any, bool]:
        """:meth:`bytes_entry` for a numpy array stored as ``.npy`` (never pickled); ``check`` sees the array."""
        import numpy as np

        def compute_bytes() -> bytes:
            buffer = io.BytesIO()
            np.save(buffer, np.asarray(compute()), allow_pickle=False)
            return buffer.getvalue()

        def holds_an_array(content: bytes) -> bool:
            try:
                array = np.load(io.BytesIO(content), allow_pickle=False)
            except (ValueError, OSError, EOFError):
                return False
            return check is None or bool(check(array))

        content, from_cache = self.bytes_entry(path, compute_bytes, holds_an_array, what=what, made_from=made_from)
        return np.load(io.BytesIO(content), allow_pickle=False), from_cache

    def folder(self, kind: str, payload: Any) -> Path:
        """``<root>/<kind>-<content key of payload>``: a folder entry whose writer fills it atomically and checks its
        own files. Like every entry it names what it was made from (``MADE_FROM.json`` inside it, so it travels with
        a copy): a folder that names another payload (copied over this one) is moved aside and removed, so the
        writer builds it again. A folder without the file (an earlier harness) is adopted."""
        folder = self.entry_path(kind, payload)
        marker = folder / FOLDER_MADE_FROM
        asked = json.loads(json.dumps(payload, sort_keys=True, default=str))
        try:
            named = read_store_json(marker, self.root)
        except FileNotFoundError:
            named = None
        except (OSError, UnicodeDecodeError, ValueError, UnsafeFileError):  # a FIFO or a link out: never read
            named = {"unreadable": True}
        if named is not None and named != asked:
            logger.warning(
                "cache folder %s was made from something other than what its name asks for (copied over "
                "another entry?); building it again",
                folder,
            )
            aside = folder.with_name(temporary_prefix(folder.name) + "stale")
            os.replace(folder, aside)  # a link in the folder's place is moved as a link: its target stays
            remove_store_tree(aside, self.root)
            named = None
        if named is None:
            atomic_write_json(marker, asked, self.root)
        return folder
