"""Ask the installed embedded model the recorded calls, one after another in one process, and
compare each reply (text and token counts) with the recorded one.

    python experiments/llm/engine-parity/replay.py [RECORDED.jsonl] [--out replay.json]

Writes a JSON summary: calls, identical replies, identical by caller, the first differences,
seconds, the engine's version.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from bsjax.core.llm.backends import LocalBackend

HERE = Path(__file__).parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recorded", nargs="?", default=str(HERE / "recorded.jsonl"))
    parser.add_argument("--out", default=str(HERE / "replay.json"))
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in Path(args.recorded).read_text().splitlines()]
    backend = LocalBackend()
    calls, same, differences = Counter(), Counter(), []
    start = time.perf_counter()
    for i, row in enumerate(rows):
        reply = backend.complete(row["system"], row["user"], row["options"], row["format"])
        calls[row["caller"]] += 1
        if (reply.content, reply.tokens_in, reply.tokens_out) \
                == (row["reply"], row["tokens_in"], row["tokens_out"]):
            same[row["caller"]] += 1
        elif len(differences) < 10:
            differences.append({"call": i, "caller": row["caller"], "recorded": row["reply"],
                                "replayed": reply.content, "tokens": [reply.tokens_in,
                                                                      reply.tokens_out]})
        print(f"{i + 1}/{len(rows)} calls, {sum(same.values())} identical", file=sys.stderr)
    summary = {"calls": len(rows), "identical": sum(same.values()),
               "by_caller": {c: [same[c], n] for c, n in calls.items()},
               "differences": differences, "prefix_reuses": backend.prefix_reuses,
               "seconds": round(time.perf_counter() - start, 1),
               "engine": f"xllamacpp {version('xllamacpp')}", "recorded": Path(args.recorded).name}
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("calls", "identical", "by_caller")}))
    return 0 if summary["identical"] == summary["calls"] else 1


if __name__ == "__main__":
    sys.exit(main())
