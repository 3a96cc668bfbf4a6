"""How a run gets its LLM: the LLM flags' checks, the client (backend, call cache, options) and
the host steps of the agents that call one (MRA-LLM's revision requests, the LM-only captain).

`cfg` is a `harness.run_config.RunConfig`; everything here reads only its `llm*`, `model`,
`run_seed` and `verbose` fields.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bsjax.core.errors import UsageError

LLM_FORMATS = ("schema", "free")


def validate_llm(cfg) -> None:
    """The LLM flags: backend, host, model, timeout, format. Raises UsageError."""
    from bsjax.core.llm.backends import BACKENDS, check_host, check_model
    if cfg.llm not in BACKENDS:
        raise UsageError(f"unknown --llm {cfg.llm!r} (choose from {', '.join(BACKENDS)})")
    if cfg.llm_format not in LLM_FORMATS:
        raise UsageError(f"unknown --llm-format {cfg.llm_format!r} (choose from "
                         f"{', '.join(LLM_FORMATS)})")
    if cfg.llm == "uniform" and cfg.llm_format != "schema":
        raise UsageError("--llm uniform draws from each call's JSON Schema: it needs "
                         "--llm-format schema")
    for flag, value, check in (("--llm-host", cfg.llm_host, check_host),
                               ("--model", cfg.model, check_model)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise UsageError(f"{flag} must be a string (got {value!r})")
        try:
            check(value)
        except ValueError as err:
            raise UsageError(str(err)) from None
        if cfg.llm != "ollama":
            raise UsageError(f"{flag} is for --llm ollama (the backend here is {cfg.llm})")
    if isinstance(cfg.llm_timeout, bool) or not isinstance(cfg.llm_timeout, (int, float)) \
            or not 0 < cfg.llm_timeout <= 3600:
        raise UsageError(f"--llm-timeout must lie in (0, 3600] seconds (got {cfg.llm_timeout})")


# Model options of the schema call, per caller: greedy, and a token cap that a reply under the
# schema never reaches (a revision is ~60 tokens, an action ~10). The free call sends none, as
# published (the local model then stops at its own 160-token default).
LLM_OPTIONS = {"revision": {"temperature": 0.0, "num_predict": 128},
               "captain": {"temperature": 0.0, "num_predict": 32}}


def uses_llm(agent) -> str | None:
    """Which LLM caller an agent needs: "revision" (an L4 gate), "captain" (LM-only) or None."""
    if agent.host_decides:
        return "captain"
    return "revision" if agent.llm else None


def make_llm_client(cfg, caller: str, cache_path: Path | None = None, concurrent: bool = False):
    """The run's LLMClient: the configured backend, the call cache at `cache_path` (for a model;
    the uniform policy and `none` keep none) and the caller's options. A backend that cannot be
    loaded never stops a run: it is replaced by `none`, so every request falls back, counted.
    `concurrent`: games play in batches, so calls come several at a time."""
    from bsjax.core.llm.backends import LLMError, NoBackend, make_backend
    from bsjax.core.llm.call_cache import CallCache
    from bsjax.core.llm.structured import LLMClient
    try:
        backend = make_backend(cfg.llm, cfg.llm_host, cfg.model, cfg.llm_timeout,
                               seed=cfg.run_seed, verbose=cfg.verbose, concurrent=concurrent)
    except LLMError as err:
        print(f"bsjax: warning: LLM backend unavailable ({err}); every LLM turn falls back",
              file=sys.stderr)
        backend = NoBackend()
    cache = (CallCache(cache_path) if cache_path is not None and cfg.llm in ("local", "ollama")
             else None)
    options = LLM_OPTIONS[caller] if cfg.llm_format == "schema" else None
    return LLMClient(backend, cache, options)


def make_llm_hosts(cfg, player, out: Path | None = None, monitor=None, games_at_once: int = 1):
    """(reviser, captain) for the BatchRunner: the L4 revision host or the LM-only captain host
    of agents that need an LLM, with replies cached in OUT/calls.jsonl; (None, None) otherwise.
    `games_at_once`: the batch size (its games' calls come together)."""
    caller = uses_llm(player.agent)
    if caller is None:
        return None, None
    from bsjax.battleship.harness.llm_host import CaptainHost, RevisionHost
    client = make_llm_client(cfg, caller, out / "calls.jsonl" if out is not None else None,
                             concurrent=games_at_once > 1)
    schema = cfg.llm_format == "schema"
    if caller == "revision":
        return RevisionHost(client, player.agent.presets, schema, monitor), None
    improved = player.agent.variant == "improved"
    return None, CaptainHost(client, reference_rng=not improved, case_insensitive=improved,
                             schema=schema, monitor=monitor)
