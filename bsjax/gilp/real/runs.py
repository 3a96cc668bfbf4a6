"""Runs of the real-LLM loop (`bsjax.gilp.real.episode`): every (task, method) episode of a run appended
whole to an `events.jsonl`, a rerun skipping the complete ones (resume), the per-episode sidecar
`episodes.jsonl` (wall time, driver counters, cost), and the T7 summaries read back from both."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bsjax.core import files
from bsjax.gilp import events
from bsjax.gilp.llm.driver import GilpDriver
from bsjax.gilp.methods import MethodConfig, get_method
from bsjax.gilp.real.episode import RealConfig, TaskRef, run_episode

SIDECAR = "episodes.jsonl"


def complete_keys(path: Path, repair: bool = True) -> set[tuple]:
    """Episode keys complete in an events file; with `repair`, incomplete episodes and torn lines
    are removed from the file (rewritten atomically) so that appending whole episodes keeps it
    valid."""
    if not path.exists():
        return set()
    lines = path.read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            row = json.loads(line)
            parsed.append((line, row, events.episode_key(row)))
        except (ValueError, KeyError, TypeError):
            parsed.append((line, None, None))
    by_key: dict[tuple, list[dict]] = {}
    for _, row, key in parsed:
        if key is not None:
            by_key.setdefault(key, []).append(row)
    complete = set()
    for key, rows in by_key.items():
        ts = sorted(r.get("t", -1) for r in rows)
        last = max(rows, key=lambda r: r.get("t", -1))
        if ts == list(range(len(rows))) and last.get("done") \
                and not any(r.get("done") for r in rows if r is not last):
            complete.add(key)
    keep = [line for line, _, key in parsed if key in complete]
    if repair and len(keep) != len(lines):
        files.write_text_atomic(path, "".join(line + "\n" for line in keep))
    return complete


def run_real(out: str | Path, methods: Sequence[str | MethodConfig], tasks: Sequence[TaskRef],
             driver: GilpDriver, models: Mapping[str, object] | object | None = None,
             seed: int = 0, cfg: RealConfig = RealConfig(),
             log: Callable[[str], None] | None = None) -> dict:
    """Run every (task, method) episode not already complete in `out` (an events.jsonl path, or
    a directory that gets one), appending each finished episode's rows in one write; then its
    sidecar row to `episodes.jsonl` beside it.

    Args:
      out: events file or run directory.
      methods: LLM methods (names or configs).
      tasks: the tasks, run task-major in this order.
      driver: the LLM driver.
      models: a backbone, or `{bench: backbone}`; may be None for Agent-Replan only.
      seed: episode seed s.
      cfg: loop settings.
      log: progress sink (one line per episode), e.g. `print` to stderr.
    Returns:
      `{"events": path, "run": n, "skipped": n, "episodes": [sidecar rows of this call]}`.
    """
    path = Path(out)
    if path.is_dir() or path.suffix != ".jsonl":
        path = path / events.EVENTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    done_keys = complete_keys(path)
    sidecar = path.with_name(SIDECAR)
    methods = [get_method(m) if isinstance(m, str) else m for m in methods]
    ran, skipped, infos = 0, 0, []
    for task in tasks:
        for method in methods:
            key = (method.name, task.bench, task.split, task.task, int(seed))
            if key in done_keys:
                skipped += 1
                continue
            model = models.get(task.bench) if isinstance(models, Mapping) else models
            rows, info = run_episode(method, task, driver, model, seed, cfg)
            events.write_events(path, rows, append=True)
            with sidecar.open("a") as f:
                f.write(json.dumps(info) + "\n")
            done_keys.add(key)
            ran += 1
            infos.append(info)
            if log is not None:
                log(f"{method.name} {task.bench}/{task.source}[{task.index}] H={task.H}: "
                    f"{'success' if info['success'] else 'fail'} in {info['steps']} steps, "
                    f"{info['calls']} calls, {info['wall_s']:.1f}s"
                    + (" (timeout)" if info["timeout"] else ""))
    return {"events": str(path), "run": ran, "skipped": skipped, "episodes": infos}


def read_real_run(events_path: str | Path) -> tuple[list[dict], list[dict]]:
    """`(event rows, sidecar episode rows)` of a real run's `events.jsonl` (a directory means
    its `events.jsonl`); a missing sidecar gives no episode rows."""
    path = Path(events_path)
    path = path / events.EVENTS_FILE if path.is_dir() else path
    side_path = path.with_name(SIDECAR)
    side = [json.loads(line) for line in side_path.read_text().splitlines()
            if line.strip()] if side_path.exists() else []
    return events.read_events(path), side


def summarise_real(events_path: str | Path) -> dict[str, dict]:
    """`summarise_real_rows` of a real run's files."""
    return summarise_real_rows(*read_real_run(events_path))


def summarise_real_rows(rows: list[dict], side: list[dict]) -> dict[str, dict]:
    """Per method: n, SR, HSR (committed, draft), calls/step, correction and risk-gate rates,
    JSON-fail rate per call, fallbacks, timeouts, tokens per task, $ per task at the driver's
    price row and at GPT-4o-mini prices, and backend seconds per call (JSON-fail rate, $ per task
    and seconds come from the sidecar rows `side`)."""
    from bsjax.gilp import metrics
    out = {}
    for method, s in metrics.summarise(rows).items():
        mine = [r for r in side if r["method"] == method]
        calls = sum(r["calls"] for r in mine)
        backend = sum(r["backend_calls"] for r in mine)
        out[method] = {
            "n": s["episodes"], "sr": s["sr"], "sr_ci": s["sr_ci"], "hsr": s["hsr"],
            "hsr_ci": s["hsr_ci"], "hsr_draft": s["hsr_draft"], "steps": s["steps"],
            "calls_step": s["calls_step"], "corr_rate": s["corr_rate"],
            "risk_rate": s["risk_rate"], "parse_fail_rate": s["parse_fail_rate"],
            "json_fail_rate": (sum(r["json_failures"] for r in mine) / calls) if calls else None,
            "fallbacks": s["fallbacks"], "timeouts": s["timeouts"], "tok_task": s["tok_task"],
            "usd_task": (sum(r["usd"] for r in mine) / len(mine)) if mine else None,
            "usd_task_gpt4o_mini": (sum(r["usd_gpt4o_mini"] for r in mine) / len(mine))
            if mine else None,
            "usd_1k_gpt4o_mini": s["usd_1k"],
            "sec_per_call": (sum(r["backend_seconds"] for r in mine) / backend) if backend
            else None,
            "calls": calls, "backend_calls": backend,
        }
    return out
