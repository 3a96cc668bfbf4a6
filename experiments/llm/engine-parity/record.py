"""Run a bsjax command and record every call of the embedded model: its inputs and its reply.

    python experiments/llm/engine-parity/record.py OUT.jsonl play --agent lm-only --llm local \\
        --boards B01 --seeds 1 --out /tmp/lm

Each line: system, user, options, format (the JSON Schema, "json" or ""), reply, tokens_in,
tokens_out. `replay.py` then asks the same calls of the installed engine.
"""

from __future__ import annotations

import json
import sys
import threading

from bsjax.cli import main
from bsjax.core.llm import backends


def record_into(path: str) -> None:
    out = open(path, "a", encoding="utf-8")
    lock = threading.Lock()
    complete = backends.LocalBackend.complete

    def recorded(self, system, user, options=None, format=None):
        reply = complete(self, system, user, options, format)
        with lock:
            out.write(json.dumps({"system": system, "user": user, "options": options,
                                  "format": format, "reply": reply.content,
                                  "tokens_in": reply.tokens_in,
                                  "tokens_out": reply.tokens_out}) + "\n")
            out.flush()
        return reply

    backends.LocalBackend.complete = recorded


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: record.py OUT.jsonl BSJAX-COMMAND...")
    record_into(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
