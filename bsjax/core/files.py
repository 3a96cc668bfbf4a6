"""Results files on disk: atomic writes, JSON-lines reading and a run directory's parts.

Shared by both domains' run directories: a writer never leaves half a file behind (write under a
temporary name, then rename), and a reader treats a torn last line as the interruption it is.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path


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
