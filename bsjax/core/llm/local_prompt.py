"""One llama.cpp slot for the embedded model: Gemma's turn format, a reused system-prompt prefix
and constrained decoding.

Gemma has no system role: its template puts the system text at the head of the first user turn
(`<start_of_turn>user\\n{system}\\n\\n{user}<end_of_turn>\\n<start_of_turn>model\\n`). The prompt is
tokenised as two parts, the system part (the *prefix*, the same on every call of a caller) and the
rest. The prefix is evaluated once; each call then drops the KV cells after it and evaluates only
its own part. Every call therefore starts from the same state — the prefix alone, computed the
same way — so a reply depends on the prompt only, never on the calls before it.

The engine keeps the longest run of tokens a request shares with its slot (`cache_prompt`). So
that this run is exactly the prefix, each call first sends the prefix with one stand-in token
after it (a token the rest does not start with): the slot then holds the prefix and that token,
and the call's own request shares the prefix and no more. The first call of a prefix sends the
prefix alone to a cleared slot, so that its cells are computed as one batch of their own.

Replies under a format are decoded under a llama.cpp grammar (`gbnf`): a JSON Schema's, or any
JSON object for `"json"`. At temperature 0 the engine picks the highest-scoring token the grammar
allows; above 0 it draws through top-k 40, top-p 0.95, min-p 0.05 and the temperature, seeded.
"""

from __future__ import annotations

from bsjax.core.errors import LLMError
from bsjax.core.llm import gbnf

TURN_OPEN = "<start_of_turn>user\n"
TURN_CLOSE = "<end_of_turn>\n<start_of_turn>model\n"


def split_prompt(system: str, user: str) -> tuple[str, str]:
    """The prompt's text as (prefix, rest): the system part and the user part of Gemma's turn."""
    prefix = TURN_OPEN + (f"{system}\n\n" if system else "")
    return prefix, user + TURN_CLOSE


class PromptModel:
    """The engine's slot, keeping the KV state of the last system prefix between calls."""

    def __init__(self, path: str, n_ctx: int, n_threads: int, verbose: bool = False):
        try:
            from bsjax.core.llm.local_llama import Engine
            self.engine = Engine(path, n_ctx=n_ctx, n_threads=n_threads, verbose=verbose)
        except ImportError as err:
            raise LLMError("xllamacpp is not installed: pip install 'bsjax[llm]'") from err
        except (RuntimeError, OSError, ValueError) as err:
            raise LLMError(f"llama.cpp cannot load {path}: {err}") from err
        self._prefix_text: str | None = None
        self._prefix: list[int] = []
        self._holds_prefix = False  # the slot's cells begin with exactly the prefix's
        self.prefix_reuses = 0

    def tokens(self, text: str, bos: bool = False) -> list[int]:
        return self.engine.tokenize(text, bos=bos)

    def count_tokens(self, text: str) -> int:
        return len(self.tokens(text))

    def _start_from_prefix(self, prefix_text: str, first: int) -> list[int]:
        """Leave the slot holding the prefix's cells first: alone, computed afresh, when the
        prefix is new; else the kept cells and one stand-in token (≠ `first`) after them."""
        kept = self._holds_prefix and prefix_text == self._prefix_text
        if prefix_text != self._prefix_text:
            self._prefix_text, self._prefix = prefix_text, self.tokens(prefix_text, bos=True)
        self._holds_prefix = False  # until the engine has answered
        stand_in = [1 if first == 0 else 0] if kept else []
        self.engine.complete({"prompt": self._prefix + stand_in, "n_predict": 1,
                              "temperature": 0.0, "cache_prompt": kept, "id_slot": 0})
        self.prefix_reuses += kept
        self._holds_prefix = True
        return self._prefix

    def complete(self, system: str, user: str, fmt: dict | str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0) -> tuple[str, int, int]:
        """(reply text, prompt tokens, completion tokens) for one call under `fmt` (a JSON
        Schema, "json", or "" for free text)."""
        prefix_text, rest_text = split_prompt(system, user)
        rest = self.tokens(rest_text)
        prompt = self._start_from_prefix(prefix_text, rest[0] if rest else -1) + rest
        request = {"prompt": prompt, "n_predict": int(max_tokens), "cache_prompt": True,
                   "id_slot": 0, "temperature": float(temperature), "seed": int(seed),
                   "top_k": 40, "top_p": 0.95, "min_p": 0.05}
        if fmt != "" and fmt is not None:
            request["grammar"] = gbnf.grammar_for(fmt if isinstance(fmt, dict) else None)
        try:
            reply = self.engine.complete(request)
        except RuntimeError:
            self._holds_prefix = False  # what the slot holds after a failed request is unknown
            raise
        choice = reply["choices"][0]
        usage = reply.get("usage") or {}
        n_out = usage.get("completion_tokens")
        if isinstance(n_out, int) and choice.get("finish_reason") == "stop":
            n_out -= 1  # the engine counts the end-of-turn token; bsjax counts the reply's own
        return choice.get("text") or "", len(prompt), n_out


__all__ = ["PromptModel", "split_prompt"]
