"""The labelled-transition dataset that backbone training and metrics read (docs/gilp/spec.md §3.5).

A dataset is a plain `dict[str, np.ndarray]` of stacked samples, S samples of N node slots:

| key | shape | dtype | content |
|---|---|---|---|
| status | `[S, N]` | int8 | G_t statuses |
| ntype | `[S, N]` | int8 | node types |
| goal | `[S, N]` | bool | goal mask Z |
| attr | `[S, N, 8]` | float32 | observable attributes |
| etype | `[S, N, N]` | int8 | edge types (-1 none) |
| nmask | `[S, N]` | bool | real nodes |
| anc, hidden, t, budget, horizon | as in `Graph` | | optional, zeros when absent (see below) |
| action | `[S, 3]` | int32 | (kind, i, j) of the labelled candidate |
| valid | `[S]` | bool | `labels(...)["valid"]` |
| delta | `[S, N]` | int8 | Δ* in {−1, 0, +1} (zeros for invalid actions) |
| reward | `[S]` | float32 | r on the modal outcome |
| done | `[S]` | bool | done' |
| risk | `[S]` | float32 | ρ* |
| value | `[S]` | float32 | J_K |
| next_status | `[S, N]` | int8 | modal next statuses |

Models never read the optional graph fields. The decode calls of training and metrics receive
`anc`, `t`, `budget` and `horizon` as stored, and `hidden` zeroed (what planners see). The label
keys are exactly the dict that `envs.common.labels(bench, g, a)` returns, so a builder vmaps
`labels` over (graph, action) pairs and stacks the result next to the graph fields.

**Windows** (ErrorAware's multi-step consistency term, spec §3.4) use the same keys with a
window axis first and a step axis second: `[W, 3, ...]`, where steps 0, 1, 2 are three consecutive
logged transitions `(G_t, a_t), (G_{t+1}, a_{t+1}), (G_{t+2}, a_{t+2})` of one training
trajectory and `delta` is each step's Δ* label. Only the graph fields, `action` and `delta` are
required there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.types import Graph

GRAPH_FIELDS = ("status", "ntype", "goal", "attr", "etype", "nmask")
OPTIONAL_GRAPH_FIELDS = ("anc", "hidden", "t", "budget", "horizon")
LABEL_FIELDS = ("valid", "delta", "reward", "done", "risk", "value", "next_status")
SAMPLE_FIELDS = GRAPH_FIELDS + ("action",) + LABEL_FIELDS
WINDOW_FIELDS = GRAPH_FIELDS + ("action", "delta")
WINDOW_LENGTH = 3

DTYPES = {
    "status": np.int8, "ntype": np.int8, "goal": bool, "attr": np.float32, "etype": np.int8,
    "nmask": bool, "anc": bool, "hidden": np.int8, "t": np.int32, "budget": np.int32,
    "horizon": np.int32, "action": np.int32, "valid": bool, "delta": np.int8,
    "reward": np.float32, "done": bool, "risk": np.float32, "value": np.float32,
    "next_status": np.int8,
}


def _check(data: dict, required: tuple[str, ...], lead: int, what: str) -> int:
    missing = [name for name in required if name not in data]
    if missing:
        raise ValueError(f"{what} is missing fields {missing} (needs {list(required)})")
    # Extra bookkeeping keys a builder may add (episode ids, ...) are ignored.
    leading = {name: np.shape(data[name])[:lead] for name in data if name in DTYPES}
    if len(set(leading.values())) != 1:
        raise ValueError(f"{what} fields disagree on their leading {lead} axes: {leading}")
    if lead == 2 and next(iter(leading.values()))[1] != WINDOW_LENGTH:
        raise ValueError(f"{what} must have {WINDOW_LENGTH} steps per window, got {leading}")
    return int(next(iter(leading.values()))[0])


def validate(data: dict) -> int:
    """Check a sample dataset's fields and leading axis; returns S. Raises ValueError."""
    return _check(data, SAMPLE_FIELDS, 1, "dataset")


def validate_windows(windows: dict) -> int:
    """Check a window dataset (`[W, 3, ...]`); returns W. Raises ValueError."""
    return _check(windows, WINDOW_FIELDS, 2, "window dataset")


def normalise(data: dict) -> dict[str, np.ndarray]:
    """Host arrays with the dtypes of the table (unknown keys are dropped)."""
    return {name: np.asarray(value, DTYPES[name]) for name, value in data.items() if name in DTYPES}


def checksum(data: dict) -> str:
    """SHA-256 over the known fields' names, dtypes, shapes and bytes, in sorted key order."""
    digest = hashlib.sha256()
    for name in sorted(normalise(data)):
        array = np.ascontiguousarray(np.asarray(data[name], DTYPES[name]))
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def take(data: dict, index: np.ndarray) -> dict[str, np.ndarray]:
    """The samples (or windows) at `index` along the leading axis (host-side gather); known
    fields only."""
    return {name: np.asarray(value)[index] for name, value in data.items() if name in DTYPES}


def padded_batches(n: int, batch_size: int,
                   order: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Fixed-size index batches over `n` items; the last partial batch is padded.

    Args:
      n: number of items.
      batch_size: B.
      order: `[n]` visiting order (e.g. a shuffle); default 0..n-1.
    Yields:
      `(index [B] int64, mask [B] bool)`; padded slots repeat item `order[0]` with mask False.
    """
    order = np.arange(n) if order is None else np.asarray(order)
    for start in range(0, n, batch_size):
        index = order[start:start + batch_size]
        mask = np.ones(batch_size, bool)
        if len(index) < batch_size:
            mask[len(index):] = False
            index = np.concatenate([index, np.full(batch_size - len(index), order[0])])
        yield index, mask


def to_device(batch: dict) -> dict:
    """Device arrays (with the table's dtypes) of a host batch."""
    return {name: jnp.asarray(value) for name, value in normalise(batch).items()}


def graph_from_batch(batch: dict) -> Graph:
    """A `Graph` whose leaves keep the batch's leading axes; absent optional fields are zeros."""
    status = jnp.asarray(batch["status"])
    lead, n = status.shape[:-1], status.shape[-1]

    def field(name: str, shape: tuple[int, ...], dtype) -> jnp.ndarray:
        if name in batch:
            return jnp.asarray(batch[name], dtype)
        return jnp.zeros(lead + shape, dtype)

    return Graph(
        status=status.astype(jnp.int8), ntype=field("ntype", (n,), jnp.int8),
        goal=field("goal", (n,), bool), attr=field("attr", (n, config.N_ATTR), jnp.float32),
        etype=field("etype", (n, n), jnp.int8), anc=field("anc", (n, n), bool),
        hidden=field("hidden", (n, config.N_HIDDEN), jnp.int8), nmask=field("nmask", (n,), bool),
        t=field("t", (), jnp.int32), budget=field("budget", (), jnp.int32),
        horizon=field("horizon", (), jnp.int32))


def save_npz(path: str | Path, data: dict) -> Path:
    """Write a dataset (or window set) as an uncompressed `.npz`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **normalise(data))
    return path


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Read a dataset written by `save_npz`."""
    with np.load(Path(path)) as archive:
        return {name: archive[name] for name in archive.files}
