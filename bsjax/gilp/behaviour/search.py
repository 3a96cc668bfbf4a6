"""The calibration's search (docs/gilp/spec.md §5.2): one stage's parameters minimised inside their
boxes — the start point, a scrambled-Sobol sweep, then Nelder–Mead in logit coordinates — with a
journal that replays the evaluations of an interrupted run. The objective is any
`params -> (value, residual rows, summaries)` (with `many(sets)` for batched simulation)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from bsjax.gilp.behaviour.params import SimParams, to_dict

Log = Callable[[str], None]


def with_values(params: SimParams, values: Mapping[str, float]) -> SimParams:
    """`params` with `values` set; π_fc and π_val rescaled (in their initial ratio) so that π
    sums to 1 when π_we or π_dep change (π_we + π_dep is capped at 0.95)."""
    new = params.replace(**{k: float(v) for k, v in values.items()})
    if "pi_we" in values or "pi_dep" in values:
        we, dep = float(new.pi_we), float(new.pi_dep)
        if we + dep > 0.95:  # keep some fc/val mass
            scale = 0.95 / (we + dep)
            we, dep = we * scale, dep * scale
        ratio = SimParams().pi_fc / (SimParams().pi_fc + SimParams().pi_val)
        rest = 1.0 - we - dep
        new = new.replace(pi_we=we, pi_dep=dep, pi_fc=rest * ratio, pi_val=rest * (1 - ratio))
    return new


def _to_box(z: np.ndarray, space) -> dict[str, float]:
    lo, hi = np.array([s[1] for s in space]), np.array([s[2] for s in space])
    return {s[0]: float(v) for s, v in zip(space, lo + (hi - lo) / (1.0 + np.exp(-z)))}


def _to_logit(values: Mapping[str, float], space) -> np.ndarray:
    out = []
    for name, lo, hi in space:
        u = np.clip((float(values[name]) - lo) / (hi - lo), 1e-3, 1 - 1e-3)
        out.append(np.log(u / (1 - u)))
    return np.asarray(out)


@dataclasses.dataclass
class StageResult:
    """One fitted stage: best values, objective, residual rows, evaluations and seconds."""

    values: dict[str, float]
    objective: float
    start_objective: float
    rows: list[dict]
    evaluations: int
    seconds: float
    summaries: dict


class Journal:
    """Objective values by parameter set, appended to a JSONL file as they are computed.

    The first line fingerprints the calibration's settings; a journal written under other
    settings is replaced. Keys are every parameter's value (rounded), so a stage-2 point
    after a different stage-1 fit is a different key."""

    def __init__(self, path: Path | None, fingerprint: dict):
        self.path, self.values = path, {}
        if path is None:
            return
        text = path.read_text() if path.is_file() else ""
        lines = text.splitlines()
        head = json.dumps({"fingerprint": fingerprint}, sort_keys=True)
        if lines and lines[0] == head:
            if not text.endswith("\n"):  # a cut last line: start the next entry on its own
                with path.open("a") as f:
                    f.write("\n")
            for line in lines[1:]:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by the interruption
                    continue
                self.values[tuple(row["key"])] = float(row["objective"])
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(head + "\n")

    @staticmethod
    def key(stage: int, params: SimParams) -> tuple:
        return (stage, *(round(v, 6) for v in to_dict(params).values()))

    def get(self, stage: int, params: SimParams) -> float | None:
        return self.values.get(self.key(stage, params))

    def add(self, stage: int, params: SimParams, objective: float) -> None:
        key = self.key(stage, params)
        self.values[key] = objective
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps({"key": list(key), "objective": objective}) + "\n")


def fit_stage(stage: int, objective, base: SimParams, space, sobol: int, nm_evals: int,
              seed: int = 0, log: Log = lambda line: None, batch: int = 1,
              journal: Journal | None = None) -> StageResult:
    """Minimise `objective(params)[0]` over the parameters of `space` (the rest of `base` kept).

    The start point (`base`'s values) is evaluated first, then `sobol` scrambled-Sobol points
    of the box, then Nelder–Mead from the best so far for `nm_evals` evaluations, in logit
    coordinates with an initial simplex of ±0.5 logit per axis (the objective is piecewise
    constant under common random numbers, so a tiny default simplex would not move). Sobol
    points and the initial simplex are simulated `batch` sets at a time (`objective.many`
    when the objective has it). `journal` replays evaluations of an interrupted run.
    """
    from scipy.optimize import minimize
    from scipy.stats import qmc
    start = time.perf_counter()
    journal = journal or Journal(None, {})
    cache: dict[tuple, float] = {}
    best: dict = {}
    names = [name for name, _, _ in space]
    many = getattr(objective, "many", lambda sets: [objective(p) for p in sets])

    def key(values):
        return tuple(round(values[name], 6) for name in names)

    def record(values, value, detail=None):
        cache[key(values)] = value
        if not best or value < best["objective"]:
            best.update(objective=value, values=dict(values), detail=detail)
        log(f"stage {stage} eval {len(cache)}: objective {value:.5f} "
            f"(best {best['objective']:.5f})")

    def evaluate_many(points: list[dict]) -> None:
        fresh: dict[tuple, tuple[dict, SimParams]] = {}  # in order, each point once
        for values in points:
            if key(values) in cache or key(values) in fresh:
                continue
            params = with_values(base, values)
            known = journal.get(stage, params)
            if known is not None:
                record(values, known)
            else:
                fresh[key(values)] = (values, params)
        todo = list(fresh.values())
        for lo in range(0, len(todo), max(1, batch)):
            part = todo[lo:lo + max(1, batch)]
            for (values, params), result in zip(part, many([p for _, p in part])):
                journal.add(stage, params, float(result[0]))
                record(values, float(result[0]), result)

    def evaluate(values: dict[str, float]) -> float:
        evaluate_many([values])
        return cache[key(values)]

    start_values = {name: float(getattr(base, name)) for name in names}
    start_objective = evaluate(start_values)
    if sobol > 0:
        unit = qmc.Sobol(len(space), scramble=True, seed=seed).random(sobol)
        evaluate_many([{name: lo + (hi - lo) * float(x) for (name, lo, hi), x in zip(space, u)}
                       for u in unit])
    if nm_evals > 0:
        z0 = _to_logit(best["values"], space)
        simplex = np.vstack([z0] + [z0 + 0.5 * np.eye(len(space))[i] for i in range(len(space))])
        evaluate_many([_to_box(z, space) for z in simplex])
        minimize(lambda z: evaluate(_to_box(z, space)), z0, method="Nelder-Mead",
                 options={"maxfev": nm_evals, "initial_simplex": simplex, "xatol": 1e-3,
                          "fatol": 1e-7})
    if best["detail"] is None:  # the best point was replayed from the journal: its rows
        best["detail"] = objective(with_values(base, best["values"]))
        if abs(float(best["detail"][0]) - best["objective"]) > 1e-9 * max(1.0, best["objective"]):
            log(f"stage {stage}: warning: the journal's best objective {best['objective']:.5f} "
                f"re-evaluates to {float(best['detail'][0]):.5f} (was the code changed?)")
    _, rows, summaries = best["detail"]
    return StageResult(values=best["values"], objective=best["objective"],
                       start_objective=start_objective, rows=rows,
                       evaluations=len(cache), seconds=time.perf_counter() - start,
                       summaries=summaries)
