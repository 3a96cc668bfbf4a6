"""Backbone training, ErrorAware's extra terms, checkpoints, the dataset format and the §3.6
metrics (docs/gilp/spec.md §3.3–§3.6, §8 "Training", "Compile discipline")."""

from __future__ import annotations

import json

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bsjax.gilp.backbones import make_backbone
from bsjax.gilp.data import dataset_format
from bsjax.gilp.training import train
from bsjax.gilp.training.backbone_metrics import METRIC_NAMES, backbone_metrics, metrics_from_predictions
from gilp.synthetic import toy_dataset, toy_decode, toy_windows


@pytest.fixture(scope="module")
def data():
    return toy_dataset(0, 40)


@pytest.fixture(scope="module")
def windows():
    return toy_windows(1, 12)


# ---------------------------------------------------------------------------------------------
# dataset format
# ---------------------------------------------------------------------------------------------

def test_dataset_format(data, windows):
    assert dataset_format.validate(data) == 40
    assert dataset_format.validate_windows(windows) == 12
    with pytest.raises(ValueError, match="missing fields"):
        dataset_format.validate({k: v for k, v in data.items() if k != "risk"})
    with pytest.raises(ValueError, match="disagree"):
        dataset_format.validate({**data, "risk": data["risk"][:5]})
    assert dataset_format.checksum(data) == dataset_format.checksum({k: np.copy(v) for k, v in data.items()})
    assert dataset_format.checksum(data) != dataset_format.checksum({**data, "reward": data["reward"] + 1})
    batches = list(dataset_format.padded_batches(300, 128, np.arange(300)[::-1]))
    assert [int(m.sum()) for _, m in batches] == [128, 128, 44]
    assert all(len(i) == 128 for i, _ in batches)
    assert sorted(np.concatenate([i[m] for i, m in batches]).tolist()) == list(range(300))


# ---------------------------------------------------------------------------------------------
# loss
# ---------------------------------------------------------------------------------------------

def test_sample_mask_excludes_padding(data):
    model = make_backbone("GCN", jax.random.key(0))
    mask = jnp.asarray(np.arange(16) < 8)
    loss = eqx.filter_jit(train.loss_fn)
    # The same 8 real samples padded with two different sets of junk: identical losses.
    first = dataset_format.to_device(
        dataset_format.take(data, np.concatenate([np.arange(8), np.arange(20, 28)]))
    )
    second = dataset_format.to_device(
        dataset_format.take(data, np.concatenate([np.arange(8), np.arange(30, 38)]))
    )
    loss_first, aux_first = loss(model, first, mask)
    loss_second, aux_second = loss(model, second, mask)
    chex.assert_trees_all_close((loss_first, aux_first), (loss_second, aux_second), rtol=1e-6)
    # And the masked batch mean equals the per-sample evaluation over the 8 real ones.
    total, count = train.eval_loss(model, first, mask)
    assert float(count) == 8.0
    np.testing.assert_allclose(total / count, loss_first, rtol=1e-5)


def test_delta_ce_is_mean_over_real_nodes():
    logits = jnp.zeros((1, 24, 3)).at[0, 0].set(jnp.array([0.0, 0.0, 10.0]))
    delta = jnp.zeros((1, 24), jnp.int8).at[0, 0].set(1)
    nmask = jnp.zeros((1, 24), bool).at[0, :4].set(True)
    ce = train.node_delta_ce(logits, delta, nmask)
    # Node 0 is almost certain (≈0), nodes 1–3 uniform (log 3); padded nodes ignored.
    np.testing.assert_allclose(ce, [3 * np.log(3) / 4], rtol=1e-3)


@pytest.mark.parametrize("name", ["MLP", "MPNN", "ErrorAware"])
def test_overfits_tiny_data_and_epoch_traces_once(data, windows, name):
    """A few dozen steps on 40 samples (batches 16 + 16 + 8 padded): the loss falls, and the
    jitted epoch (a scan over the batches) traces exactly once across epochs."""
    chex.clear_trace_counter()
    epoch = eqx.filter_jit(chex.assert_max_traces(train.train_epoch, n=1))
    config = train.TrainConfig(epochs=14, batch_size=16, window_batch=4)
    model = make_backbone(name, jax.random.key(0))
    val = data if name == "ErrorAware" else None
    model, history = train.fit(
        model, data, val, config=config, windows=windows, decode=toy_decode, epoch_fn=epoch
    )
    assert [h["steps"] for h in history] == [3] * 14
    first, last = history[0]["train_loss"], history[-1]["train_loss"]
    assert np.isfinite(last) and last < 0.5 * first, (first, last)
    if val is not None:
        assert history[-1]["val_loss"] < history[0]["val_loss"]


