"""Uniformly random replies from a JSON Schema: the `--llm uniform` baseline policy.

`sample(rng, schema)` draws one JSON value that the schema accepts, each choice uniform: an enum
member, an integer in [minimum, maximum], a number in [minimum, maximum], a `true`/`false`, one
branch of an `anyOf`/`oneOf`, an array length in [minItems, maxItems]. Objects carry their
required properties (in schema order). Free strings are empty: a policy that ignores the prompt
has nothing to say in them.

`reply(seed, system, user, schema)` is the backend's answer to one call: the draw is seeded by
the run seed and a hash of the call, so the same call always gets the same reply.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np


class SchemaError(ValueError):
    """A schema this sampler cannot draw from (e.g. an unbounded integer)."""


def sample(rng: np.random.Generator, schema: dict):
    """One value the schema accepts, every choice uniform (see the module docstring)."""
    if not isinstance(schema, dict):
        raise SchemaError(f"not a schema: {schema!r}"[:80])
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        values = list(schema["enum"])
        if not values:
            raise SchemaError("empty enum")
        return values[int(rng.integers(len(values)))]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = schema[key]
            return sample(rng, branches[int(rng.integers(len(branches)))])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        return {name: sample(rng, spec) for name, spec in properties.items() if name in required}
    if kind == "integer":
        if "minimum" not in schema or "maximum" not in schema:
            raise SchemaError("an integer needs minimum and maximum")
        return int(rng.integers(int(schema["minimum"]), int(schema["maximum"]) + 1))
    if kind == "number":
        if "minimum" not in schema or "maximum" not in schema:
            raise SchemaError("a number needs minimum and maximum")
        return round(float(rng.uniform(schema["minimum"], schema["maximum"])), 4)
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "string":
        return ""
    if kind == "array":
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", lo))
        items = schema.get("items", {})
        return [sample(rng, items) for _ in range(int(rng.integers(lo, hi + 1)))]
    raise SchemaError(f"cannot sample type {kind!r}")


def reply(seed: int, system: str, user: str, schema: dict) -> str:
    """The uniform policy's reply (JSON text) to one call."""
    blob = json.dumps([int(seed), system, user, schema], sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(blob.encode("utf-8")).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return json.dumps(sample(rng, schema), separators=(", ", ": "))


__all__ = ["SchemaError", "reply", "sample"]
