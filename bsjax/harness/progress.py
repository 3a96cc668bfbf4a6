"""A progress bar of games done, on stderr (rich)."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class GameProgress:
    """Shows games done once a run has taken more than `delay` seconds."""

    def __init__(self, label: str = "games", delay: float = 2.0):
        self.label, self.delay = label, delay
        self._progress = None
        self._task = None
        self._total = 0
        self._start = 0.0

    def start(self, total: int, done: int = 0) -> None:
        self._total, self._done, self._start = total, done, time.perf_counter()

    def update(self, done: int) -> None:
        self._done = done
        if self._progress is None and time.perf_counter() - self._start > self.delay:
            self._progress = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=Console(file=sys.stderr),
                                      transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=self._total)
        if self._progress is not None:
            self._progress.update(self._task, completed=done)

    def log(self, line: str) -> None:
        """A line on stderr above the bar (printed through the bar's console while it shows)."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self._done)
            self._progress.stop()
