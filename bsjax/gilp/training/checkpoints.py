"""Backbone checkpoints (docs/gilp/spec.md §3.5): `eqx.tree_serialise_leaves` weights and a JSON
sidecar (architecture, parameter count, sizes, benchmark, seed, epochs, data checksum) that
loading checks before the weights are read."""

from __future__ import annotations

import json
from pathlib import Path

import equinox as eqx
import jax

from bsjax.gilp import config
from bsjax.gilp.backbones import backbone_name, canonical_name, count_params, make_backbone
from bsjax.gilp.backbones.features import N_FEATURES

CHECKPOINT_FORMAT = 1



def _paths(path: str | Path) -> tuple[Path, Path]:
    path = Path(path)
    leaves = path if path.suffix == ".eqx" else path.with_name(path.name + ".eqx")
    return leaves, leaves.with_suffix(".json")


def checkpoint_meta(model: eqx.Module, *, benchmark: str, seed: int, epoch: int,
                    data_checksum: str) -> dict:
    """The JSON sidecar of a checkpoint."""
    return {"format": CHECKPOINT_FORMAT, "architecture": backbone_name(model),
            "params": count_params(model),
            "sizes": {"n_max": config.N_MAX, "n_features": N_FEATURES},
            "benchmark": benchmark, "seed": int(seed), "epoch": int(epoch),
            "data_checksum": data_checksum}


def save_checkpoint(path: str | Path, model: eqx.Module, *, benchmark: str, seed: int, epoch: int,
                    data_checksum: str) -> Path:
    """Write `<path>.eqx` (`eqx.tree_serialise_leaves`) and its `.json` sidecar; returns the
    `.eqx` path. `epoch` counts completed epochs."""
    leaves, sidecar = _paths(path)
    leaves.parent.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(leaves, model)
    meta = checkpoint_meta(model, benchmark=benchmark, seed=seed, epoch=epoch,
                           data_checksum=data_checksum)
    sidecar.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return leaves


def load_checkpoint(path: str | Path, **expect) -> tuple[eqx.Module, dict]:
    """Read a checkpoint written by `save_checkpoint`.

    Args:
      path: the `.eqx` path (or the same stem given to `save_checkpoint`).
      **expect: sidecar values the caller requires, e.g. `architecture="MPNN"`,
        `benchmark="taskgraph"`, `data_checksum=...`; any mismatch raises.
    Returns:
      `(model, meta)`.
    Raises:
      FileNotFoundError: the weights or the sidecar are missing.
      ValueError: the sidecar disagrees with `expect` or with this code's sizes, or the weights do
        not fit the architecture.
    """
    leaves, sidecar = _paths(path)
    for needed, what in ((leaves, "weights"), (sidecar, "JSON sidecar")):
        if not needed.exists():
            raise FileNotFoundError(f"backbone checkpoint {what} not found: {needed} "
                                    "(train the backbone first: `bsjax gilp train`)")
    meta = json.loads(sidecar.read_text())
    if "architecture" in expect:
        expect["architecture"] = canonical_name(expect["architecture"])
    wrong = {name: (meta.get(name), value) for name, value in expect.items()
             if meta.get(name) != value}
    sizes = {"n_max": config.N_MAX, "n_features": N_FEATURES}
    if meta.get("sizes") != sizes:
        wrong["sizes"] = (meta.get("sizes"), sizes)
    if wrong:
        detail = "; ".join(f"{name}: checkpoint has {have!r}, expected {want!r}"
                           for name, (have, want) in wrong.items())
        raise ValueError(f"backbone checkpoint {leaves} does not match: {detail}")
    skeleton = make_backbone(meta["architecture"], jax.random.key(0))
    try:
        model = eqx.tree_deserialise_leaves(leaves, skeleton)
    except Exception as error:  # equinox raises several types on a layout mismatch
        raise ValueError(f"backbone checkpoint {leaves} does not fit architecture "
                         f"{meta['architecture']}: {error}") from error
    return model, meta


__all__ = ["CHECKPOINT_FORMAT", "checkpoint_meta", "load_checkpoint", "save_checkpoint"]
