"""The two test lanes, from measured durations: `make test-fast` runs the tests not marked ``slow``, and a test is
slow when tests/durations.json says it took longer than SLOW_SECONDS, when it was never measured, or when it is
marked ``integration``. `make durations` measures the tests (all of them, or DURATIONS_TESTS=tests/test_x.py) and
rewrites the file.

A test's duration (keyed ``test_file.py::function``, its parametrisations summed) is its setup, call and teardown,
with the fixtures it shares with the rest of its module or class counted in full for every test that uses them:
alone, or first in the fast lane, a test pays them, so a test behind a module fixture that trains a model for 20 s
is slow however quick its own body is. Session fixtures (the tiny backbones) are left out: nearly every lane pays
them once anyway. A test never measured counts as slow rather than fast: a new slow test must not slow the fast
lane until someone times it; the fast lane lists the unmeasured tests it left out, with the command that measures
them, and tests/test_fast_lane.py reports their share."""

from __future__ import annotations

import ast
import functools
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DURATIONS_FILE = TESTS / "durations.json"

# Above this many seconds a test is in the slow lane: the rule the hand-kept list of earlier stated ("every test of
# 3 s or more"), now applied to every test. The checked-in durations were measured on a 2-core machine shared with
# other jobs (inflated, perhaps twice a quiet machine's times); on them the fast lane sums to about 250 s of one
# process, so `make test-fast` stays near two minutes on 2 cores.
SLOW_SECONDS = 3.0

# user_properties a measuring process attaches to each test's reports (they travel with xdist's reports too).
_SHARED_SETUP_PAID = "durations:shared-setup-paid"
_SHARED_FIXTURES_COST = "durations:shared-fixtures-cost"
_SHARED_SCOPES = ("class", "module", "package")


def duration_key(nodeid: str) -> str:
    """``test_file.py::function`` of a test id (``tests/test_file.py::Class::function[param]``): its file's name and
    its function, parameters and class dropped, so all parametrisations share one entry."""
    path, _, rest = nodeid.partition("::")
    function = rest.rsplit("::", 1)[-1].split("[", 1)[0]
    return f"{Path(path).name}::{function}"


def read_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    if not path.is_file():
        return {}
    return {str(key): float(seconds) for key, seconds in json.loads(path.read_text(encoding="utf-8")).items()}


def write_durations(durations: dict[str, float], path: Path = DURATIONS_FILE) -> None:
    """Written whole or not at all (temporary file, then a rename), sorted, one test a line, so a refresh shows as a
    readable diff."""
    text = json.dumps({key: round(durations[key], 1) for key in sorted(durations)}, indent=0) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp's file is private (0600); the file keeps the mode it had, or a checked-in file's 0644
        os.fchmod(handle, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@functools.cache
def _syntax_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _test_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    ]


def defined_tests(path: Path) -> frozenset[str]:
    """The test functions a test file defines (read from its source, so without importing it)."""
    return frozenset(node.name for node in _test_functions(_syntax_tree(path)))


def every_defined_test() -> set[str]:
    return {f"{path.name}::{name}" for path in sorted(TESTS.glob("test_*.py")) for name in defined_tests(path)}


def gpu_tests() -> set[str]:
    """Tests marked ``gpu`` (on the function or by the module's ``pytestmark``): skipped on a machine without a GPU,
    so measured only where one is lent; they are not counted as unmeasured."""
    found = set()
    for path in sorted(TESTS.glob("test_*.py")):
        tree = _syntax_tree(path)
        module_marked = any(
            isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets)
            and "mark.gpu" in ast.unparse(node.value)
            for node in tree.body
        )
        found.update(
            f"{path.name}::{node.name}"
            for node in _test_functions(tree)
            if module_marked or any("mark.gpu" in ast.unparse(d) for d in node.decorator_list)
        )
    return found


def is_slow(key: str, durations: dict[str, float]) -> bool:
    return durations.get(key, float("inf")) > SLOW_SECONDS


class UnmeasuredTestsWarning(pytest.PytestWarning):
    """Tests missing from tests/durations.json, which the lanes count as slow."""


def add_option(parser) -> None:
    parser.addoption(
        "--record-durations",
        metavar="PATH",
        help="measure each test (setup, call and teardown; shared fixtures counted for every test using them) and "
        "merge the seconds into the JSON file PATH (`make durations` writes tests/durations.json)",
    )


def configure(config) -> None:
    path = config.getoption("--record-durations")
    if path:
        config.pluginmanager.register(DurationRecorder(Path(path).resolve()), "duration-recorder")


