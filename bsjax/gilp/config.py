"""Static GILP configuration: codes, vocabularies, sizes and thresholds (docs/gilp/spec.md §2, §8).

Everything here is a Python constant or a frozen, hashable dataclass closed over by `jit`; nothing
in this module is ever traced.
"""

from __future__ import annotations

import dataclasses

# Padded sizes (spec §2.1).
N_MAX = 24
A_MAX = 96
# Most edges one graph may hold: the MPNN passes messages over a padded edge list this long
# (generated tasks hold at most ~35; `generate` rejects a task file with more).
E_MAX = 64
N_ATTR = 8
N_HIDDEN = 5

# Status codes and the rank that orders them (spec §2.1).
PENDING, ACTIVE, COMPLETED, FAILED, SKIPPED = 0, 1, 2, 3, 4
N_STATUS = 5
STATUS_NAMES = ("pending", "active", "completed", "failed", "skipped")
STATUS_RANK = (0, 1, 2, -1, 2)

# Node types: one global vocabulary over the four benchmarks.
SUBTASK, TOOL, RESOURCE, JOB, COMPONENT = 0, 1, 2, 3, 4
NODE_TYPE_NAMES = ("subtask", "tool", "resource", "job", "component")

# Edge types; `etype[u, v] = -1` means no edge.
NO_EDGE = -1
DEPENDS_ON, DATA_JSON, DATA_TABLE, DATA_TEXT, DATA_BLOB, CAN_SERVE, ASSIGNED, PROPAGATES = range(8)
N_EDGE_TYPES = 8
EDGE_TYPE_NAMES = ("depends_on", "data_json", "data_table", "data_text", "data_blob", "can_serve",
                   "assigned", "propagates")
# Edge types that carry structure for the ancestor closure `anc` (types 0-4 and 7).
STRUCTURAL_EDGE_TYPES = (DEPENDS_ON, DATA_JSON, DATA_TABLE, DATA_TEXT, DATA_BLOB, PROPAGATES)

# RepairFlow hidden-field columns.
H_FAULT, H_LATENT, H_DIAGNOSED, H_CHECKED, H_ISOLATED = range(5)

# Action roles used by decode tables: the first argument, the second argument, any other node.
ROLE_ARG1, ROLE_ARG2, ROLE_OTHER = 0, 1, 2

# Oracle distance saturation for dead ends (spec §2.6).
UNSOLV = 99

BENCHMARKS = ("taskgraph", "toolchain", "resourcealloc", "repairflow")
BENCH_ID = {name: i + 1 for i, name in enumerate(BENCHMARKS)}
# Action kinds per benchmark, in App. C order (kind index = position).
ACTION_KINDS = {
    "taskgraph": ("execute", "skip", "retry"),
    "toolchain": ("call", "verify", "rollback"),
    "resourcealloc": ("assign", "release", "escalate"),
    "repairflow": ("diagnose", "repair", "isolate"),
}
# Horizon ranges (inclusive) for the ID splits (train/val/test-ID) and for test-OOD (spec §2.7).
HORIZONS = {
    "taskgraph": {"id": (3, 10), "ood": (8, 15)},
    "toolchain": {"id": (4, 9), "ood": (7, 12)},
    "resourcealloc": {"id": (5, 10), "ood": (9, 15)},
    "repairflow": {"id": (4, 9), "ood": (7, 12)},
}
SPLIT_SIZES = {"train": 500, "val": 100, "test_id": 60, "test_ood": 40}
SPLIT_OFFSET = {"train": 0, "val": 100_000, "test_id": 200_000, "test_ood": 300_000}
HORIZON_BUCKETS = ((0, 3), (4, 6), (7, 10), (11, 10_000))
HORIZON_BUCKET_NAMES = ("H<=3", "4-6", "7-10", ">10")


def node_name(v: int) -> str:
    """`node_3`: how prompts, explanations and event rows name node 3."""
    return f"node_{int(v)}"


def task_seed(bench: str, split: str, index: int) -> int:
    """Seed of task `index` of a split: `1_000_000·bench_id + split_offset + i` (spec §2.7)."""
    return 1_000_000 * BENCH_ID[bench] + SPLIT_OFFSET[split] + index


def step_budget(horizon: int) -> int:
    """B = H + max(3, ⌈H/2⌉) (spec §2.6)."""
    return horizon + max(3, -(-horizon // 2))


# The longest budget any task can have (H = 15 -> 23): the length of a scanned episode.
B_MAX = step_budget(15)


@dataclasses.dataclass(frozen=True)
class GilpConfig:
    """Static settings of the planners and labels (spec §2.6, §4, §8).

    Attributes:
      value_horizon: K of the short-horizon value J_K.
      gamma: discount of J_K, MPC and MCTS.
      skeleton_k: top-k rows by value and by risk in the skeleton.
      tau_high, tau_low: consistency-gate bands.
      rho_th: risk threshold of the risk gate and the [HIGH RISK] tag.
      max_corrections: correction calls per step.
    """

    value_horizon: int = 4
    gamma: float = 0.9
    skeleton_k: int = 4
    tau_high: float = 0.70
    tau_low: float = 0.30
    rho_th: float = 0.65
    max_corrections: int = 1


@dataclasses.dataclass(frozen=True)
class ParametricConfig:
    """Static settings of the parametric planners (spec §4.3, §4.4; bsjax choices).

    Attributes:
      mpc_candidates: M, root candidates rolled out by MPC (top Ĵ_K).
      mpc_horizon: K, imagined steps per MPC rollout.
      mpc_root_valid_only: restrict MPC's root candidates to those predicted valid
        (`p_valid ≥ 0.5`; all real ones if none is), as the greedy continuation and the MCTS
        priors are. On by default (bsjax choice; spec §4.3 ranks all candidates): with an
        imperfect backbone a predicted-invalid root action scores as "wait one step", and
        replanning from the unchanged state repeats it until the budget runs out (TaskGraph,
        a 10-epoch MPNN: SR 0.10 with the literal rule, 0.70 with this one).
      mcts_simulations: simulations per MCTS search.
      mcts_max_depth: depth cap; the effective cap is `min(mcts_max_depth, B − t)`.
      mcts_pb_c_init: PUCT constant c_1.
      mcts_prior_temperature: priors are `Ĵ_K / temperature`.
      mcts_dirichlet_fraction: root exploration noise (0 = none).
      episode_chunk: episodes per jitted call of the runner (memory bound).
    """

    mpc_candidates: int = 8
    mpc_horizon: int = 3
    mpc_root_valid_only: bool = True
    mcts_simulations: int = 32
    mcts_max_depth: int = 6
    mcts_pb_c_init: float = 1.25
    mcts_prior_temperature: float = 0.1
    mcts_dirichlet_fraction: float = 0.0
    episode_chunk: int = 256
