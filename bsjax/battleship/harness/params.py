"""Agent params by name: what `bsjax.play(..., params={...})` and the study rows set.

An agent's params are a pytree (`agent.default_params()`); a user names a leaf by its field
(`tau`, `cooldown`, `gamma`, `late_game_turn`), by its dotted path (`policy.budgets`,
`scoring.coarse`), or, for a scoring rule's own params, by the rule's name for it
(`split_weight`). A value given as a list is a sweep axis; several lists make a grid.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from bsjax.battleship.runtime import presets as presets_lib


def _fields(node) -> dict[str, Any]:
    """The named children of a params node (a chex dataclass or a dict), else {}. (A chex
    dataclass is also a Mapping: it is tested first, so that it stays a dataclass.)"""
    if dataclasses.is_dataclass(node):
        return {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
    if isinstance(node, Mapping):
        return dict(node)
    return {}


def leaf_paths(params) -> dict[str, tuple[str, ...]]:
    """Every leaf's name -> its path: dotted paths always, and a leaf's own (last) name too
    when no other leaf has it."""
    paths: dict[str, tuple[str, ...]] = {}

    def walk(node, path):
        children = _fields(node)
        if not children:
            if path and jax.tree.leaves(node):  # an empty pytree (no params) has no leaves
                paths[".".join(path)] = path
            return
        for name, child in children.items():
            walk(child, (*path, name))

    walk(params, ())
    last = {}
    for path in paths.values():
        last.setdefault(path[-1], []).append(path)
    for name, found in last.items():
        if len(found) == 1 and name not in paths:
            paths[name] = found[0]
    return paths


def _get(node, path):
    for name in path:
        node = _fields(node)[name]
    return node


def _set(node, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    child = _set(_fields(node)[head], rest, value)
    if dataclasses.is_dataclass(node):
        return node.replace(**{head: child})
    return {**node, head: child}


def _convert(name: str, value, default, agent) -> np.ndarray:
    """`value` as the default leaf's dtype and shape; raises ValueError."""
    default = np.asarray(default)
    if name.split(".")[-1] == "presets" and isinstance(value, str):
        try:
            return presets_lib.mask(value, agent.presets)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
    if name.split(".")[-1] == "revision" and isinstance(value, str):
        if value not in ("on", "off"):
            raise ValueError(f"revision must be on or off (got {value!r})")
        value = value == "on"
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: not a value of shape {default.shape}: {value!r}") from None
    if array.shape != default.shape:
        raise ValueError(f"{name} takes shape {default.shape} (got {value!r})")
    if default.dtype == bool:
        if array.dtype != bool and not np.all(np.isin(array, (0, 1))):
            raise ValueError(f"{name} is a flag: give True or False (got {value!r})")
    elif np.issubdtype(default.dtype, np.integer):
        if not np.all(np.isfinite(array.astype(float))) or np.any(array != np.round(array)):
            raise ValueError(f"{name} takes whole numbers (got {value!r})")
    elif not np.all(np.isfinite(array.astype(float))):
        raise ValueError(f"{name} must be finite (got {value!r})")
    return array.astype(default.dtype)


def with_values(agent, values: Mapping[str, Any], params=None):
    """`params` (the agent's defaults by default) with the named leaves set. Raises ValueError
    for an unknown name or a value that does not fit its leaf."""
    params = jax.device_get(agent.default_params()) if params is None else params
    paths = leaf_paths(params)
    for name, value in values.items():
        if name not in paths:
            known = ", ".join(sorted(paths)) or "none"
            raise ValueError(f"agent {agent.name!r} has no param {name!r} (its params: {known})")
        path = paths[name]
        params = _set(params, path, _convert(name, value, _get(params, path), agent))
    return params


def _is_axis(name: str, value, default) -> bool:
    """A list is a sweep axis, unless the leaf itself is a vector and the list one value."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, np.ndarray)):
        return False
    return np.ndim(value) > np.ndim(default) or (name.split(".")[-1] == "presets"
                                                 and all(isinstance(v, str) for v in value))


def grid(agent, spec: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], list]:
    """The points of a params spec: `(points, params)` where `points[r]` names the swept values
    of point r and `params[r]` is its full params pytree (host arrays). Lists are axes (their
    product is the grid); other values hold for every point. Raises ValueError."""
    spec = dict(spec or {})
    defaults = jax.device_get(agent.default_params())
    paths = leaf_paths(defaults)
    axes, fixed = {}, {}
    for name, value in spec.items():
        default = _get(defaults, paths[name]) if name in paths else None
        if default is not None and _is_axis(name, value, default):
            if len(value) == 0:
                raise ValueError(f"{name}: an empty list of values")
            axes[name] = list(value)
        else:
            fixed[name] = value
    base = with_values(agent, fixed, defaults)
    points, trees = [], []
    for combo in itertools.product(*axes.values()) if axes else [()]:
        point = dict(zip(axes, combo))
        points.append(point)
        trees.append(with_values(agent, point, base))
    return points, trees


__all__ = ["grid", "leaf_paths", "with_values"]
