"""GILP: graph planning where a small trained world model grounds an LLM agent (docs/gilp/spec.md).

The second domain of bsjax. Nothing in the Battleship packages imports it; it reuses `bsjax.core.llm`
backends and the results-on-disk conventions of the harness.
"""
