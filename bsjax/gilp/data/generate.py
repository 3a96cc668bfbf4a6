"""Task generation and splits (docs/gilp/spec.md §2.7): host-side numpy, deterministic per task seed.

Each task is drawn for a target horizon: draw a raw task with the benchmark's `sample_task`,
compute `H = d*(G_0)`, accept when `H == H_target` (up to 500 tries), else keep the draw closest to
the target that lies inside the split's range. Splits are saved as `.npz` with a JSON manifest
(seed, H, N, split per task) and a SHA-256 checksum of the arrays.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jax
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.envs import registry
from bsjax.gilp.types import graph_from_np

MAX_TRIES = 500
SPLITS = ("train", "val", "test_id", "test_ood")
ARRAY_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "hidden", "nmask", "t",
                "budget", "horizon")


def split_range(bench: str, split: str) -> tuple[int, int]:
    """The inclusive horizon range of a split (test_ood uses the OOD range, the rest ID)."""
    return config.HORIZONS[bench]["ood" if split == "test_ood" else "id"]


def target_horizon(bench: str, split: str, index: int) -> int:
    """`lo + (i mod (hi − lo + 1))`: every horizon of the range equally represented."""
    lo, hi = split_range(bench, split)
    return lo + index % (hi - lo + 1)


_DSTAR_CACHE: dict[str, object] = {}


def _dstar_fn(bench: str):
    if bench not in _DSTAR_CACHE:
        _DSTAR_CACHE[bench] = jax.jit(registry.get(bench).dstar)
    return _DSTAR_CACHE[bench]


def horizon_of(bench: str, arrays: dict[str, np.ndarray]) -> int:
    """H = d*(G_0) of a raw task."""
    return int(_dstar_fn(bench)(graph_from_np(arrays)))


def generate_task(bench: str, split: str, index: int) -> dict[str, np.ndarray]:
    """Task `index` of a split: padded arrays with `horizon` and `budget` filled in."""
    seed = config.task_seed(bench, split, index)
    rng = np.random.default_rng(seed)
    target = target_horizon(bench, split, index)
    lo, hi = split_range(bench, split)
    sample_task = registry.get(bench).sample_task
    best, best_horizon = None, None
    for _ in range(MAX_TRIES):
        arrays = sample_task(rng, split)
        if (arrays is None or int(arrays["nmask"].sum()) > config.N_MAX
                or int((arrays["etype"] >= 0).sum()) > config.E_MAX):
            continue
        horizon = horizon_of(bench, arrays)
        if horizon == target:
            best, best_horizon = arrays, horizon
            break
        if lo <= horizon <= hi and (best is None or abs(horizon - target) < abs(best_horizon - target)):
            best, best_horizon = arrays, horizon
    if best is None:
        raise RuntimeError(f"{bench}/{split}/{index}: no task in horizon range {lo}-{hi} "
                           f"after {MAX_TRIES} draws")
    horizon = best_horizon
    best["horizon"] = np.int32(horizon)
    best["budget"] = np.int32(config.step_budget(horizon))
    best["t"] = np.int32(0)
    return best


def stack_tasks(tasks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`[T, ...]` arrays from a list of per-task arrays."""
    return {name: np.stack([np.asarray(task[name]) for task in tasks]) for name in ARRAY_FIELDS}


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over the arrays' names, dtypes, shapes and bytes, in a fixed order."""
    digest = hashlib.sha256()
    for name in ARRAY_FIELDS:
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{value.dtype.str}:{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def generate_split(bench: str, split: str, count: int | None = None,
                   progress=None) -> tuple[dict[str, np.ndarray], dict]:
    """All tasks of a split (or the first `count`) as stacked arrays and a manifest."""
    count = config.SPLIT_SIZES[split] if count is None else count
    tasks = []
    for index in range(count):
        tasks.append(generate_task(bench, split, index))
        if progress is not None:
            progress()
    arrays = stack_tasks(tasks)
    manifest = {
        "bench": bench, "split": split, "count": count,
        "tasks": [{"index": i, "seed": config.task_seed(bench, split, i),
                   "H": int(arrays["horizon"][i]), "N": int(arrays["nmask"][i].sum()),
                   "split": split} for i in range(count)],
        "sha256": checksum(arrays),
    }
    return arrays, manifest


def save_split(out_dir: Path, arrays: dict[str, np.ndarray], manifest: dict) -> Path:
    """Write `BENCH_SPLIT.npz` and `BENCH_SPLIT.json` under `out_dir`; returns the npz path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{manifest['bench']}_{manifest['split']}"
    np.savez_compressed(out_dir / f"{stem}.npz", **arrays)
    (out_dir / f"{stem}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out_dir / f"{stem}.npz"


class TaskFileError(ValueError):
    """A task file that is missing, malformed, or whose checksum does not match its manifest."""


def load_split(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Read a split saved by `save_split`, checking fields, shapes and the checksum."""
    path = Path(path)
    manifest_path = path.with_suffix(".json")
    if not path.is_file() or not manifest_path.is_file():
        raise TaskFileError(f"task file {path} (or its manifest) not found")
    try:
        with np.load(path) as data:
            arrays = {name: data[name] for name in ARRAY_FIELDS}
        manifest = json.loads(manifest_path.read_text())
    except (KeyError, ValueError, OSError) as err:
        raise TaskFileError(f"malformed task file {path}: {err}") from None
    count = len(arrays["status"])
    if arrays["status"].shape != (count, config.N_MAX) \
            or arrays["etype"].shape != (count, config.N_MAX, config.N_MAX):
        raise TaskFileError(f"malformed task file {path}: unexpected array shapes")
    if int((arrays["etype"] >= 0).sum(axis=(1, 2)).max(initial=0)) > config.E_MAX:
        raise TaskFileError(f"malformed task file {path}: a graph has more than {config.E_MAX} edges")
    if checksum(arrays) != manifest.get("sha256"):
        raise TaskFileError(f"task file {path}: checksum does not match its manifest")
    return arrays, manifest
