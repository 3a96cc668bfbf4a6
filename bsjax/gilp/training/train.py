"""Backbone training (docs/gilp/spec.md §3.3–§3.5, §8 "Training"): the multi-task loss, ErrorAware's
extra terms, the jitted step and the epoch scan (checkpoints: `bsjax.gilp.training.checkpoints`).

Batches are fixed-size (128) with a sample mask, so the step compiles once per (architecture,
dataset layout). Datasets follow `bsjax.gilp.data.dataset_format`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bsjax.gilp.backbones import BackboneOut, ErrorAware, make_backbone
from bsjax.gilp.backbones.features import DecodeFn, expected_next_status, graph_inputs, with_soft_status
from bsjax.gilp.data import dataset_format

# Checkpoints live in their own module; re-exported here, where training writes them.
from bsjax.gilp.training.checkpoints import (  # noqa: F401
    CHECKPOINT_FORMAT,
    checkpoint_meta,
    load_checkpoint,
    save_checkpoint,
)

# Loss weights (spec §3.3) and ErrorAware's extra weights (spec §3.4).
W_VALID, W_DELTA, W_REWARD, W_DONE, W_RISK, W_VALUE = 1.0, 0.5, 0.3, 0.3, 0.2, 0.3
W_CONSISTENCY, W_SPECTRAL, W_CRITICAL = 0.5, 0.01, 0.1
POWER_ITERATIONS = 8


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Training settings (spec §3.5).

    Attributes:
      epochs: 50 for the `paper` profile, 2 for `smoke`.
      batch_size: fixed batch; the last partial batch is padded and masked.
      learning_rate: Adam step size.
      clip_norm: global-norm gradient clip.
      seed: model init key `jax.random.key(seed)` and shuffles `default_rng(seed·1000 + epoch)`.
      window_batch: windows per step for ErrorAware's consistency term (bsjax choice).
    """

    epochs: int = 50
    batch_size: int = 128
    learning_rate: float = 1e-3
    clip_norm: float = 1.0
    seed: int = 0
    window_batch: int = 32


@functools.cache
def make_optimizer(learning_rate: float = 1e-3, clip_norm: float = 1.0) -> optax.GradientTransformation:
    """`chain(clip_by_global_norm, adam)`; cached, so the jitted step sees the same static object
    (a fresh one would retrace)."""
    return optax.chain(optax.clip_by_global_norm(clip_norm), optax.adam(learning_rate))


# ---------------------------------------------------------------------------------------------
# Forward passes and losses
# ---------------------------------------------------------------------------------------------

def batch_forward(model: eqx.Module, batch: dict) -> tuple[BackboneOut, jax.Array]:
    """Outputs `[B, ...]` for a batch of (graph, action) samples and the `[B, N, N]` adjacency."""
    inputs = jax.vmap(graph_inputs)(dataset_format.graph_from_batch(batch))
    return jax.vmap(model)(inputs, batch["action"]), inputs.adj


def masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of `values` over entries where `mask` holds (0 when none do)."""
    mask = mask.astype(values.dtype)
    return (values * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def node_delta_ce(delta_logits: jax.Array, delta: jax.Array, nmask: jax.Array,
                  node_weights: jax.Array | None = None) -> jax.Array:
    """`[B]` delta cross-entropy per sample: (weighted) sum over real nodes / number of real nodes.

    Args:
      delta_logits: `[B, N, 3]`.
      delta: `[B, N]` Δ* in {−1, 0, +1} (class = Δ* + 1).
      nmask: `[B, N]` bool.
      node_weights: optional `[B, N]` per-node weights.
    """
    ce = optax.softmax_cross_entropy_with_integer_labels(delta_logits,
                                                         delta.astype(jnp.int32) + 1)
    real = nmask.astype(ce.dtype)
    weights = real if node_weights is None else real * node_weights
    return (ce * weights).sum(-1) / jnp.maximum(real.sum(-1), 1.0)


def multitask_terms(out: BackboneOut, batch: dict) -> dict[str, jax.Array]:
    """The six per-sample loss terms of spec §3.3, each `[B]` (unweighted)."""
    bce = optax.sigmoid_binary_cross_entropy
    return {
        "valid": bce(out.valid_logit, batch["valid"].astype(jnp.float32)),
        "delta": node_delta_ce(out.delta_logits, batch["delta"], batch["nmask"]),
        "reward": (out.reward - batch["reward"]) ** 2,
        "done": bce(out.done_logit, batch["done"].astype(jnp.float32)),
        "risk": bce(out.risk_logit, batch["risk"]),   # soft targets ρ* ∈ [0, 1]
        "value": (out.value - batch["value"]) ** 2,
    }


TERM_WEIGHTS = {"valid": W_VALID, "delta": W_DELTA, "reward": W_REWARD, "done": W_DONE,
                "risk": W_RISK, "value": W_VALUE}


def multitask_loss(out: BackboneOut, batch: dict, sample_mask: jax.Array
                   ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """`L = BCE_valid + 0.5·CE_delta + 0.3·MSE_r + 0.3·BCE_done + 0.2·BCE_risk + 0.3·MSE_J`,
    averaged over real samples. Returns `(loss [], {term: [] mean})`."""
    terms = {name: masked_mean(value, sample_mask)
             for name, value in multitask_terms(out, batch).items()}
    loss = sum(TERM_WEIGHTS[name] * value for name, value in terms.items())
    return loss, terms


def spectral_norm_estimate(matrix: jax.Array, iterations: int = POWER_ITERATIONS) -> jax.Array:
    """σ̂_max by power iteration from a fixed unit vector (stateless).

    The iterates carry `stop_gradient`, so the gradient of `uᵀ W v` is `u vᵀ`, the usual
    spectral-norm gradient, without differentiating through the loop.
    """
    w = jax.lax.stop_gradient(matrix)
    v = jnp.ones((matrix.shape[1],), matrix.dtype) / jnp.sqrt(jnp.float32(matrix.shape[1]))
    u = jnp.zeros((matrix.shape[0],), matrix.dtype)
    for _ in range(iterations):
        u = w @ v
        u = u / jnp.maximum(jnp.linalg.norm(u), 1e-12)
        v = w.T @ u
        v = v / jnp.maximum(jnp.linalg.norm(v), 1e-12)
    return u @ matrix @ v


def spectral_penalty(matrices: tuple[jax.Array, ...]) -> jax.Array:
    """`Σ_ℓ (σ̂_max(W_ℓ) − 1)_+²`."""
    return sum(jax.nn.relu(spectral_norm_estimate(w) - 1.0) ** 2 for w in matrices)


def critical_node_weights(adj: jax.Array, nmask: jax.Array) -> jax.Array:
    """`[B, N]` weights `1 + deg(v)/mean_deg` (degree in the symmetric union graph, mean over real
    nodes; weight 1 everywhere for an edgeless graph)."""
    real = nmask.astype(jnp.float32)
    degree = adj.sum(-1) * real
    mean_degree = degree.sum(-1, keepdims=True) / jnp.maximum(real.sum(-1, keepdims=True), 1.0)
    ratio = jnp.where(mean_degree > 0, degree / jnp.maximum(mean_degree, 1e-12), 0.0)
    return 1.0 + ratio


def consistency_loss(model: eqx.Module, windows: dict, decode: DecodeFn) -> jax.Array:
    """ErrorAware's multi-step consistency term on `[Wb, 3, ...]` windows (spec §3.4).

    Step t is predicted from the logged graph. Its soft next status
    `x̃ = Σ_c softmax(ΔĜ)[c] · onehot(decode(c))` replaces the status one-hot of the logged graph
    t+1, which is predicted again with the logged action; the same feeds t+2. Decoding uses the
    logged graph of the step being decoded (bsjax choice: a decode table needs a hard current
    status). Returns the mean over windows of CE(t+1) + CE(t+2); gradients flow through x̃.
    """
    graphs = dataset_format.graph_from_batch(windows)

    def one_window(graph, actions, deltas):
        step = lambda t: jax.tree_util.tree_map(lambda leaf: leaf[t], graph)  # noqa: E731
        inputs = graph_inputs(step(0))
        logits = model(inputs, actions[0]).delta_logits
        total = jnp.float32(0.0)
        for t in (1, 2):
            soft = expected_next_status(decode, step(t - 1), actions[t - 1], logits)
            logits = model(with_soft_status(graph_inputs(step(t)), soft), actions[t]).delta_logits
            total = total + node_delta_ce(logits[None], deltas[t][None], step(t).nmask[None])[0]
        return total

    return jax.vmap(one_window)(graphs, windows["action"], windows["delta"]).mean()


def loss_fn(model: eqx.Module, batch: dict, sample_mask: jax.Array, windows: dict | None = None,
            decode: DecodeFn | None = None) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The training loss of `model` on one batch: §3.3's multi-task loss, plus ErrorAware's
    critical-node, spectral and (when `windows` and `decode` are given) consistency terms.

    Args:
      model: a backbone.
      batch: device dataset batch `[B, ...]`.
      sample_mask: `[B]` bool real samples.
      windows: optional `[Wb, 3, ...]` window batch (ErrorAware only).
      decode: the benchmark's decode, needed with `windows`.
    Returns:
      `(loss [], aux)` with every term's batch mean in `aux`.
    """
    out, adj = batch_forward(model, batch)
    loss, aux = multitask_loss(out, batch, sample_mask)
    if isinstance(model, ErrorAware):
        weights = critical_node_weights(adj, batch["nmask"])
        critical = masked_mean(node_delta_ce(out.delta_logits, batch["delta"], batch["nmask"],
                                             weights), sample_mask)
        spectral = spectral_penalty(model.spectral_matrices())
        loss = loss + W_CRITICAL * critical + W_SPECTRAL * spectral
        aux = {**aux, "critical": critical, "spectral": spectral}
        if windows is not None and decode is not None:
            consistency = consistency_loss(model, windows, decode)
            loss = loss + W_CONSISTENCY * consistency
            aux = {**aux, "consistency": consistency}
    return loss, {**aux, "total": loss}


