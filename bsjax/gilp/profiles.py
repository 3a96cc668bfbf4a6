"""Run profiles: how much a GILP run generates, trains and evaluates, as data (docs/gilp/spec.md §7).

One `Profile` answers every "how much" a command asks: `bsjax gilp train` reads its task counts and
epochs, `bsjax gilp run` its test tasks and seeds, `bsjax gilp calibrate` its tasks, and
`bsjax gilp paper` all of it plus the paper's extra stages (which backbones, calibration, the τ_low
sweep). A smaller or larger run is `dataclasses.replace(get_profile("quick"), name=..., ...)`;
the name keys the work directory's artefacts, so a changed profile needs its own name.
"""

from __future__ import annotations

import dataclasses

from bsjax.gilp.config import ParametricConfig

ALL_BACKBONES = ("MLP", "GCN", "MPNN", "GPS", "ActionNode", "ErrorAware")


@dataclasses.dataclass(frozen=True)
class Profile:
    """How much a run uses (frozen, hashable).

    Attributes:
      name: profile name; keys the work directory's data and checkpoints.
      train_tasks, val_tasks: tasks of the train / val splits used for backbone data.
      test_tasks: (ID, OOD) test tasks used for held-out backbone metrics and evaluation.
      epochs: training epochs.
      seeds: episode seeds per task in evaluations.
      backbones: architectures `bsjax gilp paper` trains and measures (Table 4's metrics).
      table4_backbones: architectures whose planners (standalone MPC, Hybrid-Full) the paper
        command evaluates.
      calibrate: the paper command's calibration budget (`behaviour.calibrate.BUDGETS`), or None
        to use the simulator's shipped parameters.
      tau_lows: the τ_low values of the Table 5b sweep.
      sweep_tasks, sweep_seeds: val tasks per benchmark and seeds of the sweep.
      planner: the paper command's parametric planner settings (None: the spec's
        `ParametricConfig()`); `bsjax gilp run` always plans with the spec's.
    """

    name: str
    train_tasks: int
    val_tasks: int
    test_tasks: tuple[int, int]
    epochs: int
    seeds: int
    backbones: tuple[str, ...] = ("MLP", "MPNN")
    table4_backbones: tuple[str, ...] = ("MPNN",)
    calibrate: str | None = None
    tau_lows: tuple[float, ...] = (0.30,)
    sweep_tasks: int = 4
    sweep_seeds: int = 1
    planner: ParametricConfig | None = None


# Cheaper parametric planners for the reduced profiles (MPC: 4 rollouts of 2 steps; MCTS: 8
# simulations); their cost is what dominates a CPU evaluation.
SMALL_PLANNER = ParametricConfig(mpc_candidates=4, mpc_horizon=2, mcts_simulations=8,
                                 mcts_max_depth=4)

PROFILES = {
    "smoke": Profile("smoke", 20, 10, (6, 4), epochs=2, seeds=2, planner=SMALL_PLANNER),
    # Two backbones, no calibration, a reduced evaluation: `bsjax gilp paper --profile quick`
    # fits in 15 minutes on 2 CPU cores.
    "quick": Profile("quick", 60, 20, (12, 8), epochs=4, seeds=2, tau_lows=(0.20, 0.30, 0.40),
                     sweep_tasks=10, sweep_seeds=2, planner=SMALL_PLANNER),
    # The paper's protocol: all six backbones, calibration on val, 8 seeds (hours on a CPU).
    "paper": Profile("paper", 500, 100, (60, 40), epochs=50, seeds=8, backbones=ALL_BACKBONES,
                     table4_backbones=ALL_BACKBONES, calibrate="paper",
                     tau_lows=(0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.50), sweep_tasks=100,
                     sweep_seeds=8),
}
ALIASES = {"full": "paper"}


def get_profile(name: str) -> Profile:
    """A profile by name ("full" is the paper profile's other name); ValueError if unknown."""
    name = ALIASES.get(name, name)
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r} (choose from {', '.join(PROFILES)}, full)")
    return PROFILES[name]


__all__ = ["ALIASES", "ALL_BACKBONES", "PROFILES", "Profile", "SMALL_PLANNER", "get_profile"]
