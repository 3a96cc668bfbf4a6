"""Parsing and checking the flags shared by the `bsjax gilp` commands (benchmarks, splits,
backbones, methods, simulator parameter files): each returns validated values or raises
`UsageError` with a one-line reason.
"""

from __future__ import annotations

from bsjax.core import checks
from bsjax.core.errors import UsageError
from bsjax.gilp import config


def _parse_names(text: str, known: tuple[str, ...], what: str) -> list[str]:
    """`all` or a comma list of names from `known`, validated."""
    names = list(known) if text == "all" else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"unknown {what} {', '.join(unknown) or text!r} "
                         f"(choose from all, {', '.join(known)})")
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise UsageError(f"{what} {repeated} given twice")
    return names


def parse_benchmarks(text: str) -> list[str]:
    return _parse_names(text, config.BENCHMARKS, "benchmark")


def parse_splits(text: str) -> list[str]:
    from bsjax.gilp.data.generate import SPLITS
    return _parse_names(text, SPLITS, "split")


def load_sim_params(path, benches=None):
    """A simulator parameter file: the pooled `SimParams`, or `{bench: SimParams}` with each
    benchmark's token coefficients when `benches` is given; UsageError on a bad file."""
    from bsjax.gilp.behaviour.params import load_params
    try:
        if benches is None:
            return load_params(path)
        return {bench: load_params(path, bench) for bench in benches}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UsageError(f"bad simulator parameter file {path}: {err}") from None


def parse_backbones(text: str) -> list[str]:
    """`all` or a comma list of backbone names (case-insensitive), validated."""
    from bsjax.gilp.backbones import BACKBONE_NAMES, canonical_name
    if text == "all":
        return list(BACKBONE_NAMES)
    try:
        names = [canonical_name(s.strip()) for s in text.split(",") if s.strip()]
    except ValueError as err:
        raise UsageError(str(err)) from None
    if not names:
        raise UsageError(f"--backbone names no backbone (choose from all, "
                         f"{', '.join(BACKBONE_NAMES)})")
    return checks.unique(names, "--backbone")


def parse_methods(text: str) -> list[str]:
    """`all` (the 13 methods and the Oracle row) or a comma list of method names (variants
    `NAME[key=value,...]` included), validated."""
    from bsjax.gilp.methods import METHOD_NAMES, get_method, split_methods
    if text == "all":
        return [*METHOD_NAMES, "Oracle"]
    if text.count("[") != text.count("]"):
        raise UsageError(f"--methods {text!r}: unbalanced brackets")
    try:
        names = [get_method(name).name for name in split_methods(text)]
    except ValueError as err:
        raise UsageError(str(err)) from None
    if not names:
        raise UsageError(f"--methods names no method (choose from all, {', '.join(METHOD_NAMES)}, "
                         "Oracle)")
    return checks.unique(names, "--methods")
