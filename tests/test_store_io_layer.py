"""Every read, write, listing and deletion under a store goes through harness.store_files and harness.files: this test reads the
package's source (harness/, plugins/, tasks/) and fails on a direct file call outside that layer that the
allow-list below does not name with its reason, so a new feature cannot bypass the layer (a FIFO that hangs a
command, a link that makes the store read, write or delete elsewhere). Use the layer instead: ``read_store_bytes``
/ ``read_store_text`` / ``read_store_json``, ``atomic_write_*`` (with ``root``), ``list_store_folder``,
``remove_store_file`` / ``remove_store_tree``, ``regular_store_file``, ``touch_store_file`` (docs/guide/store.md)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("harness", "plugins", "tasks")
LAYERS = ("harness/files.py", "harness/store_files.py")  # the layer itself

# Calls on a path object that read, write, list or delete files.
PATH_METHODS = {"read_bytes", "read_text", "write_text", "write_bytes", "unlink", "iterdir", "glob", "rglob"}
# Module functions that do (np.load / torch.load of bytes already read, ``io.BytesIO(...)``, are not file access).
MODULE_CALLS = {
    "shutil": {"rmtree", "copy", "copy2", "copyfile", "copytree", "move"},
    "os": {"scandir", "listdir", "walk", "remove", "unlink", "rmdir", "open", "utime"},
    "np": {"load"},
    "numpy": {"load"},
    "torch": {"load"},
    "lzma": {"open"},
    "gzip": {"open"},
    "tarfile": {"open"},
}

# Modules that never take a store (they read a task's data folder, a backbone, a matrix file, the package's own
# files, or write an output folder of their own): every direct call in them is allowed, for the reason given.
MODULES_WITHOUT_A_STORE = {
    "harness/cli/__init__.py": "redirects stdout to /dev/null for --quiet",
    "harness/cli/export_results.py": "asks whether the export's output folder (not a store) is empty",
    "harness/blocks/__init__.py": "reads its group modules' own source (their __all__), never a store",
    "harness/data.py": "a task's data files under the data dir (not a store), refused when not regular files",
    "harness/device.py": "reads /proc/cpuinfo",
    "harness/download.py": "downloads datasets into the data dir (not a store), under its own temporary names",
    "harness/export.py": "writes the export folder of `harness export` (refused when it is a store's)",
    "harness/fingerprint.py": "hashes a backbone folder (the Hugging Face cache links its files, so links count)",
    "harness/hub.py": "checks a backbone folder's weight files",
    "harness/leaderboard/claims.py": "reads matrix files and the repository's reproduction inputs",
    "harness/leaderboard/matrix_board.py": "reads a matrix file",
    "harness/matrix.py": "reads a matrix file",
    "harness/nn/backbone.py": "reads a backbone folder's sentence-transformers config",
    "harness/nn/onnx_runtime.py": "exports and quantises ONNX graphs in its own temporary folder; the store keeps "
    "the bytes through cached_bytes",
    "harness/nn/wordnet.py": "reads the bundled WordNet data",
    "harness/testing/model_check.py": "a plugin author's check, on its own temporary folder",
    "plugins/sentence_transformers.py": "reads a backbone folder's config",
    "tasks/beir.py": "lists a task's data folder",
    "tasks/bws.py": "reads a task's data file",
    "tasks/mteb/results.py": "reads an MTEB results folder given on the command line (not a store)",
    "tasks/propsegment/files.py": "reads a task's data file",
    "tasks/twenty_newsgroups/corpus.py": "reads a task's compressed data file",
    "tasks/ukp_sentential.py": "reads and lists a task's data folder",
    "tasks/useb/data.py": "reads a task's data files",
}

# Calls in modules that do take a store: (module, enclosing function, call) -> why it is not a store file's I/O.
ALLOWED_CALLS = {
    ("harness/checkpoints.py", "_checkpoint_files", ".rglob"): "lists the temporary folder a model's save just "
    "filled (harness's own mkdtemp, not yet in the store; links are not descended, files hashed inside it)",
    ("harness/checkpoints.py", "_share_like_records", ".rglob"): "sets the modes of that same temporary folder "
    "(links skipped)",
    ("harness/leaderboard/site.py", "build_site", ".read_text"): "reads the package's own site assets "
    "(importlib.resources), not the store",
    ("harness/leaderboard/site.py", "build_site", "shutil.rmtree"): "removes the site's own temporary folder when "
    "the build fails (never the store: check_site_folder refuses a site folder in or over it)",
    ("harness/leaderboard/site.py", "_replace_folder", "shutil.rmtree"): "removes the previous site, renamed aside "
    "to harness's own temporary name (a folder check_site_folder confirmed is a site)",
    ("harness/leaderboard/site.py", "check_site_folder", ".iterdir"): "asks whether the site's output folder (not "
    "a store) holds anything",
    ("harness/nn/mlm.py", "train_domain_mlm", "shutil.copy"): "copies the backbone's own config (not a store file) "
    "into the folder being built",
    ("harness/nn/objectives/embedder.py", "ObjectiveEmbedder.save", "shutil.copy"): "copies the backbone's own "
    "config (not a store file) into the temporary folder build_checkpoint made",
    ("harness/nn/silver_pairs.py", "read_silver_pairs", ".glob"): "lists candidate artifacts only; each is read with "
    "read_store_text inside the store (a link out or a FIFO is refused)",
    ("harness/publish.py", "_artifacts", "os.walk"): "os.walk never descends through a linked folder; each file is "
    "read with read_store_bytes inside the store",
}


def direct_calls(path: Path) -> list[tuple[str, str, int]]:
    """``(enclosing function, call, line)`` of every direct file call in the module at ``path``."""
    found: list[tuple[str, str, int]] = []
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def _scoped(self, node: ast.AST) -> None:
            scope.append(node.name)  # type: ignore[attr-defined]
            self.generic_visit(node)
            scope.pop()

        visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

        def visit_Call(self, node: ast.Call) -> None:
            function, call = node.func, None
            if isinstance(function, ast.Name) and function.id == "open":
                call = "open"
            elif isinstance(function, ast.Attribute):
                owner = function.value.id if isinstance(function.value, ast.Name) else None
                if function.attr in MODULE_CALLS.get(owner or "", ()):
                    of_bytes = node.args and isinstance(node.args[0], ast.Call) and ast.unparse(node.args[0].func)
                    if not (function.attr == "load" and of_bytes == "io.BytesIO"):
                        call = f"{owner}.{function.attr}"
                elif function.attr in PATH_METHODS and owner not in MODULE_CALLS:
                    call = f".{function.attr}"
            if call is not None:
                found.append((".".join(scope) or "<module>", call, node.lineno))
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def _scanned_modules() -> list[tuple[str, Path]]:
    modules = []
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            modules.append((path.relative_to(REPO).as_posix(), path))
    return modules


def test_store_files_are_read_written_listed_and_removed_only_through_harness_files():
    unexplained, used = [], Counter()
    for module, path in _scanned_modules():
        if module in LAYERS or module in MODULES_WITHOUT_A_STORE:
            continue
        for function, call, line in direct_calls(path):
            key = (module, function, call)
            if key in ALLOWED_CALLS:
                used[key] += 1
            else:
                unexplained.append(f"{module}:{line} {call} in {function}")
    assert not unexplained, (
        "direct file I/O outside harness.store_files and harness.files (use its safe calls, or add the call to ALLOWED_CALLS with why it "
        "never touches a store file):\n  " + "\n  ".join(unexplained)
    )
    stale = sorted(set(ALLOWED_CALLS) - set(used))
    assert not stale, f"allow-list entries that no longer match a call (remove them): {stale}"
    missing = sorted(module for module in MODULES_WITHOUT_A_STORE if not (REPO / module).is_file())
    assert not missing, f"MODULES_WITHOUT_A_STORE names modules that are gone: {missing}"


def test_the_scan_sees_each_kind_of_direct_call(tmp_path):
    """The scanner itself: each kind of call is found (so a bypass cannot hide behind a kind it misses), bytes
    already read are not."""
    module = tmp_path / "m.py"
    module.write_text(
        "import io, os, shutil\nimport numpy as np\nimport torch\n"
        "def f(p):\n"
        "    open(p)\n    p.read_bytes()\n    p.read_text()\n    p.write_text('x')\n    p.write_bytes(b'')\n"
        "    p.unlink()\n    p.iterdir()\n    p.glob('*')\n    shutil.rmtree(p)\n    os.scandir(p)\n"
        "    np.load(p)\n    torch.load(p)\n    np.load(io.BytesIO(b''))\n"
    )
    calls = [call for _, call, _ in direct_calls(module)]
    assert calls == [
        "open",
        ".read_bytes",
        ".read_text",
        ".write_text",
        ".write_bytes",
        ".unlink",
        ".iterdir",
        ".glob",
        "shutil.rmtree",
        "os.scandir",
        "np.load",
        "torch.load",
    ]
