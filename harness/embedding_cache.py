"""The embedding cache: a text's vector kept in the store and served again whenever the same model encodes the same
text in the same way (mteb's ``CachedEmbeddingWrapper`` does this per model folder; here it is content-addressed).

- **Keyed by content.** An encoder names everything that determines its vectors (its weights' hash, tokenizer,
  pooling, max length, runtime, device, precision and the versions of the code that computes them,
  :func:`software_versions`: :meth:`EmbeddingCache.namespace` of those determinants); a
  text is keyed by the sha256 of its UTF-8 bytes. Two models that differ in one weight never share a vector.
- **Storage.** ``<store>/cache/embeddings/<namespace>/<sha256 of the shard>.safetensors``: one write-once shard per
  encode call that computed something, holding the texts' digests (``uint8 [n, 32]``) and vectors (``[n, d]``),
  with the namespace and a sha256 of both tensors in its metadata. Nothing is pickled.
- **Verified.** A shard whose checksum fails, that cannot be parsed or that names another namespace (copied over) is
  logged, removed, and its texts are computed again.
- **Bounded.** After each write the whole cache is cut to ``HARNESS_EMBEDDING_CACHE_MIB`` (default
  :data:`DEFAULT_LIMIT_MIB`) by removing the least recently used shards first: a shard's modification time is set
  each time it serves a vector, so "used" means read or written (access times are unreliable on ``relatime``
  mounts).
- **Concurrent runs and Ray workers.** Shards are written atomically under a name that is their content's hash and
  never changed afterwards, so two writers cannot produce a half file or overwrite each other; a shard removed by
  another process's eviction while being read is a miss.
- **Scope.** Only evaluation uses it: :func:`evaluation_scope` (the runner, around each cell's evaluation) makes a
  cache active for the code inside it, and :func:`cached_encode` is how an encoder consults it. Training never does
  (its weights change every step), nor does anything outside a scope.

Vectors served from the cache are the bytes that were computed, so a cell whose texts all hit (or all miss) scores
exactly as without the cache; texts computed in a batch with other texts than without the cache can differ in the
last float bit, as any change of batch composition can.

Deviations: none (no paper describes a cache).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidOptionError
from .files import atomic_write_bytes
from .fingerprint import stable_hash
from .store_files import (
    UnsafeFileError,
    list_store_folder,
    read_store_bytes,
    regular_store_file,
    remove_store_file,
    touch_store_file,
)

logger = logging.getLogger(__name__)

FOLDER = "embeddings"  # under the store's cache folder
SHARD_SUFFIX = ".safetensors"
DEFAULT_LIMIT_MIB = 2048.0
LIMIT_VARIABLE = "HARNESS_EMBEDDING_CACHE_MIB"  # the size cap in MiB
MAX_LIMIT_MIB = float(2**30)  # 1 PiB: a larger cap (or inf) would overflow the byte count
SWITCH_VARIABLE = "HARNESS_EMBEDDING_CACHE"  # "0", "off", "no" or "false" turn the cache off by default
OFF_VALUES = ("0", "off", "no", "false")
DIGEST_BYTES = 32


def enabled_by_default() -> bool:
    """Whether runs use the embedding cache unless told otherwise: yes, unless :data:`SWITCH_VARIABLE` says off."""
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower() not in OFF_VALUES


def limit_mib_from_environment() -> float:
    """The cache's size cap in MiB (:data:`LIMIT_VARIABLE`, default :data:`DEFAULT_LIMIT_MIB`); one line if it is
    not a non-negative number."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_LIMIT_MIB
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_LIMIT_MIB:  # also refuses nan and inf
        raise InvalidOptionError(
            f"{LIMIT_VARIABLE} must be a size in MiB, a number from 0 to {MAX_LIMIT_MIB:.0f} "
            f"(default {DEFAULT_LIMIT_MIB:g}), got {text!r}."
        )
    return value


def software_versions(runtime: str = "torch") -> dict[str, str | None]:
    """The versions of the code that computes a vector, part of every encoder's determinants: a new harness, torch or
    transformers (or ONNX Runtime, for an onnx runtime) may compute other floats, so it never reads older vectors."""
    from .environment import package_version

    packages = ["sentence-harness", "torch", "transformers", *(["onnxruntime"] if runtime != "torch" else [])]
    return {name: package_version(name) for name in packages}