def test_scanned_epoch_equals_stepping_batch_by_batch(data, windows):
    """`fit`'s on-device epoch scan makes the same updates as one `train_step` per host batch
    in the same shuffled order (ErrorAware: with its window batches too)."""
    config = train.TrainConfig(epochs=1, batch_size=16, window_batch=4)
    for name in ("MLP", "ErrorAware"):  # MLP: the plain path, compiled fastest
        start = make_backbone(name, jax.random.key(0))
        use_windows = name == "ErrorAware"
        fitted, _ = train.fit(
            start, data, config=config, windows=windows if use_windows else None, decode=toy_decode
        )
        model, (optim, state) = start, train.init_optimizer(start, config)
        n, n_windows = dataset_format.validate(data), dataset_format.validate_windows(windows)
        rng = np.random.default_rng(config.seed * 1000)
        order, window_order = rng.permutation(n), rng.permutation(n_windows)
        for b, (index, mask) in enumerate(dataset_format.padded_batches(n, config.batch_size, order)):
            slots = (b * config.window_batch + np.arange(config.window_batch)) % n_windows
            window_batch = dataset_format.to_device(dataset_format.take(windows, window_order[slots]))
            model, state, _, _ = train.train_step_jit(
                model,
                state,
                dataset_format.to_device(dataset_format.take(data, index)),
                jnp.asarray(mask),
                window_batch if use_windows else None,
                optim,
                toy_decode if use_windows else None,
            )
        for got, want in zip(
            jax.tree_util.tree_leaves(eqx.filter(fitted, eqx.is_array)),
            jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)),
        ):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# ErrorAware extra terms
# ---------------------------------------------------------------------------------------------


def test_spectral_regulariser():
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(64, 64)))
    q = jnp.asarray(q, jnp.float32)
    assert float(train.spectral_penalty((0.9 * q, 0.5 * q))) == 0.0
    np.testing.assert_allclose(train.spectral_norm_estimate(1.5 * q), 1.5, rtol=1e-5)
    np.testing.assert_allclose(train.spectral_penalty((1.5 * q, 0.9 * q)), 0.25, rtol=1e-4)
    # A clear spectral gap: 8 iterations find the top singular value.
    u, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(64, 64)))
    v, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(64, 64)))
    s = np.linspace(0.1, 1.0, 64)
    s[-1] = 3.0
    w = jnp.asarray(u @ np.diag(s) @ v.T, jnp.float32)
    np.testing.assert_allclose(train.spectral_norm_estimate(w), 3.0, rtol=1e-3)
    # The gradient goes through W only (iterates stopped): d σ / d W = u vᵀ has unit norm.
    grad = jax.grad(train.spectral_norm_estimate)(w)
    np.testing.assert_allclose(jnp.linalg.norm(grad), 1.0, rtol=1e-3)


def test_critical_node_weights():
    adj = jnp.zeros((1, 5, 5)).at[0, 0, 1].set(1).at[0, 1, 0].set(1).at[0, 1, 2].set(1).at[0, 2, 1].set(1)
    nmask = jnp.zeros((1, 5), bool).at[0, :4].set(True)
    weights = train.critical_node_weights(adj, nmask)
    # Degrees 1, 2, 1, 0 over 4 real nodes: mean 1.
    np.testing.assert_allclose(weights[0, :4], [2.0, 3.0, 2.0, 1.0])
    np.testing.assert_allclose(train.critical_node_weights(jnp.zeros((1, 5, 5)), nmask)[0, :4], 1.0)


def test_erroraware_extra_terms_are_finite(data, windows):
    model = make_backbone("ErrorAware", jax.random.key(1))
    batch = dataset_format.to_device(dataset_format.take(data, np.arange(16)))
    win = dataset_format.to_device(dataset_format.take(windows, np.arange(4)))
    value_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(train.loss_fn, has_aux=True))
    (loss, aux), grads = value_and_grad(model, batch, jnp.ones(16, bool), win, toy_decode)
    assert {"critical", "spectral", "consistency", "total"} <= set(aux)
    chex.assert_tree_all_finite((loss, aux, eqx.filter(grads, eqx.is_inexact_array)))
    assert float(aux["consistency"]) > 0 and float(aux["critical"]) > float(aux["delta"])
    # Other backbones get the plain multi-task loss only (shapes suffice: nothing is run).
    _, plain = eqx.filter_eval_shape(
        train.loss_fn, make_backbone("GCN", jax.random.key(1)), batch, jnp.ones(16, bool), win, toy_decode
    )
    assert set(plain) == set(train.TERM_WEIGHTS) | {"total"}


# ---------------------------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------------------------


