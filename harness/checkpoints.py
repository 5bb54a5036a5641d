"""The checkpoint format: a folder built under a temporary name, with a ``COMPLETE`` manifest listing the sha256 and
size of every file, renamed into place when complete; and :class:`CheckpointedModule`, the save/load that a model
made of torch modules gets for free (safetensors weights and a JSON config, never pickles).

- A checkpoint whose files do not match its manifest is not complete (:func:`checkpoint_problem`) and is rebuilt.
- A trained model's checkpoint names the spec hash, seed and training data it was made of
  (:func:`trained_checkpoint_problem`).
- A checkpoint is checked, built and replaced under its lock (``<checkpoint>.lock``, ``harness.locks``), so two
  writers never interleave and a reader never sees half of one.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from .files import UMASK, atomic_write_json, atomic_write_text, remove_stale_siblings, temporary_prefix
from .locks import checkpoint_lock
from .store_files import (
    StoreError,
    UnsafeFileError,
    as_os_error,
    entry_mode,
    file_kind,
    read_store_text,
    remove_store_tree,
    sha256_file,
)

logger = logging.getLogger(__name__)

COMPLETE = "COMPLETE"
CHECKPOINT_FORMAT = 2  # 2: COMPLETE lists every file's sha256 and size; 1 (harness 0.1): COMPLETE says "ok"


def _checkpoint_files(directory: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory).as_posix()
        if relative == COMPLETE:
            continue
        files[relative] = {"sha256": sha256_file(path, directory), "bytes": path.stat().st_size}
    return files


def checkpoint_problem(directory: Path, *, lock: bool = True) -> str | None:
    """Why the checkpoint in ``directory`` cannot be loaded as it is (not built, or its files do not match the
    checksums recorded when it was built), or None. Checked under the checkpoint's lock, so a checkpoint being
    replaced by another process is seen before or after, never half-way (in a read-only store: without the lock).
    ``lock=False``: a reader that only shows what the checkpoint holds (the site, ``plot training``) never waits
    for a training; one caught half-replaced is reported as a problem like any other."""
    directory = Path(directory)
    if not directory.parent.is_dir():
        return "not built yet"
    if not lock:
        return _checkpoint_problem(directory)
    lock = checkpoint_lock(directory)
    try:
        lock.acquire()
    except OSError:  # a store this process cannot write (e.g. read-only): nobody can be replacing it from here
        return _checkpoint_problem(directory)
    try:
        return _checkpoint_problem(directory)
    finally:
        lock.release()


def _checkpoint_problem(directory: Path) -> str | None:
    marker = directory / COMPLETE
    if not marker.is_file():
        return "not built yet" if not directory.exists() else f"incomplete (no {COMPLETE} marker)"
    try:
        manifest = json.loads(read_store_text(marker, directory))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, UnsafeFileError):
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return "built by harness 0.1 without file checksums, so it cannot be verified"
    for relative, expected in manifest["files"].items():
        path = directory / relative
        if not path.is_file():
            # a FIFO, folder or device in its place is named as such, not as missing (a FIFO is never opened)
            mode = entry_mode(path)
            kind = None if mode is None else file_kind(mode)
            return f"{relative} is {kind}, not a regular file" if kind else f"{relative} is missing"
        size = path.stat().st_size
        if size != expected.get("bytes"):
            return f"{relative} has {size} bytes, {expected.get('bytes')} when it was built (truncated or replaced)"
        try:
            digest = sha256_file(path, directory)  # never a file outside the checkpoint, never a FIFO
        except UnsafeFileError as exc:
            return f"{relative} is {exc.reason}"
        if digest != expected.get("sha256"):
            return f"{relative} does not match the sha256 recorded when it was built (the file was changed)"
    return None


TRAINING_RECORD = "training.json"  # in a trained model's checkpoint: the spec, seed and training data it was made of


def trained_checkpoint_problem(
    directory: Path,
    *,
    spec_hash: str,
    seed: int,
    training_data_checksum: str | None = None,
    train_on: str | None = None,
) -> str | None:
    """Why the checkpoint of a trained model in ``directory`` cannot serve the spec ``spec_hash`` and ``seed``: not
    built or damaged (:func:`checkpoint_problem`), or its ``training.json`` names another spec hash, another seed or
    (when ``training_data_checksum`` is given) other training data, e.g. ``seed-43`` copied over ``seed-42`` by
    hand. None: load it."""
    problem = checkpoint_problem(directory)
    if problem is not None:
        return problem
    try:
        training_record = json.loads(read_store_text(Path(directory) / TRAINING_RECORD, directory))
    except (OSError, ValueError, UnsafeFileError):  # a FIFO or a link out of the checkpoint is never read
        return f"its {TRAINING_RECORD} is unreadable"
    trained_for = training_record.get("spec") if isinstance(training_record, dict) else None
    trained_hash = trained_for.get("hash") if isinstance(trained_for, dict) else None
    if trained_hash != spec_hash:
        return (
            f"it was trained for another model spec (spec hash {str(trained_hash)[:12]}..., wanted "
            f"{spec_hash[:12]}...): a checkpoint copied or moved by hand"
        )
    if training_record.get("seed") != seed:
        return f"it was trained with seed {training_record.get('seed')!r}, not {seed}: a checkpoint copied by hand"
    if training_data_checksum is not None and training_record.get("source_checksum") != training_data_checksum:
        return f"the training data{' of ' + train_on if train_on else ''} changed since it was trained"
    return None


def checkpoint_complete(directory: Path) -> bool:
    """The checkpoint is built and every file matches its recorded checksum (a damaged one logs a warning)."""
    problem = checkpoint_problem(directory)
    if problem is not None and (Path(directory) / COMPLETE).is_file():
        logger.warning("checkpoint %s cannot be used: %s; it will be rebuilt", directory, problem)
    return problem is None


def build_checkpoint(directory: Path, save: Callable[[Path], Any]) -> Path:
    """Call ``save(temporary_dir)``, record every file's sha256 in ``COMPLETE``, then move the folder into place.

    All of it happens under the checkpoint's lock (re-entrant: a caller may already hold it), so concurrent builders
    take turns and :func:`checkpoint_problem` never sees a checkpoint half-replaced. An existing checkpoint is renamed
    aside before the new one is renamed in (a folder cannot be renamed over a non-empty one) and removed after; a
    crash in between leaves no checkpoint (it is rebuilt) and a temporary that the next build or run removes.
    """
    directory = Path(directory)
    check_checkpoint_target(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with checkpoint_lock(directory):
        remove_stale_siblings(directory)
        temporary = Path(tempfile.mkdtemp(prefix=temporary_prefix(directory.name), dir=directory.parent))
        try:
            os.chmod(temporary, 0o777 & ~UMASK)  # mkdtemp's 0700 would hide it from others sharing the store
            try:
                save(temporary)
            except Exception as exc:  # noqa: BLE001  a full disk inside safetensors is an OSError like any other
                os_error = as_os_error(exc, directory)
                if os_error is None or os_error is exc:
                    raise
                raise os_error from exc
            _share_like_records(temporary)
            manifest = {"format": CHECKPOINT_FORMAT, "files": _checkpoint_files(temporary)}
            atomic_write_text(temporary / COMPLETE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
            if directory.exists():
                aside = Path(tempfile.mkdtemp(prefix=temporary_prefix(directory.name), dir=directory.parent))
                os.replace(directory, aside)  # onto the empty folder just made: atomic, and the name is ours
                os.replace(temporary, directory)
                remove_store_tree(aside, directory.parent)
            else:
                os.replace(temporary, directory)
        except BaseException:
            remove_store_tree(temporary, directory.parent)
            raise
    return directory


def _share_like_records(folder: Path) -> None:
    """Give what a model's ``save`` wrote the modes records get (0644 / 0755 under the usual umask): some writers
    create files 0600 (e.g. through mkstemp), which would hide a checkpoint from the others sharing a store."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~UMASK)


