"""Where a batch's device time goes: JAX's profiler trace read back as tables.

`jax.profiler.trace(dir, create_perfetto_trace=True)` writes the timeline of everything the
device ran as Chrome-trace JSON (`plugins/profile/<run>/perfetto_trace.json.gz`). `read_trace`
loads the device's kernels from the newest one under `dir`, and:

- `op_table` sums them by name (XLA names a fusion's kernel after its instruction; `hlo_op` is
  the thunk that launched it, on a GPU often a command buffer holding many kernels);
- `busy_summary` says how much of the span the device was busy at all: at small batches a GPU
  turn is mostly gaps between kernels, at large ones it is the kernels;
- `gap_table` sums the idle time between kernels by the pair around it (a pair that recurs once a
  turn is a round trip through the host, such as a loop's test read back);
- `dispatches` counts the compiled programs the host ran.

On a CPU the "device" is XLA's CPU client thread, whose ops nest (a `while` holds its body's
ops), so loops and calls are left out of the table there; on a GPU the stream's kernels do not
nest.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

# CPU ops that contain other ops' time (their bodies run inside them).
_CONTAINERS = ("while", "conditional", "call", "end: ")


def trace_file(log_dir: str | Path) -> Path:
    """The newest `perfetto_trace.json.gz` under `log_dir` (raises FileNotFoundError)."""
    found = sorted(Path(log_dir).glob("plugins/profile/*/perfetto_trace.json.gz"))
    if not found:
        raise FileNotFoundError(f"no perfetto_trace.json.gz under {log_dir}/plugins/profile")
    return found[-1]


def _events(log_dir: str | Path) -> list[dict]:
    """The newest trace's events, parsed once per file (a large batch's trace is hundreds of
    MB of JSON, and `read_trace` and `dispatches` both read it)."""
    path = trace_file(log_dir)
    stat = path.stat()
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1)
def _parsed(path: str, mtime_ns: int, size: int) -> list[dict]:
    del mtime_ns, size  # part of the cache key: a rewritten file is read again
    return json.loads(gzip.decompress(Path(path).read_bytes()))["traceEvents"]


def read_trace(log_dir: str | Path) -> list[dict]:
    """The device's kernel events of the newest trace under `log_dir`: dicts with `op` (the
    kernel's name), `hlo_op` (the instruction that launched it, where the trace says), `ts`
    and `dur` (µs), in start order. Device: a `/device:...` process's stream threads where the
    trace has one, else the host's XLA client threads (a CPU run)."""
    events = _events(log_dir)
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    devices = {pid for pid, name in processes.items() if name.startswith("/device:")}

    def on_device(event) -> bool:
        if devices:
            thread = threads.get((event["pid"], event.get("tid")), "")
            return event["pid"] in devices and "stream" in thread.lower()
        thread = threads.get((event["pid"], event.get("tid")), "")
        return thread.startswith("tf_XLA") and "hlo_op" in event.get("args", {}) \
            and not event["name"].startswith(_CONTAINERS)

    kernels = [{"op": e["name"], "hlo_op": e.get("args", {}).get("hlo_op"),
                "ts": float(e["ts"]), "dur": float(e.get("dur", 0.0))}
               for e in events if e.get("ph") == "X" and on_device(e)]
    return sorted(kernels, key=lambda k: k["ts"])


def dispatches(log_dir: str | Path) -> int:
    """Compiled programs the host ran in the newest trace under `log_dir` (each an executable's
    dispatch: at small batches on a GPU, each costs more than most of a turn's kernels)."""
    events = _events(log_dir)
    return sum(1 for e in events if e.get("ph") == "X"
               and e.get("name") == "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice")


def op_table(kernels: list[dict]) -> list[dict]:
    """Kernels summed by op, most time first: `op`, `launches`, `total_us`, `mean_us` and
    `share` (of all kernel time)."""
    totals: dict[str, list[float]] = {}
    for k in kernels:
        entry = totals.setdefault(k["op"], [0, 0.0])
        entry[0] += 1
        entry[1] += k["dur"]
    overall = sum(t for _, t in totals.values()) or 1.0
    rows = [{"op": op, "launches": n, "total_us": round(t, 3), "mean_us": round(t / n, 3),
             "share": round(t / overall, 4)} for op, (n, t) in totals.items()]
    return sorted(rows, key=lambda r: -r["total_us"])


def gap_table(kernels: list[dict]) -> list[dict]:
    """The idle time between kernels, summed by the pair around it (the kernel that ended last
    before the gap, the one after it), most first:
    `before`, `after`, `gaps`, `total_us`, `median_us`. A pair that recurs once a turn with a
    long median is a round trip through the host (e.g. a loop's test read back)."""
    pairs: dict[tuple[str, str], list[float]] = {}
    end, last = -float("inf"), None  # the latest end so far and the kernel that ends there
    for previous, k in zip(kernels, kernels[1:]):
        if previous["ts"] + previous["dur"] > end:
            end, last = previous["ts"] + previous["dur"], previous["op"]
        if k["ts"] > end:
            pairs.setdefault((last, k["op"]), []).append(k["ts"] - end)
    rows = [{"before": a, "after": b, "gaps": len(v), "total_us": round(sum(v), 3),
             "median_us": round(sorted(v)[len(v) // 2], 3)} for (a, b), v in pairs.items()]
    return sorted(rows, key=lambda r: -r["total_us"])


def busy_summary(kernels: list[dict]) -> dict:
    """`kernels`, `span_us` (first start to last end), `busy_us` (time any kernel ran: the
    union of their intervals), `kernel_us` (their summed durations) and `busy_share`."""
    if not kernels:
        return {"kernels": 0, "span_us": 0.0, "busy_us": 0.0, "kernel_us": 0.0, "busy_share": 0.0}
    busy, end = 0.0, -float("inf")
    for k in kernels:  # sorted by start: extend the union interval by interval
        start, stop = k["ts"], k["ts"] + k["dur"]
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    span = max(k["ts"] + k["dur"] for k in kernels) - kernels[0]["ts"]
    return {"kernels": len(kernels), "span_us": round(span, 3), "busy_us": round(busy, 3),
            "kernel_us": round(sum(k["dur"] for k in kernels), 3),
            "busy_share": round(busy / span, 4) if span > 0 else 1.0}


__all__ = ["busy_summary", "dispatches", "gap_table", "op_table", "read_trace", "trace_file"]
