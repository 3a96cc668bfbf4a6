"""Tasks of the real-LLM runs: `TaskRef` (one task's identity and arrays) and Table 7's task
selection (§7 T7: the first 20 test-ID tasks with H in [3, 8], filled from val)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from bsjax.gilp import config

T7_N, T7_H = 20, (3, 8)


@dataclasses.dataclass(frozen=True)
class TaskRef:
    """One task of an evaluation.

    Attributes:
      bench: benchmark name.
      source: the generated split it comes from (`test_id`, `test_ood`, `val`).
      index: its index in that split.
      task: the event rows' task id: the index for test splits, `SPLIT_OFFSET["val"] + index`
        for val tasks (so a val fill never collides with a test-ID task of the same index).
      split: the event rows' split (`id` or `ood`; val tasks are `id`).
      H: oracle horizon.
      arrays: the task's padded host arrays (not compared or hashed).
    """

    bench: str
    source: str
    index: int
    task: int
    split: str
    H: int
    arrays: dict = dataclasses.field(compare=False, hash=False, repr=False)


def _task_id(source: str, index: int) -> int:
    return config.SPLIT_OFFSET["val"] + index if source == "val" else index


def task_refs(bench: str, source: str, arrays: Mapping[str, np.ndarray],
              indices: Sequence[int] | None = None) -> list[TaskRef]:
    """TaskRefs for tasks of a stacked split (`workdir.tasks` / `generate.load_split`)."""
    count = len(arrays["status"])
    indices = range(count) if indices is None else indices
    split = "ood" if source == "test_ood" else "id"
    return [TaskRef(bench, source, int(i), _task_id(source, int(i)), split,
                    int(arrays["horizon"][i]), {k: np.asarray(v[i]) for k, v in arrays.items()})
            for i in indices]


def t7_tasks(work, bench: str, n: int = T7_N, h_range: tuple[int, int] = T7_H,
             pool: int | None = None, val_pool: int | None = None) -> list[TaskRef]:
    """Table 7's task selection (§7 T7): the first `n` test-ID tasks by index with H in
    `h_range` (inclusive), filled from the val split (first by index) if fewer qualify.

    Args:
      work: GILP work directory (`workdir.tasks` generates missing splits there).
      bench: benchmark name.
      n: tasks per benchmark (20).
      h_range: inclusive horizon range ([3, 8]).
      pool, val_pool: how many test-ID / val tasks to look through (default: whole splits).
    """
    from bsjax.gilp.training import workdir
    lo, hi = h_range
    out: list[TaskRef] = []
    for source, size in (("test_id", pool or config.SPLIT_SIZES["test_id"]),
                         ("val", val_pool or config.SPLIT_SIZES["val"])):
        if len(out) >= n:
            break
        arrays = workdir.tasks(Path(work), bench, source, size)
        keep = [i for i in range(len(arrays["horizon"])) if lo <= int(arrays["horizon"][i]) <= hi]
        out += task_refs(bench, source, arrays, keep[:n - len(out)])
    return out
