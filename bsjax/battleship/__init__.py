"""Noisy Collaborative Battleship: the package's primary domain, in layers (each imports only
the layers before it; `tests/test_layers.py` checks it):

- `config`, `types` — protocol presets (static) and the game's pytrees.
- `game` — rules, boards and suites, bitboards, the question catalog, the reference PRNG.
- `belief` — L1 samplers behind the `Sampler` protocol (chain, importance, particles,
  enumerated: the exact posterior; exact: the host oracle).
- `planning` — `sim.next` look-ahead and expected information gain.
- `runtime` — L3's declared reflective record, revision presets and confidence signals.
- `agents` — captains behind the `Agent` / `HostCaptain` protocols (random, greedy, WMA, bayes,
  MRA, MRA-LLM, LM-only).
- `llm` — the Battleship prompts, per-call JSON Schemas and parsers (revision, LM-only).
- `harness` — the batched loop, runs on disk, studies, bench, the LLM host steps, summaries.
- `report` — tables, figures, head-to-head and the lens, rebuilt from run files alone.
- `cli`, `cli_checks` — the `bsjax play/paper/sweep/report/boards/bench/h2h/lens` commands.
"""