def text_digest(text: str) -> bytes:
    """The 32-byte key of a text (sha256 of its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


@dataclass
class CacheCounts:
    """Texts served from the cache (``hits``) and computed (``misses``) inside one :func:`evaluation_scope`."""

    hits: int = 0
    misses: int = 0

    def as_record(self) -> dict[str, bool | int]:
        """What a record's ``timings.embedding_cache`` says of a cell evaluated with the cache on."""
        return {"enabled": True, "hits": self.hits, "misses": self.misses}


class _Shard:
    """A verified shard in memory: its digests' row numbers and its vectors."""

    def __init__(self, path: Path, rows: dict[bytes, int], vectors: np.ndarray):
        self.path, self.rows, self.vectors = path, rows, vectors


def _content_checksum(digests: np.ndarray, vectors: np.ndarray) -> str:
    checksum = hashlib.sha256(np.ascontiguousarray(digests).tobytes())
    checksum.update(str(vectors.dtype).encode() + repr(vectors.shape).encode())
    checksum.update(np.ascontiguousarray(vectors).tobytes())
    return checksum.hexdigest()


def _shard_metadata(content: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file's header (the format: 8 bytes of header length, then JSON)."""
    (length,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8 : 8 + length])
    return dict(header.get("__metadata__") or {})


