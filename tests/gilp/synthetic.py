"""Hand-built graphs and a synthetic labelled dataset for backbone tests (no environment needed).

The labelling rule is a toy benchmark: an action is valid iff its first argument is PENDING; a
valid action moves arg1 +1 (PENDING -> ACTIVE); reward, done, risk and value are simple functions
of that. It only has to be learnable, not meaningful.
"""

from __future__ import annotations

import numpy as np

from bsjax.gilp import config, types
from bsjax.gilp.envs.common import decode_table, decode_with_table, roles_of

# A decode table for the toy rule: kind 0 moves arg1 PENDING -> ACTIVE; the rest uses the ladder.
TOY_TABLE = decode_table([(0, config.ROLE_ARG1, config.PENDING, +1, config.ACTIVE),
                          (1, config.ROLE_ARG1, config.PENDING, +1, config.SKIPPED)])


def toy_decode(g, a, dirs):
    """`(g, a, dir[N]) -> status[N]` through `TOY_TABLE` (the Bench.decode signature)."""
    return decode_with_table(TOY_TABLE, g.status, roles_of(a, g.status.shape[0]), a[0], dirs)


def random_graph_np(rng: np.random.Generator, n_real: int, n_max: int = config.N_MAX,
                    edge_p: float = 0.3) -> dict[str, np.ndarray]:
    """A graph with real nodes 0..n_real-1, random statuses, types, goals, attrs and a DAG."""
    g = types.empty_graph_np(n_max)
    g["nmask"][:n_real] = True
    g["status"][:n_real] = rng.integers(0, config.N_STATUS, n_real)
    g["ntype"][:n_real] = rng.integers(0, 5, n_real)
    g["goal"][:n_real] = rng.random(n_real) < 0.4
    g["attr"][:n_real] = rng.random((n_real, config.N_ATTR)).astype(np.float32)
    for u in range(n_real):
        for v in range(u + 1, n_real):
            if rng.random() < edge_p:
                g["etype"][u, v] = rng.integers(0, config.N_EDGE_TYPES)
    g["anc"] = types.ancestor_closure_np(g["etype"], g["nmask"])
    g["budget"], g["horizon"] = np.int32(10), np.int32(5)
    return g


def random_action(rng: np.random.Generator, n_real: int) -> np.ndarray:
    """(kind, i, j): j is a second real node for kind 0 half of the time, else -1."""
    kind = int(rng.integers(0, 3))
    i = int(rng.integers(0, n_real))
    j = int(rng.integers(0, n_real)) if (kind == 0 and rng.random() < 0.5) else -1
    return np.array([kind, i, j], np.int32)


def toy_labels(g: dict, action: np.ndarray) -> dict:
    """The toy rule's labels in the `dataset_format` layout."""
    kind, i = int(action[0]), int(action[1])
    valid = bool(g["status"][i] == config.PENDING)
    delta = np.zeros_like(g["status"])
    next_status = g["status"].copy()
    if valid:
        delta[i] = 1
        next_status[i] = config.ACTIVE if kind == 0 else (config.SKIPPED if kind == 1 else config.COMPLETED)
    done = bool(np.all(~g["goal"] | (next_status == config.COMPLETED)))
    return {"valid": valid, "delta": delta, "reward": np.float32(0.1 if valid else -0.05),
            "done": done, "risk": np.float32(0.0 if valid else 1.0),
            "value": np.float32(0.3 if valid else -0.1), "next_status": next_status}


def toy_dataset(seed: int, n_samples: int, n_max: int = config.N_MAX) -> dict[str, np.ndarray]:
    """`n_samples` labelled toy samples stacked in the `dataset_format` layout."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_samples):
        n_real = int(rng.integers(3, 9))
        g = random_graph_np(rng, n_real, n_max)
        action = random_action(rng, n_real)
        rows.append({**g, "action": action, **toy_labels(g, action)})
    return {name: np.stack([np.asarray(row[name]) for row in rows]) for name in rows[0]}


def toy_windows(seed: int, n_windows: int, n_max: int = config.N_MAX) -> dict[str, np.ndarray]:
    """`[W, 3, ...]` windows: three labelled steps on one graph, each applying the toy rule."""
    rng = np.random.default_rng(seed)
    windows = []
    for _ in range(n_windows):
        n_real = int(rng.integers(3, 9))
        g = random_graph_np(rng, n_real, n_max)
        steps = []
        for _ in range(3):
            action = random_action(rng, n_real)
            labels = toy_labels(g, action)
            steps.append({**{k: np.copy(v) for k, v in g.items()}, "action": action, **labels})
            g = {**g, "status": labels["next_status"]}
        windows.append({name: np.stack([np.asarray(s[name]) for s in steps]) for name in steps[0]})
    return {name: np.stack([w[name] for w in windows]) for name in windows[0]}


def event_row(**kw) -> dict:
    """A valid GILP event row (`bsjax.gilp.events` schema); keyword arguments override fields.
    Committed atoms double as the draft's unless the draft is given."""
    base = dict(method="Agent-Replan", bench="taskgraph", task=0, split="id", H=3, seed=0, t=0,
                action="execute(node_1)", valid=True, calls=1, tok_in=100, tok_out=50,
                draft_atoms=[], committed_atoms=[], halluc_draft=[], halluc_committed=[],
                cons=None, cons_after=None, corrected=False, rho_hat=None, rho_eff=None,
                risk_fired=False, rho_star=0.0, bad_outcome=False, live_false_atoms=0,
                parse_fail=False, fallback=False, done=False, success=False, dead_end=False)
    base.update(kw)
    if "committed_atoms" in kw and "draft_atoms" not in kw:
        base["draft_atoms"], base["halluc_draft"] = base["committed_atoms"], base["halluc_committed"]
    return base