# ---------------------------------------------------------------------------------------------
# Steps and the epoch loop
# ---------------------------------------------------------------------------------------------

def train_step(model: eqx.Module, opt_state: optax.OptState, batch: dict, sample_mask: jax.Array,
               windows: dict | None, optim: optax.GradientTransformation,
               decode: DecodeFn | None = None):
    """One optimiser step. Returns `(model, opt_state, loss [], aux)`. Pure; jit with
    `eqx.filter_jit` (`optim` and `decode` are static: pass the same objects every call)."""
    (loss, aux), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(
        model, batch, sample_mask, windows, decode)
    updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return eqx.apply_updates(model, updates), opt_state, loss, aux


train_step_jit = eqx.filter_jit(train_step)


def train_epoch(model: eqx.Module, opt_state: optax.OptState, data: dict, batch_index: jax.Array,
                batch_mask: jax.Array, windows: dict | None, window_index: jax.Array | None,
                optim: optax.GradientTransformation, decode: DecodeFn | None = None):
    """One epoch as a `lax.scan` of `train_step` over its batches, gathered on device from the
    whole dataset (one dispatch per epoch, not per step: on a GPU the per-step host work is what
    a small backbone's training otherwise waits on).

    Args:
      data: the device dataset `[n, ...]`.
      batch_index: `[n_batches, B]` int32 sample indices; batch_mask: `[n_batches, B]` bool.
      windows, window_index: ErrorAware's device windows `[W, 3, ...]` and `[n_batches, Wb]`
        indices (both None otherwise).
    Returns:
      `(model, opt_state, losses [n_batches])`. Jit with `eqx.filter_jit`.
    """
    params, static = eqx.partition(model, eqx.is_array)

    def body(carry, xs):
        params, opt_state = carry
        index, mask, w_index = xs
        take = lambda tree, i: jax.tree_util.tree_map(lambda x: x[i], tree)  # noqa: E731
        window_batch = None if windows is None else take(windows, w_index)
        model, opt_state, loss, _ = train_step(eqx.combine(params, static), opt_state,
                                               take(data, index), mask, window_batch, optim,
                                               decode)
        return (eqx.filter(model, eqx.is_array), opt_state), loss

    (params, opt_state), losses = jax.lax.scan(body, (params, opt_state),
                                               (batch_index, batch_mask, window_index))
    return eqx.combine(params, static), opt_state, losses


train_epoch_jit = eqx.filter_jit(train_epoch)


