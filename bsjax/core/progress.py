"""Live progress on stderr: games done, the batch's turn and, while LLM calls run, calls done,
calls per second and fallbacks so far.

On a terminal it is a rich bar refreshed in place; elsewhere (a log file, CI) one plain line at
most every `every` seconds, so a long run is never silent.
"""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class GameProgress:
    """Progress of one run. `start`, then `update` after every turn and `llm_event` after every
    LLM call (from any thread), then `stop`. Shown once the run has taken `delay` seconds."""

    def __init__(self, label: str = "games", delay: float = 2.0, every: float = 10.0,
                 console: Console | None = None, unit: str = "games"):
        self.label, self.delay, self.every, self.unit = label, delay, every, unit
        self._console = console or Console(file=sys.stderr)
        self._progress = None
        self._task = None
        self._lock = threading.Lock()
        self._total = self._done = 0
        self._turn = 0
        self._start = self._last_line = 0.0
        self._calls = self._fallbacks = self._cached = 0
        self._first_call = None

    def start(self, total: int, done: int = 0) -> None:
        self._total, self._done, self._start = total, done, time.perf_counter()
        self._last_line = self._start

    def status(self) -> str:
        """The text after the bar: the batch's turn and the LLM counters."""
        parts = [f"turn {self._turn}"] if self._turn else []
        if self._calls:
            elapsed = time.perf_counter() - (self._first_call or self._start)
            rate = self._calls / elapsed if elapsed > 0 else 0.0
            parts.append(f"LLM {self._calls} calls ({rate:.2f}/s), {self._fallbacks} fallbacks"
                         + (f", {self._cached} cached" if self._cached else ""))
        return "  ".join(parts)

    def update(self, done: int, turn: int | None = None) -> None:
        with self._lock:
            self._done = done
            if turn is not None:
                self._turn = turn
            self._show()

    def llm_event(self, event) -> None:
        """Count one answered LLM call (an `LLMEvent`)."""
        with self._lock:
            if self._first_call is None:
                self._first_call = time.perf_counter() - event.latency
            self._calls += 1
            self._fallbacks += int(not event.ok)
            self._cached += int(event.cached)
            self._show()

    def _show(self) -> None:
        now = time.perf_counter()
        if now - self._start < self.delay:
            return
        if not self._console.is_terminal:
            if now - self._last_line >= self.every:
                self._last_line = now
                self._console.print(self._line(now), markup=False, highlight=False)
            return
        if self._progress is None:
            self._progress = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[status]}"),
                                      console=self._console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=self._total, status="")
        self._progress.update(self._task, completed=self._done, status=self.status())

    def _line(self, now: float) -> str:
        status = self.status()
        unit = "" if self.unit == self.label else f" {self.unit}"
        return (f"{self.label}: {self._done}/{self._total}{unit}, {now - self._start:.0f} s"
                + (f", {status}" if status else ""))

    def log(self, line: str) -> None:
        """A line on stderr above the bar (printed through the bar's console while it shows)."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def stop(self) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.update(self._task, completed=self._done, status=self.status())
                self._progress.stop()
            elif not self._console.is_terminal and \
                    time.perf_counter() - self._start >= self.delay:
                self._console.print(self._line(time.perf_counter()), markup=False,
                                    highlight=False)
