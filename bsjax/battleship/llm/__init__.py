"""The Battleship prompts, per-call JSON Schemas and parsers: MRA-LLM revisions and LM-only actions."""
