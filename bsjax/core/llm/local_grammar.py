"""Grammar-constrained greedy decoding for the embedded model, the model's own choice checked first.

llama-cpp-python applies a GBNF grammar by testing every token of the vocabulary against it at every
step; with Gemma's 262k-token vocabulary that costs about as much as the model itself on a 2-core
CPU. At temperature 0 the constrained choice is the highest-scoring token the grammar allows, so it
is enough to test the model's unconstrained argmax first and fall back to the whole vocabulary
only when the grammar rejects it (llama.cpp's own `common_sampler` does the same). The replies are
the same as with the built-in grammar sampler, token for token (tests/test_llm.py).
"""

from __future__ import annotations

import ctypes
import json

import numpy as np

TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # llama_token_data


def grammar_for(schema: dict | None) -> tuple[str, str]:
    """GBNF text and root rule for a JSON Schema (None: any JSON object), as llama-cpp-python's
    chat handler builds them for `response_format` (an unsupported schema falls back to JSON)."""
    from llama_cpp import llama_grammar
    grammar = None
    if schema is not None:
        try:
            grammar = llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema),
                                                                  verbose=False)
        except Exception:  # noqa: BLE001 — llama-cpp-python falls back the same way
            grammar = None
    if grammar is None:
        grammar = llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
    return grammar._grammar, grammar._root


class GreedyGrammar:
    """A llama-cpp-python logits processor: greedy decoding under a grammar.

    Call with `(input_ids, scores)` at each step (scores indexed by token id); returns scores with
    every token but the step's choice at -inf. The tokens appended since the previous call (the
    previous choice) are fed to the grammar first. Use once per completion, then `check()` and
    `close()`.

    Attributes:
      fast, full: steps decided by the one-token check / by filtering the whole vocabulary.
      error: what went wrong while decoding, if anything (the reply was ended there).
    """

    def __init__(self, llm, grammar: str, root: str = "root"):
        import llama_cpp
        self._lib = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar.encode("utf-8"), root.encode("utf-8"))
        if not self._sampler:
            raise ValueError("llama.cpp rejected the grammar")
        self._seen: int | None = None
        self._one = (llama_cpp.llama_token_data * 1)()
        self._full: np.ndarray | None = None
        self._end = int(llm.token_eos())
        self.fast = self.full = 0
        self.error: Exception | None = None

    def _apply(self, data, size: int) -> None:
        array = self._lib.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))

    def __call__(self, input_ids, scores: np.ndarray) -> np.ndarray:
        # llama-cpp-python calls this through ctypes and ignores what it raises (decoding would
        # go on unconstrained): keep the error, end the reply, let `check()` raise it.
        if self.error is None:
            try:
                return self._constrain(input_ids, scores)
            except Exception as err:  # noqa: BLE001 — reported by check()
                self.error = err
        out = np.full_like(scores, -np.inf)
        out[self._end] = 0.0
        return out

    def check(self) -> None:
        """Raise what went wrong while decoding (the reply is then cut short)."""
        if self.error is not None:
            raise RuntimeError(f"constrained decoding failed: {self.error}")

    def _constrain(self, input_ids, scores: np.ndarray) -> np.ndarray:
        n = len(input_ids)
        if self._seen is not None:
            for token in input_ids[self._seen:n]:
                self._lib.llama_sampler_accept(self._sampler, int(token))
        self._seen = n
        choice = int(np.argmax(scores))
        self._one[0].id, self._one[0].logit, self._one[0].p = choice, float(scores[choice]), 0.0
        self._apply(self._one, 1)
        if np.isfinite(self._one[0].logit):
            self.fast += 1
        else:  # the grammar rejects the model's choice: the best token it allows
            self.full += 1
            if self._full is None or len(self._full) != len(scores):
                self._full = np.zeros(len(scores), TOKEN_DATA)
                self._full["id"] = np.arange(len(scores), dtype=np.int32)
            self._full["logit"], self._full["p"] = scores, 0.0
            self._apply(self._full.ctypes.data_as(ctypes.POINTER(self._lib.llama_token_data)),
                        len(scores))
            if not np.isfinite(self._full["logit"]).any():
                raise ValueError("the grammar allows no token here")
            choice = int(np.argmax(self._full["logit"]))
        out = np.full_like(scores, -np.inf)
        out[choice] = scores[choice]
        return out

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None


__all__ = ["GreedyGrammar", "grammar_for"]
