"""llama.cpp in-process for the embedded model: its server engine, one slot, no network use.

The embedded backend runs llama.cpp through `xllamacpp`, which ships llama.cpp's C++ server as a
prebuilt CPU wheel (manylinux2014, AVX2 without AVX-512 or AMX code, so it runs on any x86-64 CPU
with AVX2, and installs in seconds). bsjax uses the engine, not its HTTP face: completions are
in-process calls (`handle_completions`). The engine does also listen on a loopback port, used
here only to tokenise; that port asks for a per-process random key.

The engine is configured as bsjax's replies were first made: one slot (so no call shares a batch
with another), flash attention off, the full sliding-window KV cache (so cells can be dropped
from any position), batches of 512 tokens.
"""

from __future__ import annotations

import json
import secrets
import urllib.request

N_BATCH = 512


class Engine:
    """llama.cpp's server engine with a GGUF model on the CPU: one slot of `n_ctx` cells.

    `complete(request)` is one `/completion` request (llama.cpp's server fields: `prompt` as
    token ids, `n_predict`, `temperature`, `grammar`, `cache_prompt`, ...), answered in-process;
    `tokenize(text, bos)` the model's tokens for `text`, special tokens parsed.
    """

    def __init__(self, path: str, n_ctx: int, n_threads: int, verbose: bool = False):
        import xllamacpp
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = int(n_ctx)
        params.n_batch = params.n_ubatch = N_BATCH
        params.n_parallel = 1
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = int(n_threads)
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.swa_full = True
        params.warmup = False
        if not verbose:
            params.verbosity = -1
        self._key = secrets.token_hex(16)
        params.api_keys = [self._key]
        params.endpoint_metrics = True
        self._server = xllamacpp.Server(params)
        # The engine's constructor returns before its task loop has started; a server dropped
        # then waits forever for a loop that missed the stop. A metrics request is answered by
        # that loop, so once it returns the loop runs and the engine can be dropped any time.
        self._server.handle_metrics()
        self._url = self._server.listening_address.rstrip("/")
        # Straight to the loopback port, whatever proxy the environment names.
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def complete(self, request: dict) -> dict:
        """The engine's reply to one completion request; raises RuntimeError for its errors
        (a prompt longer than the context, a grammar it cannot parse, ...)."""
        reply = self._server.handle_completions(dict(request, stream=False))
        if not isinstance(reply, dict) or "error" in reply:
            error = reply.get("error") if isinstance(reply, dict) else reply
            message = error.get("message") if isinstance(error, dict) else error
            raise RuntimeError(str(message))
        return reply

    def tokenize(self, text: str, bos: bool) -> list[int]:
        body = json.dumps({"content": text, "add_special": bool(bos), "parse_special": True})
        request = urllib.request.Request(
            f"{self._url}/tokenize", data=body.encode("utf-8"),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"})
        with self._http.open(request, timeout=60) as response:
            return [int(t) for t in json.loads(response.read())["tokens"]]


__all__ = ["Engine", "N_BATCH"]
