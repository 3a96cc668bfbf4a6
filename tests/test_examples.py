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
    assert set(results) == {"wma", "wma-eig"}
    for summary in results.values():
        assert summary["games"] == 1 and 0.0 < summary["avg_f1"] <= 1.0
        assert summary["avg_questions"] > 0  # both planners ask on B01