@eqx.filter_jit
def eval_loss(model: eqx.Module, batch: dict, sample_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`(sum of per-sample §3.3 losses, number of real samples)` on one batch (no extra terms)."""
    out, _ = batch_forward(model, batch)
    per_sample = sum(TERM_WEIGHTS[name] * value
                     for name, value in multitask_terms(out, batch).items())
    real = sample_mask.astype(jnp.float32)
    return (per_sample * real).sum(), real.sum()


@eqx.filter_jit
def _dataset_sums(model: eqx.Module, data: dict, batch_index: jax.Array, batch_mask: jax.Array):
    def body(totals, xs):
        index, mask = xs
        batch_total, batch_count = eval_loss(model, jax.tree_util.tree_map(lambda x: x[index],
                                                                           data), mask)
        return (totals[0] + batch_total, totals[1] + batch_count), None

    zero = jnp.float32(0.0)
    return jax.lax.scan(body, (zero, zero), (batch_index, batch_mask))[0]


def dataset_loss(model: eqx.Module, data: dict, batch_size: int = 128) -> float:
    """The §3.3 loss averaged over every sample of a dataset (the per-epoch validation loss);
    `data` may be host or device arrays (one device scan over its batches)."""
    batches = list(dataset_format.padded_batches(dataset_format.validate(data), batch_size))
    on_device = all(isinstance(v, jax.Array) for v in data.values())
    total, count = _dataset_sums(model, data if on_device else dataset_format.to_device(data),
                                 jnp.asarray(np.stack([i for i, _ in batches]), jnp.int32),
                                 jnp.asarray(np.stack([m for _, m in batches])))
    return float(total) / max(float(count), 1.0)


def init_optimizer(model: eqx.Module, config: TrainConfig):
    """`(optim, opt_state)` for a model."""
    optim = make_optimizer(config.learning_rate, config.clip_norm)
    return optim, optim.init(eqx.filter(model, eqx.is_inexact_array))


def fit(model: eqx.Module, train_data: dict, val_data: dict | None = None, *,
        config: TrainConfig = TrainConfig(), windows: dict | None = None,
        decode: DecodeFn | None = None, log: Callable[[str], None] | None = None,
        epoch_fn: Callable | None = None) -> tuple[eqx.Module, list[dict]]:
    """Train for `config.epochs` epochs and keep the final model (no early stopping).

    The dataset goes to the device once; each epoch is one call of `epoch_fn` (a scan over
    its shuffled batches).

    Args:
      model: initial backbone.
      train_data: dataset dict (`dataset_format`).
      val_data: optional validation dataset; its loss is logged after every epoch.
      config: settings.
      windows: optional `[W, 3, ...]` windows (used by ErrorAware only).
      decode: the benchmark's decode (required with windows).
      log: optional line logger.
      epoch_fn: the jitted epoch (default `train_epoch_jit`; tests pass a trace-counted one).
    Returns:
      `(model, history)`, one dict per epoch: epoch, train_loss, val_loss, seconds, steps.
    """
    n = dataset_format.validate(train_data)
    epoch_fn = train_epoch_jit if epoch_fn is None else epoch_fn
    use_windows = isinstance(model, ErrorAware) and windows is not None
    if use_windows:
        if decode is None:
            raise ValueError("ErrorAware's consistency windows need the benchmark's decode")
        n_windows = dataset_format.validate_windows(windows)
    optim, opt_state = init_optimizer(model, config)
    # `to_device` keeps the known fields only, with the table's dtypes.
    device_data = dataset_format.to_device(train_data)
    device_windows = dataset_format.to_device(windows) if use_windows else None
    device_val = dataset_format.to_device(val_data) if val_data is not None else None
    history = []
    for epoch in range(config.epochs):
        start = time.perf_counter()
        rng = np.random.default_rng(config.seed * 1000 + epoch)
        order = rng.permutation(n)
        window_order = rng.permutation(n_windows) if use_windows else None
        batches = list(dataset_format.padded_batches(n, config.batch_size, order))
        batch_index = np.stack([index for index, _ in batches]).astype(np.int32)
        batch_mask = np.stack([mask for _, mask in batches])
        window_index = None
        if use_windows:
            slots = ((np.arange(len(batches))[:, None] * config.window_batch
                      + np.arange(config.window_batch)[None, :]) % n_windows)
            window_index = jnp.asarray(window_order[slots], jnp.int32)
        model, opt_state, losses = epoch_fn(model, opt_state, device_data,
                                            jnp.asarray(batch_index), jnp.asarray(batch_mask),
                                            device_windows, window_index, optim,
                                            decode if use_windows else None)
        sizes = batch_mask.sum(axis=1).astype(np.float64)
        train_loss = float(np.asarray(losses, np.float64) @ sizes / max(sizes.sum(), 1.0))
        record = {"epoch": epoch, "train_loss": train_loss, "steps": len(batches),
                  "val_loss": dataset_loss(model, device_val, config.batch_size)
                  if val_data is not None else None,
                  "seconds": time.perf_counter() - start}
        history.append(record)
        if log is not None:
            val = "-" if record["val_loss"] is None else f"{record['val_loss']:.4f}"
            log(f"epoch {epoch + 1}/{config.epochs} train {record['train_loss']:.4f} val {val} "
                f"({record['seconds']:.1f}s)")
    return model, history


def train_backbone(name: str, benchmark: str, train_data: dict, val_data: dict | None = None, *,
                   config: TrainConfig = TrainConfig(), windows: dict | None = None,
                   decode: DecodeFn | None = None, path: str | Path | None = None,
                   log: Callable[[str], None] | None = None) -> tuple[eqx.Module, list[dict]]:
    """Initialise `name` with `jax.random.key(config.seed)`, fit it, and save it to `path`."""
    model = make_backbone(name, jax.random.key(config.seed))
    model, history = fit(model, train_data, val_data, config=config, windows=windows,
                         decode=decode, log=log)
    if path is not None:
        save_checkpoint(path, model, benchmark=benchmark, seed=config.seed, epoch=config.epochs,
                        data_checksum=dataset_format.checksum(train_data))
    return model, history
