"""What both domains share; it imports neither.

- `errors` — `UsageError` (one line, exit code 2) and `LLMError`.
- `files` — atomic writes, JSON-lines reading, a run directory's parts.
- `progress` — live progress lines and bars.
- `stats` — Wilson score intervals and head-to-head win rates.
- `checks` — checks of command-line input shared by every command.
- `fastpath` — exact, faster forms of `jax.random.bits`, `jnp.argmax` and `jax.random.categorical`.
- `llm` — LLM backends (local llama.cpp, Ollama, uniform, none), structured calls under a JSON
  Schema, the call cache, the local grammar and an Ollama-API server for the local model.
"""