def test_fit_is_deterministic(data):
    config = train.TrainConfig(epochs=2, batch_size=16, seed=3)
    first, _ = train.fit(make_backbone("GCN", jax.random.key(3)), data, config=config)
    second, _ = train.fit(make_backbone("GCN", jax.random.key(3)), data, config=config)
    chex.assert_trees_all_equal(eqx.filter(first, eqx.is_array), eqx.filter(second, eqx.is_array))


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------


def test_checkpoint_round_trip(tmp_path, data):
    model = make_backbone("ActionNode", jax.random.key(5))
    # Move the weights away from their initial values so a fresh init cannot pass as a load.
    model = jax.tree_util.tree_map(lambda x: x + 0.25 if eqx.is_inexact_array(x) else x, model)
    checksum = dataset_format.checksum(data)
    path = train.save_checkpoint(
        tmp_path / "taskgraph_actionnode_s0",
        model,
        benchmark="taskgraph",
        seed=0,
        epoch=50,
        data_checksum=checksum,
    )
    assert path.suffix == ".eqx" and path.with_suffix(".json").exists()
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["architecture"] == "ActionNode" and meta["epoch"] == 50
    assert meta["sizes"] == {"n_max": 24, "n_features": 40} and meta["params"] == 49_096

    loaded, meta = train.load_checkpoint(
        path, architecture="actionnode", benchmark="taskgraph", data_checksum=checksum
    )
    chex.assert_trees_all_equal(eqx.filter(loaded, eqx.is_array), eqx.filter(model, eqx.is_array))

    with pytest.raises(ValueError, match="benchmark"):
        train.load_checkpoint(path, benchmark="toolchain")
    with pytest.raises(ValueError, match="data_checksum"):
        train.load_checkpoint(path, data_checksum="0" * 64)
    with pytest.raises(FileNotFoundError, match="not found"):
        train.load_checkpoint(tmp_path / "missing.eqx")
    sidecar = path.with_suffix(".json")
    sidecar.write_text(json.dumps({**meta, "architecture": "MPNN"}))
    with pytest.raises(ValueError, match="does not fit"):
        train.load_checkpoint(path)
    sidecar.unlink()
    with pytest.raises(FileNotFoundError, match="sidecar"):
        train.load_checkpoint(path)


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------


def test_metrics_from_hand_predictions():
    nmask = np.array([[True, True, False], [True, True, True]])
    labels = {
        "nmask": nmask,
        "delta": np.array([[1, 0, 0], [0, -1, 0]]),
        "next_status": np.array([[1, 0, 0], [2, 3, 0]]),
        "valid": np.array([True, False]),
        "done": np.array([False, True]),
        "reward": np.array([0.1, -0.05]),
        "risk": np.array([0.0, 1.0]),
        "value": np.array([1.0, 0.0]),
    }
    logits = np.zeros((2, 3, 3))
    logits[0, 0, 2] = logits[0, 1, 1] = 5  # sample 0: both real nodes right
    logits[1, 0, 1] = logits[1, 1, 1] = 5  # sample 1: node 1 wrong (predicts 0, not −1)
    logits[0, 2, 0] = 5  # padded node: ignored
    logits[1, 2, 1] = 5  # sample 1, node 2: right
    expected = np.eye(5)[[[1, 0, 0], [2, 0, 0]]].astype(np.float32)  # node (1, 1) off by 2
    pred = {
        "delta_logits": logits,
        "expected_status": expected,
        "valid_logit": np.array([2.0, 1.0]),
        "done_logit": np.array([-1.0, 1.0]),
        "reward": np.array([0.1, 0.05]),
        "risk_logit": np.array([0.0, 0.0]),
        "value": np.array([1.0, 1.0]),
    }
    m = metrics_from_predictions(pred, labels)
    assert m["node_mse"] == pytest.approx(2 / 5)
    assert m["delta_acc_all"] == pytest.approx(4 / 5)
    assert m["delta_acc_changed"] == pytest.approx(1 / 2)
    assert m["valid_acc"] == 0.5 and m["trans_acc"] == 0.5 and m["done_acc"] == 1.0
    assert m["reward_mse"] == pytest.approx(0.01 / 2)
    assert m["risk_mae"] == pytest.approx(0.5)
    assert m["value_mse"] == pytest.approx(0.5)


def test_backbone_metrics_runs(data):
    model = make_backbone("GCN", jax.random.key(0))
    metrics = backbone_metrics(model, data, toy_decode, batch_size=16)
    assert set(metrics) == set(METRIC_NAMES)
    assert metrics["params"] == 32_072
    for name in METRIC_NAMES[:-1]:
        assert np.isfinite(metrics[name]), name
    assert 0.0 <= metrics["trans_acc"] <= metrics["valid_acc"] <= 1.0
