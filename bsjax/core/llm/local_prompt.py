"""One llama.cpp context for the embedded model: Gemma's turn format, a reused system-prompt
prefix and constrained greedy decoding.

Gemma has no system role: its template puts the system text at the head of the first user turn
(`<start_of_turn>user\\n{system}\\n\\n{user}<end_of_turn>\\n<start_of_turn>model\\n`). The prompt is
tokenised as two parts, the system part (the *prefix*, the same on every call of a caller) and the
rest. The prefix is evaluated once; each call then drops the KV cells after it and evaluates only
its own part. Every call therefore starts from the same state — the prefix alone, computed the
same way — so a reply depends on the prompt only, never on the calls before it.

Replies under a format are decoded greedily under a llama.cpp grammar (`local_grammar`): a JSON
Schema, or any JSON object for `"json"`.
"""

from __future__ import annotations

import ctypes
import json

from bsjax.core.errors import LLMError

TURN_OPEN = "<start_of_turn>user\n"
TURN_CLOSE = "<end_of_turn>\n<start_of_turn>model\n"
STOP = ["<end_of_turn>"]

_QUIET = None


def quiet_llama_logs() -> None:
    """Route llama.cpp's own log lines nowhere (they are printed on stderr by default)."""
    global _QUIET
    import llama_cpp
    if _QUIET is None:
        _QUIET = llama_cpp.llama_log_callback(lambda level, text, data: None)
    llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))


def split_prompt(system: str, user: str) -> tuple[str, str]:
    """The prompt's text as (prefix, rest): the system part and the user part of Gemma's turn."""
    prefix = TURN_OPEN + (f"{system}\n\n" if system else "")
    return prefix, user + TURN_CLOSE


class PromptModel:
    """A Llama context that keeps the KV state of the last system prefix between calls."""

    def __init__(self, path: str, n_ctx: int, seed: int, n_threads: int, verbose: bool = False):
        try:
            from llama_cpp import Llama
        except ImportError as err:
            raise LLMError("llama-cpp-python is not installed: pip install 'bsjax[llm]'") \
                from err
        if not verbose:
            quiet_llama_logs()
        self.llm = Llama(model_path=path, n_ctx=n_ctx, seed=seed, verbose=verbose,
                         n_threads=n_threads, n_threads_batch=n_threads)
        if not verbose:  # Llama() installs its own logger on load
            quiet_llama_logs()
        self._prefix_text: str | None = None
        self._prefix: list[int] = []
        self.prefix_reuses = 0

    def set_threads(self, n_threads: int) -> None:
        """Threads for decoding and prompt evaluation from the next call on."""
        import llama_cpp
        llama_cpp.llama_set_n_threads(self.llm._ctx.ctx, int(n_threads), int(n_threads))

    def tokens(self, text: str, bos: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=True)

    def count_tokens(self, text: str) -> int:
        return len(self.tokens(text))

    def _start_from_prefix(self, prefix_text: str) -> list[int]:
        """Leave exactly the prefix in the KV cache (evaluating it only when it changed)."""
        llm = self.llm
        if prefix_text != self._prefix_text:
            self._prefix_text, self._prefix = prefix_text, self.tokens(prefix_text, bos=True)
        n = len(self._prefix)
        kept = (llm.n_tokens >= n and list(llm.input_ids[:n]) == self._prefix
                and llm._ctx.kv_cache_seq_rm(-1, n, -1))
        if kept:
            llm.n_tokens = n
            self.prefix_reuses += 1
        else:
            llm.reset()
            llm.eval(self._prefix)
        return self._prefix

    def complete(self, system: str, user: str, fmt: dict | str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0) -> tuple[str, int, int]:
        """(reply text, prompt tokens, completion tokens) for one call under `fmt` (a JSON
        Schema, "json", or "" for free text)."""
        from llama_cpp import LogitsProcessorList, llama_grammar

        from bsjax.core.llm.local_grammar import GreedyGrammar, grammar_for
        prefix_text, rest = split_prompt(system, user)
        prompt = self._start_from_prefix(prefix_text) + self.tokens(rest)
        kwargs = dict(prompt=prompt, max_tokens=max_tokens, temperature=temperature, seed=seed,
                      stop=STOP)
        constrained = None
        if fmt != "" and fmt is not None:
            schema = fmt if isinstance(fmt, dict) else None
            if temperature == 0.0:  # the same tokens as llama.cpp's grammar sampler, faster
                constrained = GreedyGrammar(self.llm, *grammar_for(schema))
                kwargs["logits_processor"] = LogitsProcessorList([constrained])
            else:
                kwargs["grammar"] = (llama_grammar.LlamaGrammar.from_json_schema(
                    json.dumps(schema), verbose=False) if schema is not None else
                    llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF,
                                                           verbose=False))
        try:
            reply = self.llm.create_completion(**kwargs)
            if constrained is not None:
                constrained.check()
        finally:
            if constrained is not None:
                constrained.close()
        usage = reply.get("usage") or {}
        return (reply["choices"][0].get("text") or "", usage.get("prompt_tokens"),
                usage.get("completion_tokens"))


__all__ = ["PromptModel", "quiet_llama_logs", "split_prompt"]
