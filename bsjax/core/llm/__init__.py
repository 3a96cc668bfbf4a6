"""LLM backends and structured calls, shared by both domains: the only package that talks to an
LLM. What to ask (prompts, schemas, parsers) belongs to each domain's own `llm` package."""
