"""The GILP work directory: tasks, labelled transitions and trained backbones, each made once and
reused (docs/gilp/spec.md §2.7, §3.5, §3.6).

Layout under a work directory `WORK`:

    WORK/tasks/BENCH_SPLIT.npz (+ .json)        generated splits (checksummed manifests)
    WORK/data/BENCH_SPLIT_P_nCOUNT.npz          labelled transitions of a split's first COUNT tasks
    WORK/backbones/BENCH_NAME_sS_P.eqx (+ .json) trained checkpoints with sidecars
    WORK/backbones/BENCH_NAME_sS_P.metrics.json  §3.6 metrics on held-out test transitions

Every artefact is written atomically (temporary name, then rename), so an interrupted run leaves
only whole files and a rerun picks up where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bsjax.core import files
from bsjax.gilp.data import dataset_format
from bsjax.gilp.profiles import Profile


def tasks(work: Path, bench: str, split: str, count: int) -> dict[str, np.ndarray]:
    """The first `count` tasks of a split, generating (and saving) the split when missing or
    too short. Tasks are deterministic per index, so a longer split extends a shorter one."""
    from bsjax.gilp.data import generate
    path = Path(work) / "tasks" / f"{bench}_{split}.npz"
    if path.exists():
        arrays, manifest = generate.load_split(path)
        if manifest["count"] >= count:
            return {name: value[:count] for name, value in arrays.items()}
    arrays, manifest = generate.generate_split(bench, split, count)
    generate.save_split(path.parent, arrays, manifest)
    return arrays


def labelled(work: Path, bench: str, split: str, profile: Profile, count: int,
             seed: int = 0) -> dict[str, np.ndarray]:
    """Labelled transitions from the first `count` tasks of a split (built once, then loaded)."""
    from bsjax.gilp.data import dataset
    from bsjax.gilp.envs import registry
    # The task count is in the name, so a resized profile never reuses stale transitions.
    path = Path(work) / "data" / f"{bench}_{split}_{profile.name}_n{count}.npz"
    if path.exists():
        return dataset_format.load_npz(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dataset.build(registry.get(bench), tasks(work, bench, split, count), seed=seed)
    files.write_atomic(path, lambda tmp: np.savez_compressed(tmp, **data), suffix=".tmp.npz")
    return data


def build_data(work: Path, bench: str, profile: Profile) -> None:
    """Build (or find) every labelled set a profile trains and measures on: train, val and the
    two test splits. Parallel trainers call this first, so none of them writes a data file."""
    labelled(work, bench, "train", profile, profile.train_tasks)
    labelled(work, bench, "val", profile, profile.val_tasks)
    test_transitions(work, bench, profile)


def checkpoint_path(work: Path, bench: str, backbone: str, seed: int, profile: Profile) -> Path:
    return Path(work) / "backbones" / f"{bench}_{backbone}_s{seed}_{profile.name}.eqx"


def test_transitions(work: Path, bench: str, profile: Profile) -> dict[str, dict[str, np.ndarray]]:
    """Held-out labelled transitions of the test splits, `{"id": ..., "ood": ...}`."""
    n_id, n_ood = profile.test_tasks
    return {"id": labelled(work, bench, "test_id", profile, n_id, seed=1),
            "ood": labelled(work, bench, "test_ood", profile, n_ood, seed=1)}


def train(work: Path, bench: str, backbone: str, profile: Profile, seed: int = 0,
          log=None) -> dict:
    """Train (or load) one backbone and measure it; returns its summary row.

    The summary holds the backbone name, benchmark, params, training seconds and steps/s, the
    final losses, and the §3.6 metrics on held-out test transitions (ID, OOD, pooled).
    """
    from bsjax.gilp.backbones import canonical_name
    from bsjax.gilp.data import dataset
    from bsjax.gilp.envs import registry
    from bsjax.gilp.training import backbone_metrics
    from bsjax.gilp.training import train as train_lib
    backbone = canonical_name(backbone)
    path = checkpoint_path(work, bench, backbone, seed, profile)
    summary_path = path.with_suffix(".metrics.json")
    if path.exists() and summary_path.exists():
        summary = json.loads(summary_path.read_text())
        # Reuse only a checkpoint trained as this profile now specifies (profiles can be resized).
        if (summary.get("epochs"), summary.get("train_tasks")) == (profile.epochs,
                                                                   profile.train_tasks):
            return summary
    bench_rules = registry.get(bench)
    train_data = labelled(work, bench, "train", profile, profile.train_tasks)
    val_data = labelled(work, bench, "val", profile, profile.val_tasks)
    windows = dataset.windows(train_data) if backbone == "ErrorAware" else None
    config = train_lib.TrainConfig(epochs=profile.epochs, seed=seed)
    start = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    model, history = train_lib.train_backbone(
        backbone, bench, train_data, val_data, config=config, windows=windows,
        decode=bench_rules.decode, path=path, log=log)
    seconds = time.perf_counter() - start
    steps = sum(epoch["steps"] for epoch in history)
    held_out = test_transitions(work, bench, profile)
    metrics = {split: backbone_metrics.backbone_metrics(model, data, bench_rules.decode)
               for split, data in held_out.items()}
    pooled = {name: np.concatenate([held_out["id"][name], held_out["ood"][name]])
              for name in held_out["id"]}
    metrics["pooled"] = backbone_metrics.backbone_metrics(model, pooled, bench_rules.decode)
    summary = {"bench": bench, "backbone": backbone, "seed": seed, "profile": profile.name,
               "params": metrics["pooled"]["params"], "train_tasks": profile.train_tasks,
               "train_samples": len(train_data["action"]),
               "epochs": profile.epochs, "steps": steps, "train_seconds": round(seconds, 2),
               "steps_per_second": round(steps / max(seconds, 1e-9), 2),
               "final_train_loss": history[-1]["train_loss"],
               "final_val_loss": history[-1]["val_loss"], "history": history,
               "metrics": metrics, "checkpoint": str(path)}
    files.write_json_atomic(summary_path, summary)
    return summary


def load_backbone(work: Path, bench: str, backbone: str, profile: Profile, seed: int = 0):
    """A trained checkpoint; a clear error when it has not been trained."""
    from bsjax.gilp.backbones import canonical_name
    from bsjax.gilp.training import train as train_lib
    path = checkpoint_path(work, bench, canonical_name(backbone), seed, profile)
    if not path.exists():
        raise FileNotFoundError(f"missing checkpoint {path} (run bsjax gilp train --bench {bench} "
                                f"--backbone {backbone} --profile {profile.name} first)")
    model, _ = train_lib.load_checkpoint(path)
    return model


__all__ = ["tasks", "labelled", "build_data", "train",
           "load_backbone", "checkpoint_path", "test_transitions"]
