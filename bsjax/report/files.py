"""Reading the results files of a run directory."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: Path, stop_at_torn: bool = False) -> list[dict]:
    """The rows of a JSON-lines file ([] if it does not exist).

    A line that does not parse is a torn write from an interruption: with `stop_at_torn` reading
    stops there (games.jsonl: that game is replayed); otherwise it is skipped (events.jsonl, where
    later batches may have appended after it).
    """
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if stop_at_torn:
                break
    return rows
