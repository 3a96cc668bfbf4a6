"""Do bsjax's JSON-Schema grammars accept the same texts as llama-cpp-python's?

The embedded backend used to decode under grammars that `llama-cpp-python` built from each call's
JSON Schema; it now builds them itself (`bsjax.core.llm.gbnf`). Greedy constrained decoding
depends on the grammar's language only (which texts, and which prefixes, it allows), so this
script compares the two languages with llama.cpp's own grammar engine on the Gemma vocabulary:
for every schema of `recorded.jsonl`, two GILP schemas and plain JSON mode, it feeds the same
strings — the recorded replies, schema-valid values written with random spacing, and mutations
of them — token by token to both grammars and compares how far each accepts a string and
whether it accepts it whole.

Needs the previous engine, in a virtual environment of its own (it compiles llama.cpp):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF" pip install llama-cpp-python==0.3.36
    pip install -e '.[llm]'
    python experiments/llm/engine-parity/grammar_parity.py      # -> grammar_parity.json
"""

from __future__ import annotations

import ctypes
import json
import random
import sys
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import llama_grammar

from bsjax.core.llm import gbnf
from bsjax.core.llm.backends import local_model_path
from bsjax.core.llm.uniform import sample
from bsjax.gilp.llm.prompts import response_schema

HERE = Path(__file__).parent
VARIANTS = 40  # schema-valid values per schema, each also mutated 6 times


class Checker:
    def __init__(self):
        self.llm = llama_cpp.Llama(str(local_model_path()), vocab_only=True, verbose=False)
        self.eos = self.llm.token_eos()
        self.one = (llama_cpp.llama_token_data * 1)()

    def verdict(self, grammar: str, root: str, text: str) -> tuple[int, bool]:
        """(tokens of `text` the grammar accepts in a row, whether it accepts `text` whole)."""
        sampler = llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, grammar.encode(),
                                                       root.encode())

        def allows(token: int) -> bool:
            self.one[0].id, self.one[0].logit, self.one[0].p = token, 1.0, 0.0
            array = llama_cpp.llama_token_data_array(data=self.one, size=1, selected=-1,
                                                     sorted=False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            return bool(np.isfinite(self.one[0].logit))

        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        accepted = 0
        for token in tokens:
            if not allows(token):
                break
            llama_cpp.llama_sampler_accept(sampler, token)
            accepted += 1
        whole = accepted == len(tokens) and allows(self.eos)
        llama_cpp.llama_sampler_free(sampler)
        return accepted, whole


def previous_grammar(schema):
    grammar = (llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
               if schema is None else
               llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False))
    return grammar._grammar, grammar._root


def spaced(value, pyrandom: random.Random, separators) -> str:
    """`value` as JSON with a random separator after each structural character."""
    text = json.dumps(value, separators=(",", ":"))
    out, in_string = [], False
    for i, char in enumerate(text):
        out.append(char)
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            in_string = not in_string
        if not in_string and char in "{[,:}]":
            out.append(pyrandom.choice(separators))
    return "".join(out)


def mutate(text: str, pyrandom: random.Random) -> str:
    i = pyrandom.randrange(len(text) + 1)
    char = pyrandom.choice(' {}[]",:0123456789.-eEabcnodex_\n\\')
    roll = pyrandom.random()
    if roll < 0.4 and text:
        return text[:i] + text[i + 1:]
    if roll < 0.8:
        return text[:i] + char + text[i:]
    return text[:i] + char + text[i + 1:]


def value_for(schema, rng, pyrandom):
    if schema is None:
        return {"a": [1, 2.5, {"b": "x"}], "c": True}
    value = sample(rng, schema)
    if "reasoning" in schema.get("properties", {}):  # GILP: probe the length and count bounds
        value["reasoning"] = "r" * pyrandom.choice([0, 5, 299, 300, 301])
        value["confidence"] = pyrandom.choice([0, 1, 0.25, 1e-3, -0.5, 12345678901234567])
        state = value["imagined_next_state"]
        if pyrandom.random() < 0.5:
            state["node_7_new_status"] = "failed"
        state["changed_nodes"] = [pyrandom.randrange(0, 30)
                                  for _ in range(pyrandom.choice([0, 1, 3, 24, 25]))]
    return value


def main() -> int:
    rows = [json.loads(line) for line in (HERE / "recorded.jsonl").read_text().splitlines()]
    schemas: dict[str, tuple] = {}
    for row in rows:
        fmt = row["format"] if isinstance(row["format"], dict) else None
        schemas.setdefault(json.dumps(fmt, sort_keys=True), (fmt, []))[1].append(row["reply"])
    for extra in (response_schema(["execute(node_3)", "assign(node_2,node_7)"], [0, 3, 5]),
                  response_schema(), None):
        schemas.setdefault(json.dumps(extra, sort_keys=True), (extra, []))
    checker = Checker()
    rng, pyrandom = np.random.default_rng(0), random.Random(0)
    strings = whole = 0
    differences = []
    for schema, replies in schemas.values():
        previous = previous_grammar(schema)
        ours = (gbnf.grammar_for(schema), "root")
        texts = list(replies)
        for _ in range(VARIANTS):
            separators = ("", " ") if schema and pyrandom.random() < 0.8 else ("", " ", "  ",
                                                                                 "\n")
            text = spaced(value_for(schema, rng, pyrandom), pyrandom, separators)
            texts += [text] + [mutate(text, pyrandom) for _ in range(6)]
        for text in texts:
            a, b = checker.verdict(*previous, text), checker.verdict(*ours, text)
            strings += 1
            whole += a[1]
            if a != b and len(differences) < 20:
                differences.append({"text": text[:200], "previous": a, "bsjax": b})
    summary = {"schemas": len(schemas), "strings": strings, "accepted_whole": whole,
               "differences": len(differences), "examples": differences,
               "previous_engine": f"llama-cpp-python {llama_cpp.__version__}"}
    (HERE / "grammar_parity.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("schemas", "strings", "accepted_whole",
                                              "differences")}))
    return 0 if not differences else 1


if __name__ == "__main__":
    sys.exit(main())
