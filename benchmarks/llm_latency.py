"""Latency and throughput of the embedded model's calls, and how to schedule them.

Builds a fixed set of realistic calls — MRA-LLM revisions (compact JSON state and symbolic
preview, per-call schema) and LM-only turns (board, status, grouped question ids, per-turn schema
of the legal actions) from seeded random game states — and answers them with the local model
under each scheduling setting: `WxT` is W llama.cpp engines answering W calls at once with T
threads each (`1x2`, the default of `LocalBackend`: one engine, calls queue; `2x1`: two
concurrent engines). Every batch of `--batch` calls is submitted together, as a turn of that many
games would be.

One JSON line per (caller, setting) is appended to OUT/llm_latency.jsonl: per-call seconds
(median, p95), calls/s of the batch, prompt and reply tokens, the system-prefix reuses, a hash
of the replies (equal across settings when replies do not depend on the scheduling), and the
machine (CPU count, versions, the command).

    .venv/bin/python benchmarks/llm_latency.py                  # both callers, two settings
    .venv/bin/python benchmarks/llm_latency.py --callers captain --batch 1 --settings 1x2
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bsjax.battleship.harness.summaries import percentile
from bsjax.battleship.llm import lm_only, revision
from bsjax.core.llm.backends import LocalBackend
from bsjax.core.llm.structured import Call, LLMClient

OPTIONS = {"revision": {"temperature": 0.0, "num_predict": 128},
           "captain": {"temperature": 0.0, "num_predict": 32}}


def revision_calls(rng: np.random.Generator, n: int) -> list[Call]:
    calls = []
    for _ in range(n):
        budgets = [int(rng.integers(3, 8)), int(rng.integers(0, 4)), int(rng.integers(2, 6))]
        record = {"turn": int(rng.integers(4, 40)), "confidence": float(rng.uniform(0.3, 0.95)),
                  "pred_error_ema": float(rng.uniform(0, 0.6)),
                  "calibration_error_ema": float(rng.uniform(0, 0.4)),
                  "frontier_count": int(rng.integers(0, 8)),
                  "largest_cluster": int(rng.integers(0, 5)),
                  "best_hit_prob": float(rng.uniform(0.1, 0.9)),
                  "best_question_value": float(rng.uniform(0, 0.5)),
                  "questions_left": int(rng.integers(0, 15)), "policy_mode": 0,
                  "question_mode": int(rng.integers(0, 3)), "next_kind": int(rng.integers(0, 3)),
                  "preview_budgets": budgets, "preview_salvage_start_turn": 15,
                  "preview_exploit_threshold": 0.5}
        state, preview = revision.host_state(record, 1.0)
        calls.append(Call(revision.SCHEMA_SYSTEM_PROMPT,
                          revision.user_prompt(state, preview, compact=True),
                          revision.response_schema(preview)))
    return calls


def captain_calls(rng: np.random.Generator, n: int) -> list[Call]:
    calls = []
    for i in range(n):
        turn = int(rng.integers(0, 40))
        revealed = rng.choice(64, size=turn, replace=False)
        hits, misses = np.zeros(64, bool), np.zeros(64, bool)
        for cell in revealed:
            (hits if rng.random() < 0.3 else misses)[cell] = True
        captain = lm_only.LMOnlyCaptain([i])
        captain.asked[0] = set(rng.choice(83, size=int(rng.integers(0, 6)), replace=False).tolist())
        calls.append(captain.call(0, hits, misses, turn, 40 - int(hits.sum() + misses.sum()),
                                  15 - len(captain.asked[0])))
    return calls


def engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"xllamacpp {version('xllamacpp')}"
    except PackageNotFoundError:
        return "unknown"


def measure(caller: str, calls: list[Call], setting: str, batch: int) -> dict:
    workers, threads = (int(x) for x in setting.split("x"))
    backend = LocalBackend(n_threads=threads, workers=workers)
    client = LLMClient(backend, None, OPTIONS[caller])
    client.ask(calls[0])  # warm-up: load pages, evaluate the system prefix
    seconds, tokens_in, tokens_out, valid, replies = [], [], [], 0, []
    start = time.perf_counter()
    for lo in range(0, len(calls), batch):
        for answer in client.ask_all(calls[lo:lo + batch]):
            seconds.append(answer.latency_s)
            tokens_in.append(answer.tokens_in)
            tokens_out.append(answer.tokens_out)
            valid += answer.ok
            replies.append(answer.text or "")
    wall = time.perf_counter() - start
    return {"caller": caller, "setting": setting, "workers": workers, "threads": threads,
            "calls": len(calls), "batch": batch,
            "valid_replies": valid,
            "seconds_median": round(statistics.median(seconds), 4),
            "seconds_p95": round(percentile(seconds, 0.95), 4),
            "seconds_mean": round(statistics.fmean(seconds), 4),
            "calls_per_second": round(len(calls) / wall, 4), "wall_seconds": round(wall, 2),
            "tokens_in_mean": round(statistics.fmean(tokens_in), 1),
            "tokens_out_mean": round(statistics.fmean(tokens_out), 1),
            "prefix_reuses": backend.prefix_reuses,
            "replies_sha256": hashlib.sha256("\x00".join(replies).encode()).hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", default="revision,captain")
    parser.add_argument("--settings", default="1x2,2x1",
                        help="WORKERSxTHREADS, comma list")
    parser.add_argument("--calls", type=int, default=24, help="calls per caller and setting")
    parser.add_argument("--batch", type=int, default=4, help="calls submitted together")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    callers = [c for c in args.callers.split(",") if c]
    settings = [s for s in args.settings.split(",") if s]
    for setting in settings:
        parts = setting.split("x")
        if not (len(parts) == 2 and all(p.isdigit() and int(p) > 0 for p in parts)):
            parser.error(f"--settings takes WORKERSxTHREADS (got {setting!r})")
    if any(c not in OPTIONS for c in callers) or not settings or args.calls < 2 \
            or args.batch < 1:
        parser.error("bad --callers, --settings, --calls or --batch")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "processor": platform.processor() or platform.machine(),
               "date": datetime.date.today().isoformat(), "engine": engine_version(),
               "command": "python benchmarks/llm_latency.py " + " ".join(argv or sys.argv[1:])}
    for caller in callers:
        rng = np.random.default_rng(args.seed)
        calls = (revision_calls if caller == "revision" else captain_calls)(rng, args.calls)
        for setting in settings:
            row = {**measure(caller, calls, setting, args.batch), **machine, "seed": args.seed}
            print(json.dumps(row), flush=True)
            with open(out / "llm_latency.jsonl", "a") as handle:
                handle.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
