"""Results files on disk: one writer per directory, atomic writes, JSON-lines reading and a run
directory's parts.

Shared by both domains' run directories: a writer holds the directory's lock while it writes, a
writer never leaves half a file behind (write under a temporary name, then rename), and a reader
treats a torn last line as the interruption it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from bsjax.core.errors import UsageError

LOCK_NAME = ".bsjax.lock"
_HELD: set[str] = set()  # the lock files this process holds (a lock is reentrant in-process)


def write_atomic(path: Path, write: Callable[[Path], None], suffix: str = ".tmp") -> None:
    """Call `write(tmp)` on a temporary path beside `path`, then rename it to `path`: a reader
    (or a resume after an interruption) never sees a partial file. `suffix` keeps the extension
    some writers insist on (numpy's `.npz`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + suffix)
    write(tmp)
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """`path` holds `text`, written atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_json_atomic(path: Path, data, indent: int | None = 1) -> None:
    """`data` as JSON (numpy scalars as floats), written atomically."""
    write_text_atomic(path, json.dumps(data, indent=indent, default=float) + "\n")


def read_jsonl(path: Path, stop_at_torn: bool = False) -> list[dict]:
    """The rows of a JSON-lines file ([] if it does not exist).

    A line that does not parse is a torn write from an interruption: with `stop_at_torn` reading
    stops there (games.jsonl: that game is replayed); otherwise it is skipped (events.jsonl, where
    later batches may have appended after it).
    """
    path = Path(path)
    if not path.exists():
        return []
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if stop_at_torn:
                break
    return rows


def run_parts(run_dir: Path) -> list[Path]:
    """The directories holding a run's files: the run directory itself, or the per-process
    directories (`process-K-of-N`) of a multi-process run, in process order."""
    run_dir = Path(run_dir)
    if (run_dir / "games.jsonl").exists() or (run_dir / "run.json").exists():
        return [run_dir]
    parts = [p for p in run_dir.glob("process-*-of-*") if p.is_dir()]
    return sorted(parts, key=lambda p: int(p.name.split("-")[1]))


def read_run_jsonl(run_dir: Path, name: str, stop_at_torn: bool = False) -> list[dict]:
    """`name` (games.jsonl / events.jsonl) of a run, merged over its processes; where only a
    gzipped copy (`name.gz`, how large finished runs are kept in a repository) exists, that one.
    For reports: resuming a run reads the plain file only."""
    def source(part: Path) -> Path:
        plain = part / name
        packed = part / f"{name}.gz"
        return packed if not plain.exists() and packed.exists() else plain

    return [row for part in run_parts(run_dir)
            for row in read_jsonl(source(part), stop_at_torn)]


def read_run_json(run_dir: Path) -> dict:
    """run.json of a run; for a multi-process run, the first process's with `games` summed."""
    parts = [json.loads((p / "run.json").read_text()) for p in run_parts(run_dir)
             if (p / "run.json").is_file()]
    if not parts:
        return {}
    return dict(parts[0], games=sum(p.get("games", 0) for p in parts))


@contextlib.contextmanager
def writer_lock(directory: Path, command: str = "bsjax") -> Iterator[Path]:
    """Hold `directory`'s lock while writing into it: an exclusive `fcntl.flock` on
    `DIRECTORY/.bsjax.lock`, which holds the writer's pid and command.

    A second writer is refused with `UsageError` naming the holder. The OS releases the lock
    when its process ends, a crash or `kill -9` included, so a lock file left by a dead process
    is simply taken over. The file is kept afterwards (removing it could let two writers hold
    locks on two different files)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    key = os.path.realpath(path)
    if key in _HELD:  # this process already writes here (a study's report after its rows)
        yield path
        return
    handle = open(path, "a+")  # noqa: SIM115 — held for the context's lifetime
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UsageError(f"{directory} is being written by {holder}; wait for it to finish "
                             "or choose another --out") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} ({command})")
        handle.flush()
        _HELD.add(key)
        try:
            yield path
        finally:
            _HELD.discard(key)
    finally:
        handle.close()  # releases the lock


def command_line() -> str:
    """This process's command, shortened, for a lock's holder line."""
    if not sys.argv:
        return "python"
    return " ".join([os.path.basename(sys.argv[0])] + [a for a in sys.argv[1:2]
                                                       if not a.startswith("-")])