def check_checkpoint_target(directory: Path) -> None:
    """Refuse (StoreError) a checkpoint place that cannot be replaced by a rename: a symbolic link (renaming onto it
    fails after training; the link's target would keep the old checkpoint) or a file. Called before training.

    Decided from one ``lstat``: another builder replaces a checkpoint by renaming the old folder aside and the new
    one into place, so two questions (exists? is a folder?) could straddle the rename and take it for a file."""
    directory = Path(directory)
    mode = entry_mode(directory)
    if mode is None or stat.S_ISDIR(mode):
        return  # absent (built here) or a real folder (replaced by a rename)
    if stat.S_ISLNK(mode):
        try:
            target = f" (to {os.readlink(directory)})"
        except OSError:
            target = ""
        raise StoreError(
            f"the checkpoint folder {directory} is a symbolic link{target}; the "
            "harness replaces checkpoints by renaming, which a link does not allow: remove the link "
            "(link the whole store elsewhere instead) and run again."
        )
    raise StoreError(f"the checkpoint folder {directory} is {file_kind(mode) or 'a file'}; remove it and run again.")


class CheckpointedModule:
    """The ``save``/``load`` of a trainable model whose trained state is one torch module: its weights as
    safetensors (``WEIGHTS_FILE``) and its settings as JSON (``CONFIG_FILE``); never a pickle.

    A model class inherits it and names its module in ``checkpoint_module``; ``checkpoint_config`` returns the
    settings worth keeping beside the weights (read back by ``restore_checkpoint_config`` after the weights load);
    the weights load onto ``checkpoint_device()`` (``self.device`` unless overridden). The file names are those the
    built-in models wrote before this class existed, so their checkpoints still load. Torch and safetensors are
    imported when a checkpoint is saved or loaded, so ``import harness`` stays light.
    """

    WEIGHTS_FILE: ClassVar[str] = "model.safetensors"
    CONFIG_FILE: ClassVar[str] = "config.json"

    def checkpoint_module(self) -> Any:
        """The torch module whose parameters and buffers are the trained state."""
        raise NotImplementedError(f"{type(self).__name__} must name its torch module in checkpoint_module()")

    def checkpoint_config(self) -> dict:
        """JSON-serialisable settings written beside the weights (none by default)."""
        return {}

    def restore_checkpoint_config(self, config: dict) -> None:
        """Called after the weights loaded, with the settings ``checkpoint_config`` wrote (``{}`` when none)."""

    def checkpoint_device(self) -> Any:
        return self.device

    def save(self, directory: Path) -> None:
        from safetensors.torch import save_model

        directory = Path(directory)
        save_model(self.checkpoint_module(), str(directory / self.WEIGHTS_FILE))
        atomic_write_json(directory / self.CONFIG_FILE, self.checkpoint_config())

    def load(self, directory: Path) -> None:
        from safetensors.torch import load_model

        directory = Path(directory)
        load_model(self.checkpoint_module(), str(directory / self.WEIGHTS_FILE), device=str(self.checkpoint_device()))
        config_path = directory / self.CONFIG_FILE
        config = json.loads(read_store_text(config_path, directory)) if config_path.is_file() else {}
        self.restore_checkpoint_config(config if isinstance(config, dict) else {})
