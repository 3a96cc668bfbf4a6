"""The examples run (small sizes), so they never rot."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from bsjax.battleship import agents

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_custom_scoring_rule_plugs_into_the_harness():
    module = _load("custom_scoring_rule")
    assert agents.AGENTS["wma-eig"] is module.EIGBonusWMA
    results = module.main(["--boards", "B01", "--seeds", "1", "--particles", "50"])
    assert set(results) == {"wma", "wma-eig", "wma-eig sweep"}
    for res in results.values():
        assert res.f1.shape[1] == 1 and ((0.0 < res.f1) & (res.f1 <= 1.0)).all()
        assert (res.questions > 0).all()  # every planner asks on B01
    sweep = results["wma-eig sweep"]
    assert sweep.f1.shape == (3, 1)
    # The registered agent is the rule at its default weight: the sweep's 0.02 point, exactly.
    assert (sweep.records["cell"][1] == results["wma-eig"].records["cell"][0]).all()