class EmbeddingCache:
    """The embedding cache under ``root`` (``<store>/cache/embeddings``), cut to ``limit_mib`` after each write.

    Every shard is read, listed, written and removed through the store's safe calls (:mod:`harness.files`) inside
    ``store`` (``root`` unless told): a namespace folder or shard that links out of the store is never read, written
    or removed through (the link itself is removed and the texts computed again), a FIFO is never opened."""

    def __init__(self, root: Path | str, limit_mib: float = DEFAULT_LIMIT_MIB, store: Path | str | None = None) -> None:
        self.root = Path(root)
        self.store = Path(store) if store is not None else self.root
        self.limit_bytes = int(limit_mib * 1024 * 1024)
        # the verified shards of the namespace used last within one evaluation scope, by file name
        self._namespace: str | None = None
        self._shards: dict[str, _Shard] = {}

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.root)!r}, limit_mib={self.limit_bytes / 2**20:g})"

    @staticmethod
    def namespace(determinants: Mapping[str, Any]) -> str:
        """The folder name of an encoder's vectors: a hash of everything that determines them."""
        return stable_hash(dict(determinants), 32)

    def forget(self) -> None:
        """Drop the shards held in memory (they are read, and verified, again on the next lookup)."""
        self._namespace, self._shards = None, {}

    # -- reading -------------------------------------------------------------------------------------------------
    def _read_shard(self, namespace: str, path: Path) -> _Shard | None:
        """The shard at ``path`` if it is whole and belongs to ``namespace``; a damaged one is removed (its texts
        are then computed again), a vanished one (evicted meanwhile) is None."""
        from safetensors.numpy import load

        try:
            content = read_store_bytes(path, self.store)
        except FileNotFoundError:
            return None
        except (UnsafeFileError, OSError) as exc:
            logger.warning(
                "embedding cache shard %s is not used: %s; its texts are computed again",
                path,
                exc.reason if isinstance(exc, UnsafeFileError) else exc.strerror or exc,
            )
            self._remove(path)
            return None
        try:
            metadata = _shard_metadata(content)
            tensors = load(content)
            digests, vectors = tensors["digests"], tensors["vectors"]
            problem = None
            if metadata.get("namespace") != namespace:
                problem = "it belongs to another model's namespace (copied over?)"
            elif digests.ndim != 2 or digests.shape[1] != DIGEST_BYTES or len(digests) != len(vectors):
                problem = "its digests and vectors do not match"
            elif metadata.get("sha256") != _content_checksum(digests, vectors):
                problem = "its checksum does not match its content"
        except Exception as exc:  # noqa: BLE001  (any parse failure: the bytes are not a shard)
            problem = f"it cannot be read as a shard ({type(exc).__name__})"
        if problem is not None:
            logger.warning("embedding cache shard %s is not used: %s; its texts are computed again", path, problem)
            self._remove(path)
            return None
        return _Shard(path, {bytes(row): index for index, row in enumerate(digests)}, vectors)

    def _remove(self, path: Path) -> None:
        """Remove a shard (or whatever stands in its place: a link or FIFO itself, never what a link names)."""
        try:
            remove_store_file(path, self.store)
        except (UnsafeFileError, OSError) as exc:
            logger.warning("embedding cache: %s left in place (%s)", path, exc)

    def _namespace_folder(self, namespace: str) -> Path | None:
        """The namespace's folder, None when it cannot be used: a link out of the store (the link is removed, so
        the next write makes a real folder; what it points to is never touched) or not a folder."""
        folder = self.root / namespace
        try:
            list_store_folder(folder, self.store)
        except UnsafeFileError as exc:
            logger.warning(
                "embedding cache folder %s is not used: it is %s (a link is removed, never what it points to)",
                folder,
                exc.reason,
            )
            if folder.is_symlink():
                with contextlib.suppress(OSError):
                    remove_store_file(folder, self.store)
            return None if os.path.lexists(folder) else folder
        return folder

    def _shards_of(self, namespace: str) -> list[_Shard]:
        if namespace != self._namespace:
            self._namespace, self._shards = namespace, {}
        folder = self._namespace_folder(namespace)
        try:
            names = [
                path.name
                for path in (list_store_folder(folder, self.store) if folder is not None else [])
                if path.name.endswith(SHARD_SUFFIX) and not path.name.startswith(".")
            ]
        except UnsafeFileError:
            names = []
        for name in names:
            if name not in self._shards:
                shard = self._read_shard(namespace, folder / name)
                if shard is not None:
                    self._shards[name] = shard
        return list(self._shards.values())

    def lookup(self, namespace: str, digests: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors of those ``digests`` that ``namespace`` holds; each shard that served one is marked as
        used now (the eviction order)."""
        found: dict[bytes, np.ndarray] = {}
        wanted = set(digests)
        for shard in self._shards_of(namespace):
            served = False
            for digest in wanted.intersection(shard.rows):
                if digest not in found:
                    found[digest] = shard.vectors[shard.rows[digest]]
                    served = True
            if served:
                touch_store_file(shard.path, self.store)
            if len(found) == len(wanted):
                break
        return found

    # -- writing -------------------------------------------------------------------------------------------------
    def add(self, namespace: str, digests: Sequence[bytes], vectors: np.ndarray) -> Path | None:
        """Write ``vectors`` (one row per digest) as a new shard of ``namespace``, then cut the cache to its cap;
        the shard's path (None when there was nothing to write)."""
        from safetensors.numpy import save

        if not len(digests):
            return None
        digest_rows = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), DIGEST_BYTES)
        vectors = np.ascontiguousarray(vectors)
        metadata = {"namespace": namespace, "sha256": _content_checksum(digest_rows, vectors)}
        content = save({"digests": digest_rows, "vectors": vectors}, metadata=metadata)
        folder = self._namespace_folder(namespace)
        if folder is None:  # not a folder (a file or FIFO stands there): the vectors are used, not kept
            return None
        path = folder / f"{hashlib.sha256(content).hexdigest()[:32]}{SHARD_SUFFIX}"
        if regular_store_file(path, self.store) is None:  # write-once: the same content under the same name is there
            try:
                atomic_write_bytes(path, content, self.store)
            except UnsafeFileError as exc:
                logger.warning("embedding cache: shard %s not written (%s)", path, exc.reason)
                return None
        if namespace == self._namespace:
            self._shards[path.name] = _Shard(path, {digest: index for index, digest in enumerate(digests)}, vectors)
        self.evict(keep=path)
        return path

    def size_bytes(self) -> int:
        """The bytes the cache's shards take."""
        return sum(size for _, size, _ in self._all_shards())

    def _all_shards(self) -> Iterator[tuple[Path, int, float]]:
        """Every shard (a regular file in a namespace folder inside the store): links, FIFOs and linked namespace
        folders are never listed, so eviction never removes a file elsewhere."""
        try:
            namespaces = list_store_folder(self.root, self.store)
        except (UnsafeFileError, OSError):
            return
        for namespace in namespaces:
            if namespace.is_symlink() or not namespace.is_dir():
                continue
            try:
                entries = list_store_folder(namespace, self.store)
            except (UnsafeFileError, OSError):
                continue
            for entry in entries:
                if entry.name.endswith(SHARD_SUFFIX) and not entry.name.startswith("."):
                    status = regular_store_file(entry, self.store)
                    if status is not None:
                        yield entry, status.st_size, status.st_mtime

    def evict(self, keep: Path | None = None) -> int:
        """Remove the least recently used shards (oldest modification time first; ``keep`` last of all) until the
        cache fits its cap; the number removed."""
        shards = sorted(self._all_shards(), key=lambda shard: (shard[0] == keep, shard[2]))
        total = sum(size for _, size, _ in shards)
        removed = 0
        for path, size, _ in shards:
            if total <= self.limit_bytes:
                break
            try:
                if remove_store_file(path, self.store):  # False: another process evicted it first
                    removed += 1
            except (UnsafeFileError, OSError) as exc:
                logger.warning("embedding cache: %s left in place (%s)", path, exc)
            total -= size
            self._shards.pop(path.name, None)
        if removed:
            logger.info("embedding cache: removed %d least recently used shard(s) to stay under its cap", removed)
        return removed

    # -- encoding ------------------------------------------------------------------------------------------------
    def encode(
        self,
        determinants: Mapping[str, Any],
        texts: Sequence[str],
        compute: Callable[[list[str]], np.ndarray],
        counts: CacheCounts | None = None,
    ) -> np.ndarray:
        """``compute(texts)`` (rows in input order) with every distinct text's vector served from the cache when
        ``determinants`` (the encoder's) already produced it, and computed (then cached) otherwise. ``compute``
        sees each missing text once, in first-appearance order, so a cold cache runs exactly the uncached batches."""
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return compute(list(texts))
        namespace = self.namespace(determinants)
        digests = [text_digest(text) for text in distinct]
        found = self.lookup(namespace, digests)
        missing = [index for index, digest in enumerate(digests) if digest not in found]
        if counts is not None:
            counts.hits += len(distinct) - len(missing)
            counts.misses += len(missing)
        if missing:
            computed = np.asarray(compute([distinct[index] for index in missing]))
            self.add(namespace, [digests[index] for index in missing], computed)
            for row, index in enumerate(missing):
                found[digests[index]] = computed[row]
        matrix = np.stack([found[digest] for digest in digests])
        if len(distinct) == len(texts) and distinct == list(texts):
            return matrix
        row_of = {text: row for row, text in enumerate(distinct)}
        return matrix[[row_of[text] for text in texts]]


