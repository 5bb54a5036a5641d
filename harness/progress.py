"""Progress of long steps (training steps, texts encoded, cells done): a tqdm bar on a terminal, and where stderr is
not one (CI, ``make run > log``, a batch job) a log line at an interval instead, so a log shows a long run moving.

The interval is ``HARNESS_PROGRESS_SECONDS`` (default 60); a step shorter than one interval logs nothing, so short
runs and tests keep their output as it was.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 60.0


def interval_seconds() -> float:
    """The seconds between two progress lines in a log (``HARNESS_PROGRESS_SECONDS``; a bad value: the default)."""
    try:
        value = float(os.environ.get("HARNESS_PROGRESS_SECONDS", DEFAULT_INTERVAL_SECONDS))
    except ValueError:
        return DEFAULT_INTERVAL_SECONDS
    return value if value >= 0 else DEFAULT_INTERVAL_SECONDS


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def duration_text(seconds: float) -> str:
    """``41 s``, ``12 min 5 s``, ``2 h 3 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class LogProgress:
    """The part of tqdm's interface harness uses (``update``, ``set_postfix``, ``close``, ``external_write_mode``,
    a context manager), writing ``description: 300/1438 steps (21%), 1 min 5 s, about 4 min left, loss=0.0312``
    through logging at most once per interval."""

    def __init__(self, total: int | None, description: str, unit: str, interval: float | None = None):
        self.total, self.description, self.unit = total, description, unit
        self.interval = interval_seconds() if interval is None else interval
        self.n = 0
        self.postfix = ""
        self.disable = False
        self.started = self.last = time.monotonic()

    def update(self, count: int = 1) -> None:
        self.n += count
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            logger.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.started
        done = f"{self.n}/{self.total} {self.unit}s" if self.total else f"{self.n} {self.unit}s"
        parts = [done + (f" ({100 * self.n / self.total:.0f}%)" if self.total else ""), duration_text(elapsed)]
        if self.total and 0 < self.n < self.total:
            parts.append(f"about {duration_text(elapsed * (self.total - self.n) / self.n)} left")
        if self.postfix:
            parts.append(self.postfix)
        return f"  {self.description}: " + ", ".join(parts)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{key}={value}" for key, value in values.items())

    def external_write_mode(self):
        import contextlib

        return contextlib.nullcontext()

    def close(self) -> None:
        pass

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    total: int | None, description: str, enabled: bool, unit: str = "text", leave: bool = False, **tqdm_options: Any
) -> Any:
    """A tqdm bar on a terminal (leaving no trace when done unless ``leave``), log lines at an interval elsewhere,
    nothing when ``enabled`` is false (``--no-progress``, a worker process)."""
    from tqdm.auto import tqdm

    if enabled and not on_terminal():
        return LogProgress(total, description, unit)
    return tqdm(total=total, desc=description, disable=not enabled, leave=leave, unit=unit, **tqdm_options)
