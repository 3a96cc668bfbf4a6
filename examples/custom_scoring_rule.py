"""Write your own question-scoring rule as a function of the belief and plug it into WMA.

The harness is untouched: subclass `WMAAgent`, replace `score_questions` (it receives the weighted
particle set, the hit-probability map and the game's summary, and returns one value per catalog
template), register the class, and play it like any built-in agent.

    python examples/custom_scoring_rule.py --boards B01,B02,B03 --seeds 1
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from bsjax.battleship.agents import WMAAgent, register_agent
from bsjax.battleship.harness.experiment import RunConfig, run
from bsjax.battleship.planning import eig, sim


@register_agent
@dataclasses.dataclass(frozen=True)
class EIGBonusWMA(WMAAgent):
    """WMA whose questions are worth their one-step value plus an information bonus.

    The paper's heuristic bonuses (split, region mass, cluster relevance) are replaced by
    `bonus * EIG`, the noisy-channel information gain in bits.
    """

    bonus: float = 0.02
    name = "wma-eig"

    def score_questions(self, parts, p, unknown, hit_cells, hits, total, coarse_phase):
        look = sim.lookahead(self.config, parts, sim.answers(sim.template_bits(), parts), unknown)
        raw = sim.raw_question_values(look, hits, total)
        return raw + self.bonus * eig.expected_information_gain(look.p_yes, self.config.epsilon)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--boards", default="all")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--particles", type=int, default=500)
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for agent in ("wma", "wma-eig"):
            cfg = RunConfig(agent=agent, boards=args.boards, seeds=args.seeds,
                            particles=args.particles)
            summary = run(cfg, Path(tmp) / agent)
            results[agent] = summary
            print(f"{agent:8s} F1 {summary['avg_f1']:.3f}  wins {summary['wins']}/"
                  f"{summary['games']}  questions {summary['avg_questions']:.1f}")
    return results


if __name__ == "__main__":
    main()