_active: contextvars.ContextVar[tuple[EmbeddingCache, CacheCounts] | None] = contextvars.ContextVar(
    "harness_embedding_cache", default=None
)


@contextlib.contextmanager
def evaluation_scope(cache: EmbeddingCache | None) -> Iterator[CacheCounts | None]:
    """Within the block, :func:`cached_encode` consults ``cache`` (None: no cache); yields the block's counts."""
    if cache is None:
        token = _active.set(None)
        try:
            yield None
        finally:
            _active.reset(token)
        return
    counts = CacheCounts()
    token = _active.set((cache, counts))
    try:
        yield counts
    finally:
        _active.reset(token)
        cache.forget()  # the shards read stay on disk, not in this process' memory between cells


def cached_encode(
    determinants: Callable[[], Mapping[str, Any]],
    texts: Sequence[str],
    compute: Callable[[list[str]], np.ndarray],
) -> np.ndarray:
    """How an encoder encodes through the cache: ``compute(texts)`` outside an :func:`evaluation_scope` with a cache,
    else :meth:`EmbeddingCache.encode` under ``determinants()`` (called only then: hashing weights takes a moment)."""
    active = _active.get()
    if active is None:
        return compute(list(texts))
    cache, counts = active
    return cache.encode(determinants(), texts, compute, counts)
