"""Write your own question-scoring rule and play it: in memory, and by name from the CLI.

A rule is a pure function of the turn's `QuestionFeatures` (the look-ahead of every question,
its one-step value, the bonuses the paper's rule uses) and of its params, which are traced: a
sweep over them compiles once. Plug it into a planner with `rule=`; register a planner that
uses it to play it by name (`bsjax.run`, a study file).

    python examples/custom_scoring_rule.py --boards B01,B02,B03 --seeds 1
"""

from __future__ import annotations

import argparse
import dataclasses

import bsjax
from bsjax.battleship.agents import WMAAgent, register_agent
from bsjax.battleship.planning import eig, scoring


@bsjax.scoring_rule(bonus=0.02)
def eig_bonus(q: bsjax.QuestionFeatures, params):
    """The question's one-step value plus `bonus` × its noisy-channel information gain (bits),
    in place of the paper's heuristic bonuses (split, region mass, cluster relevance)."""
    return q.raw + params["bonus"] * eig.expected_information_gain(q.p_yes, q.epsilon)


@register_agent
@dataclasses.dataclass(frozen=True)
class EIGBonusWMA(WMAAgent):
    """WMA with the EIG-bonus rule, playable by name: `RunConfig(agent="wma-eig")`."""

    rule: scoring.ScoringRule = eig_bonus
    name = "wma-eig"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--boards", default="all")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--particles", type=int, default=500)
    args = parser.parse_args(argv)
    games = dict(boards=args.boards, seeds=args.seeds, particles=args.particles, progress=False)
    results = {"wma": bsjax.play("wma", **games),
               "wma-eig": bsjax.play("wma-eig", **games),
               # the same rule swept over its weight: one compiled program, three points
               "wma-eig sweep": bsjax.play("wma", rule=eig_bonus,
                                           params={"bonus": [0.0, 0.02, 0.05]}, **games)}
    for name, res in results.items():
        for _, row in res.summary().iterrows():
            label = f"{name} bonus={row['bonus']}" if "bonus" in row else name
            print(f"{label:22s} F1 {row['avg_f1']:.3f}  wins {int(row['wins'])}/"
                  f"{int(row['games'])}  questions {row['avg_questions']:.1f}")
    return results


if __name__ == "__main__":
    main()
