"""A small HTTP server that speaks the Ollama chat API (`POST /api/chat`, `GET /api/tags`).

Backed by any responder `(system, user) -> str` — the embedded local model by default — so the
`ollama` backend can be exercised for real where no Ollama server can be installed:

    bsjax serve-ollama --port 11435 &        # the local Gemma model behind the Ollama API
    bsjax play --agent mra-llm --llm ollama --llm-host http://127.0.0.1:11435

The local model honours the request's `format` as Ollama does (structured outputs): a JSON
Schema or "json" constrains its decoding (a llama.cpp grammar), and `options` (temperature, seed,
num_predict) are passed on. A responder made with `with_request=True` is called as
`(system, user, request)` to see them.

The tests use it with scripted responders to produce every fault the harness must survive
(HTTP 500, empty or non-JSON replies, slow replies, unknown revision kinds...).

A responder returns the reply text, a `(status, text)` pair, or a dict `{"content": text,
"prompt_eval_count": n, "eval_count": m}` whose token counts are passed on in the response (as
Ollama reports usage); with a plain text reply the counts are omitted.
"""

from __future__ import annotations

import datetime
import http.server
import json
import threading
from collections.abc import Callable

Responder = Callable[[str, str], "str | tuple[int, str] | dict"]


def _handler(responder: Responder, model_name: str, with_request: bool):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

        def do_GET(self):  # noqa: N802
            if self.path.rstrip("/") == "/api/tags":
                self._send(200, json.dumps({"models": [{"name": model_name}]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, b'{"error": "bad request"}')
                return
            if self.path.rstrip("/") != "/api/chat":
                self._send(404, b'{"error": "not found"}')
                return
            messages = request.get("messages", [])
            system = next((m["content"] for m in messages if m.get("role") == "system"), "")
            user = next((m["content"] for m in messages if m.get("role") == "user"), "")
            try:
                result = (responder(system, user, request) if with_request
                          else responder(system, user))
            except Exception as err:  # the responder's failure is the server's 500
                self._send(500, json.dumps({"error": str(err)}).encode())
                return
            usage = {}
            if isinstance(result, dict):
                usage = {k: int(result[k]) for k in ("prompt_eval_count", "eval_count")
                         if result.get(k) is not None}
                result = result.get("content", "")
            status, content = result if isinstance(result, tuple) else (200, result)
            if status != 200:
                self._send(status, json.dumps({"error": content}).encode())
                return
            body = {"model": request.get("model", model_name),
                    "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
                    "message": {"role": "assistant", "content": content},
                    "done": True, "done_reason": "stop", **usage}
            self._send(200, json.dumps(body).encode())

    return Handler


class OllamaAPIServer:
    """A threaded Ollama-API server on loopback; use as a context manager or start/stop."""

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0,
                 model_name: str = "gemma3:270m", with_request: bool = False):
        self._server = http.server.ThreadingHTTPServer(
            (host, port), _handler(responder, model_name, with_request))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> OllamaAPIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def local_responder(backend) -> Callable[[str, str, dict], dict]:
    """A `with_request` responder answering with a local backend under the request's `format`
    (a JSON Schema, "json" or none) and `options`, with Ollama's token counts."""

    def responder(system: str, user: str, request: dict) -> dict:
        fmt = request.get("format") or ""
        if not isinstance(fmt, (dict, str)):
            raise ValueError(f"unsupported format {fmt!r}"[:80])
        options = request.get("options") if isinstance(request.get("options"), dict) else None
        reply = backend.complete(system, user, options, fmt)
        return {"content": reply.content, "prompt_eval_count": reply.tokens_in,
                "eval_count": reply.tokens_out}

    return responder


def serve_local_model(host: str = "127.0.0.1", port: int = 11435, verbose: bool = False) -> None:
    """Serve the embedded local model behind the Ollama API until interrupted."""
    from bsjax.core.llm.backends import LocalBackend
    server = OllamaAPIServer(local_responder(LocalBackend(verbose=verbose)), host, port,
                             with_request=True)
    print(f"serving the local model on {server.url} (Ollama chat API); Ctrl-C to stop", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()
