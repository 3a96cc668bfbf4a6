"""L4 and baselines: LLM backends, prompts, parsing and validation. The ONLY package that talks to an LLM."""
