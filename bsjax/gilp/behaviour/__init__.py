"""The behavioural LLM simulator of GILP (docs/gilp/spec.md §5.2): parameters, the pure `sim_step`,
and the batched episode runner."""

from bsjax.gilp.behaviour.agent import SimState, StepKeys, init_state, sim_step
from bsjax.gilp.behaviour.params import SimParams, default_params, load_params, save_params
from bsjax.gilp.behaviour.records import StepRecord
from bsjax.gilp.behaviour.run import (
                                SimRun,
                                records_to_events,
                                run_simulated,
                                run_simulated_many,
                                run_simulated_sweep,
)

__all__ = ["SimParams", "SimRun", "SimState", "StepKeys", "StepRecord", "default_params",
           "init_state", "load_params", "records_to_events", "run_simulated", "run_simulated_many",
           "run_simulated_sweep", "save_params", "sim_step"]
