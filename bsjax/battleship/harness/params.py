"""Params by name: what `bsjax.play(..., params={...})` and the study rows set.

One game's params are a `PlayParams` (`player.default_params()`): the agent's pytree and the
belief's answer model. A user names an agent leaf by its field (`tau`, `cooldown`, `gamma`,
`late_game_turn`), by its dotted path (`policy.budgets`, `scoring.coarse`), or, for a scoring
rule's own params, by the rule's name for it (`split_weight`); the answer model by
`answer_noise` (ε) and `evidence_scale` (κ). A value given as a list is a sweep axis; several
lists make a grid.
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
    if array.dtype.kind not in "biuf":
        what = "a flag (true or false)" if default.dtype == bool else "numbers"
        raise ValueError(f"{name} takes {what} (got {value!r})")
    if default.dtype == bool:
        if array.dtype != bool and not np.all(np.isin(array, (0, 1))):
            raise ValueError(f"{name} is a flag: give True or False (got {value!r})")
    elif np.issubdtype(default.dtype, np.integer):
        if not np.all(np.isfinite(array.astype(float))) or np.any(array != np.round(array)):
            raise ValueError(f"{name} takes whole numbers (got {value!r})")
    elif not np.all(np.isfinite(array.astype(float))):
        raise ValueError(f"{name} must be finite (got {value!r})")
    return array.astype(default.dtype)


# The belief's answer model is set through the two numbers it is computed from (every leaf of
# `AnswerModel` follows from them): the modelled flip rate ε and the tempering κ.
ANSWER_NAMES = {"answer_noise": "epsilon", "evidence_scale": "evidence_scale"}


def names(params) -> dict[str, tuple[str, ...]]:
    """Every name a user may give -> its path in one game's `PlayParams`: the agent's leaves
    (`leaf_paths` of `params.agent`) and, with a belief, `answer_noise` and `evidence_scale`."""
    out = {name: ("agent", *path) for name, path in leaf_paths(params.agent).items()}
    if jax.tree.leaves(params.answers):
        out.update({name: ("answers", field) for name, field in ANSWER_NAMES.items()})
    return out


def _answer_value(name: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} takes a number in [0, 1] (got {value!r})") from None
    if not (np.isfinite(number) and 0.0 <= number <= 1.0):
        raise ValueError(f"{name} must lie in [0, 1] (got {value!r})")
    return number


def with_values(player, values: Mapping[str, Any], params=None):
    """One game's params (`player.default_params()` by default) with the named values set.
    `answer_noise` and `evidence_scale` recompute the whole answer model (the protocol's value
    for the one not given). Raises ValueError for an unknown name or a value that does not fit
    its leaf."""
    from bsjax.battleship.belief.base import answer_model
    params = jax.device_get(player.default_params()) if params is None else params
    known = names(params)
    answers = {}
    for name, value in values.items():
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ValueError(f"agent {player.agent.name!r} has no param {name!r} "
                             f"(its params: {listed})")
        path = known[name]
        if path[0] == "answers":
            answers[path[1]] = _answer_value(name, value)
        else:
            params = _set(params, path, _convert(name, value, _get(params, path), player.agent))
    if answers:
        dtype = np.asarray(params.answers.log_match).dtype
        params = params.replace(answers=jax.device_get(answer_model(
            player.config, answers.get("epsilon"), answers.get("evidence_scale"), dtype)))
    return params


def _is_axis(name: str, value, default) -> bool:
    """A list is a sweep axis, unless the leaf itself is a vector and the list one value."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, np.ndarray)):
        return False
    return np.ndim(value) > np.ndim(default) or (name.split(".")[-1] == "presets"
                                                 and all(isinstance(v, str) for v in value))


def grid(player, spec) -> tuple[list[dict[str, Any]], list]:
    """The points of a params spec: `(points, params)` where `points[r]` names the swept values
    of point r and `params[r]` is its full `PlayParams` (host arrays). In a mapping, lists are
    axes (their product is the grid) and other values hold for every point; a list of mappings
    is its points, one each, in order. Raises ValueError."""
    defaults = jax.device_get(player.default_params())
    if isinstance(spec, (list, tuple)):
        if not spec or not all(isinstance(point, Mapping) for point in spec):
            raise ValueError("params as a list must hold one or more mappings (name -> value), "
                             "one per point")
        points = [dict(point) for point in spec]
        return points, [with_values(player, point, defaults) for point in points]
    spec = dict(spec or {})
    known = names(defaults)
    axes, fixed = {}, {}
    for name, value in spec.items():
        default = (0.0 if known.get(name, ("",))[0] == "answers"
                   else _get(defaults, known[name]) if name in known else None)
        if default is not None and _is_axis(name, value, default):
            if len(value) == 0:
                raise ValueError(f"{name}: an empty list of values")
            axes[name] = list(value)
        else:
            fixed[name] = value
    with_values(player, fixed, defaults)  # the fixed values are checked once, before the points
    points, trees = [], []
    for combo in itertools.product(*axes.values()) if axes else [()]:
        point = dict(zip(axes, combo))
        points.append(point)
        trees.append(with_values(player, {**fixed, **point}, defaults))
    return points, trees


__all__ = ["ANSWER_NAMES", "grid", "leaf_paths", "names", "with_values"]
