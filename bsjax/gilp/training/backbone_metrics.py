"""Backbone audit metrics on held-out labelled transitions (docs/gilp/spec.md §3.6).

`backbone_metrics(model, data, decode)` runs the model over a `dataset_format` dataset in fixed
batches and reduces on the host:

| metric | definition |
|---|---|
| node_mse | mean over real nodes of `‖x̂(v) − onehot(next_status[v])‖²`, `x̂ = Σ_c P(c)·onehot(decode(c))` |
| delta_acc_all | argmax ΔĜ == Δ* over all real nodes |
| delta_acc_changed | the same over real nodes with Δ* ≠ 0 (NaN when there are none) |
| valid_acc | `[p_valid > 0.5] == valid` |
| trans_acc | validity correct and argmax ΔĜ == Δ* on every real node |
| reward_mse, done_acc, risk_mae, value_mse | on the modal targets |
| params | parameter count |

Node-level metrics pool every real node of the dataset; sample-level ones average over samples.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from bsjax.gilp.backbones import count_params
from bsjax.gilp.backbones.features import DecodeFn, expected_next_status, graph_inputs
from bsjax.gilp.data import dataset_format

METRIC_NAMES = ("node_mse", "delta_acc_all", "delta_acc_changed", "valid_acc", "trans_acc",
                "reward_mse", "done_acc", "risk_mae", "value_mse", "params")


@eqx.filter_jit
def _predict_batch(model: eqx.Module, batch: dict, decode: DecodeFn) -> dict[str, jax.Array]:
    graphs = dataset_format.graph_from_batch(batch)
    inputs = jax.vmap(graph_inputs)(graphs)
    out = jax.vmap(model)(inputs, batch["action"])
    expected = jax.vmap(lambda g, a, logits: expected_next_status(decode, g, a, logits))(
        graphs, batch["action"], out.delta_logits)
    return {**out._asdict(), "expected_status": expected}


def predict(model: eqx.Module, data: dict, decode: DecodeFn,
            batch_size: int = 128) -> dict[str, np.ndarray]:
    """Host arrays of every `BackboneOut` field (`[S, ...]`) plus `expected_status [S, N, 5]`."""
    n = dataset_format.validate(data)
    parts: dict[str, list[np.ndarray]] = {}
    for index, mask in dataset_format.padded_batches(n, batch_size):
        out = jax.device_get(
            _predict_batch(model, dataset_format.to_device(dataset_format.take(data, index)), decode)
        )
        for name, value in out.items():
            parts.setdefault(name, []).append(np.asarray(value)[mask])
    return {name: np.concatenate(values) for name, values in parts.items()}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def metrics_from_predictions(pred: dict[str, np.ndarray], data: dict) -> dict[str, float]:
    """The §3.6 metrics (all but `params`) from `predict`'s arrays and the dataset's labels."""
    nmask = np.asarray(data["nmask"], bool)
    delta = np.asarray(data["delta"]).astype(np.int64)
    predicted_delta = pred["delta_logits"].argmax(-1) - 1
    node_hit = (predicted_delta == delta) & nmask
    changed = nmask & (delta != 0)
    next_onehot = np.eye(5, dtype=np.float32)[np.asarray(data["next_status"]).astype(np.int64)]
    sq_err = ((pred["expected_status"] - next_onehot) ** 2).sum(-1)
    valid = np.asarray(data["valid"], bool)
    valid_hit = (pred["valid_logit"] > 0.0) == valid
    all_nodes_hit = np.all(node_hit | ~nmask, axis=-1)
    n_changed = changed.sum()
    return {
        "node_mse": float(sq_err[nmask].mean()),
        "delta_acc_all": float(node_hit.sum() / max(nmask.sum(), 1)),
        "delta_acc_changed": float((node_hit & changed).sum() / n_changed) if n_changed else float("nan"),
        "valid_acc": float(valid_hit.mean()),
        "trans_acc": float((valid_hit & all_nodes_hit).mean()),
        "reward_mse": float(((pred["reward"] - data["reward"]) ** 2).mean()),
        "done_acc": float(((pred["done_logit"] > 0.0) == np.asarray(data["done"], bool)).mean()),
        "risk_mae": float(np.abs(_sigmoid(pred["risk_logit"]) - data["risk"]).mean()),
        "value_mse": float(((pred["value"] - data["value"]) ** 2).mean()),
    }


def backbone_metrics(
    model: eqx.Module, data: dict, decode: DecodeFn, batch_size: int = 128
) -> dict[str, float]:
    """Every §3.6 metric of `model` on a labelled dataset.

    Args:
      model: a backbone.
      data: a `dataset_format` dataset (held-out transitions).
      decode: the benchmark's `(g, a, dir[N]) -> status[N]`.
      batch_size: evaluation batch (the last one is padded and its padding dropped).
    Returns:
      `{metric: value}` with the keys of `METRIC_NAMES` (`params` an int).
    """
    metrics: dict = metrics_from_predictions(predict(model, data, decode, batch_size), data)
    metrics["params"] = count_params(model)
    return metrics