def mark_slow_tests(config, items) -> None:
    """Marks ``slow`` every test over SLOW_SECONDS, unmeasured or ``integration``; when the session selects by the
    ``slow`` mark, warns about the unmeasured ones it counted as slow."""
    durations = read_durations()
    unmeasured = []
    for item in items:
        key = duration_key(item.nodeid)
        declared = item.get_closest_marker("gpu") or item.get_closest_marker("slow")  # measured elsewhere, or slow
        if key not in durations and declared is None:
            unmeasured.append(key)
        if is_slow(key, durations) or item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.slow)
    if unmeasured and "slow" in (config.getoption("markexpr", "") or ""):
        names = sorted(set(unmeasured))
        files = " ".join(sorted({f"tests/{key.partition('::')[0]}" for key in names}))
        warnings.warn(
            UnmeasuredTestsWarning(
                f"{len(names)} test(s) not in tests/durations.json, counted as slow until measured: "
                f"{', '.join(names[:10])}{' ...' if len(names) > 10 else ''}; "
                f'measure them with `make durations DURATIONS_TESTS="{files}"`'
            ),
            stacklevel=1,
        )


class DurationRecorder:
    """Measures the tests of a session and merges them into a durations file at its end: the measured entries are
    replaced, those of tests this session collected no longer (renamed or removed) dropped, those of files that no
    longer exist dropped, the rest kept. Test files are looked up beside the durations file."""

    def __init__(self, path: Path):
        self.path = path
        self.own_seconds: dict[str, float] = {}
        self.shared_seconds: dict[str, float] = {}
        self.collected_files: set[str] = set()
        self.collected: set[str] = set()
        self.ran: set[str] = set()
        self.written: int | None = None
        self._fixture_seconds: dict[tuple, float] = {}
        self._paid_by_current = 0.0
        self._setup_seconds: dict[str, float] = {}
        self._called: set[str] = set()

    # -- in the process that runs the tests ---------------------------------------------------------------------------
    def pytest_itemcollected(self, item):
        key = duration_key(item.nodeid)
        self.collected.add(key)
        self.collected_files.add(key.partition("::")[0])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """Under xdist the workers collect; the controller hears what."""
        for nodeid in ids:
            key = duration_key(nodeid)
            self.collected.add(key)
            self.collected_files.add(key.partition("::")[0])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self._paid_by_current = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        """Times each shared fixture's own setup (pytest has set up the fixtures it depends on before this hook)."""
        started = time.perf_counter()
        yield
        if fixturedef.scope != "function":
            seconds = time.perf_counter() - started
            self._paid_by_current += seconds
            self._fixture_seconds[_fixture_id(fixturedef)] = seconds

    def pytest_runtest_call(self, item):
        """By the call, every fixture of the test is set up: note what it paid for shared fixtures and what those
        it uses cost wherever they were paid."""
        shared_cost = 0.0
        for definitions in item._fixtureinfo.name2fixturedefs.values():
            if definitions and definitions[-1].scope in _SHARED_SCOPES:
                shared_cost += self._fixture_seconds.get(_fixture_id(definitions[-1]), 0.0)
        item.user_properties.append((_SHARED_SETUP_PAID, self._paid_by_current))
        item.user_properties.append((_SHARED_FIXTURES_COST, shared_cost))

    # -- where the reports arrive (the same process, or xdist's controller) -------------------------------------------
    def pytest_runtest_logreport(self, report):
        key = duration_key(report.nodeid)
        if report.when == "setup":
            self._setup_seconds[report.nodeid] = report.duration
        elif report.when == "call":
            if report.skipped and not hasattr(report, "wasxfail"):
                return  # skipped in its body: not a measurement
            properties = dict(report.user_properties)
            own_setup = self._setup_seconds.get(report.nodeid, 0.0) - properties.get(_SHARED_SETUP_PAID, 0.0)
            self.own_seconds[key] = self.own_seconds.get(key, 0.0) + max(own_setup, 0.0) + report.duration
            shared = properties.get(_SHARED_FIXTURES_COST, 0.0)
            self.shared_seconds[key] = max(self.shared_seconds.get(key, 0.0), shared)
            self.ran.add(key)
            self._called.add(report.nodeid)
        else:
            self._setup_seconds.pop(report.nodeid, None)
            if report.nodeid in self._called:
                self._called.discard(report.nodeid)
                self.own_seconds[key] += report.duration

    def measured(self) -> dict[str, float]:
        """Seconds per test that ran (a test skipped in all its parametrisations here is not measured)."""
        return {key: self.own_seconds[key] + self.shared_seconds.get(key, 0.0) for key in self.ran}

    def pytest_sessionfinish(self, session):
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: the controller writes
        measured = self.measured()
        durations = {
            key: seconds
            for key, seconds in read_durations(self.path).items()
            if not (key.partition("::")[0] in self.collected_files and key not in self.collected)
            and (self.path.parent / key.partition("::")[0]).is_file()
        }
        durations.update(measured)
        write_durations(durations, self.path)
        self.written = len(measured)

    def pytest_terminal_summary(self, terminalreporter):
        written = self.written
        if written is not None:
            slow = sum(1 for key, seconds in self.measured().items() if seconds > SLOW_SECONDS)
            terminalreporter.write_line(
                f"durations: {written} tests measured ({slow} over {SLOW_SECONDS:g} s, in the slow lane) "
                f"and written to {self.path}"
            )


def _fixture_id(fixturedef) -> tuple:
    return (fixturedef.baseid, fixturedef.argname, fixturedef.scope)
