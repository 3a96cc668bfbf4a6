"""Backbone inputs and models (docs/gilp/spec.md §3.1, §3.2, §3.4): feature layout, parameter counts,
padding / permutation invariance, hidden fields never read, initialisation, compile discipline."""

from __future__ import annotations

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bsjax.gilp import config, types
from bsjax.gilp.backbones import (
    BACKBONE_NAMES,
    SPEC_PARAMS,
    BackboneOut,
    backbone_name,
    count_params,
    features,
    make_backbone,
)
from bsjax.gilp.backbones.layers import Dense
from gilp.synthetic import random_graph_np, toy_decode


def hand_graph() -> dict[str, np.ndarray]:
    """Four real nodes in a 24-slot graph:

        0 (subtask, PENDING)  --depends_on-->  1 (tool, ACTIVE)  --depends_on--> 2 (resource, COMPLETED)
        0  --propagates--> 2
        3 (job, FAILED, goal)  --can_serve--> 0
    """
    g = types.empty_graph_np()
    g["nmask"][:4] = True
    g["status"][:4] = [config.PENDING, config.ACTIVE, config.COMPLETED, config.FAILED]
    g["ntype"][:4] = [config.SUBTASK, config.TOOL, config.RESOURCE, config.JOB]
    g["goal"][3] = True
    g["attr"][:4] = np.arange(32, dtype=np.float32).reshape(4, 8) / 10
    g["etype"][0, 1] = config.DEPENDS_ON
    g["etype"][1, 2] = config.DEPENDS_ON
    g["etype"][0, 2] = config.PROPAGATES
    g["etype"][3, 0] = config.CAN_SERVE
    g["hidden"][:4] = 1
    return g


def test_feature_layout_on_hand_graph():
    g = types.graph_from_np(hand_graph())
    x = np.asarray(features.node_features(g, jnp.array([1, 2, -1], jnp.int32)))
    assert x.shape == (config.N_MAX, features.N_FEATURES) == (24, 40) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:4, 0:5], np.eye(5)[[0, 1, 2, 3]])            # status
    np.testing.assert_array_equal(x[:4, 5:10], np.eye(5)[[0, 1, 2, 3]])           # node type
    np.testing.assert_array_equal(x[:4, 10], [0, 0, 0, 1])                         # goal
    np.testing.assert_allclose(x[:4, 11:19], np.arange(32).reshape(4, 8) / 10)     # attributes
    incoming, outgoing = x[:4, 19:27] * 4, x[:4, 27:35] * 4
    expect_in = np.zeros((4, 8))
    expect_in[1, config.DEPENDS_ON] = expect_in[2, config.DEPENDS_ON] = expect_in[2, config.PROPAGATES] = 1
    expect_in[0, config.CAN_SERVE] = 1
    expect_out = np.zeros((4, 8))
    expect_out[0, config.DEPENDS_ON] = expect_out[1, config.DEPENDS_ON] = expect_out[0, config.PROPAGATES] = 1
    expect_out[3, config.CAN_SERVE] = 1
    np.testing.assert_array_equal(incoming, expect_in)
    np.testing.assert_array_equal(outgoing, expect_out)
    np.testing.assert_array_equal(x[:4, 35:38], np.tile([0, 1, 0], (4, 1)))       # kind broadcast
    np.testing.assert_array_equal(x[:4, 38], [0, 0, 1, 0])                         # is_arg1
    np.testing.assert_array_equal(x[:4, 39], [0, 0, 0, 0])                         # is_arg2
    assert not x[4:].any()                                                         # padding zero

    x2 = np.asarray(features.node_features(g, jnp.array([0, 3, 1], jnp.int32)))
    np.testing.assert_array_equal(x2[:4, 38], [0, 0, 0, 1])
    np.testing.assert_array_equal(x2[:4, 39], [0, 1, 0, 0])
    # A padding action (kind -1) has no kind channel and no argument flags.
    x3 = np.asarray(features.node_features(g, jnp.array([-1, -1, -1], jnp.int32)))
    assert not x3[:, 35:].any()


def test_edge_inputs_on_hand_graph():
    inputs = features.graph_inputs(types.graph_from_np(hand_graph()))
    adj = np.asarray(inputs.adj)
    expect = np.zeros((24, 24))
    for u, v in ((0, 1), (1, 2), (0, 2), (3, 0)):
        expect[u, v] = expect[v, u] = 1
    np.testing.assert_array_equal(adj, expect)
    degree = expect[:4, :4].sum(1) + 1                                             # with self loop
    norm = (expect[:4, :4] + np.eye(4)) / np.sqrt(np.outer(degree, degree))
    np.testing.assert_allclose(np.asarray(inputs.adj_norm)[:4, :4], norm, rtol=1e-6)
    assert not np.asarray(inputs.adj_norm)[4:].any() and not np.asarray(inputs.adj_norm)[:, 4:].any()
    assert int(inputs.etype[0, 2]) == config.PROPAGATES and int(inputs.etype[2, 0]) == config.NO_EDGE


@pytest.fixture(scope="module")
def models():
    return {name: make_backbone(name, jax.random.key(i)) for i, name in enumerate(BACKBONE_NAMES)}


def test_parameter_counts(models):
    counts = {name: count_params(model) for name, model in models.items()}
    # The spec's layer structures give these exactly (heads: 21,128 at d_h = 64, 41,608 at 128).
    assert counts == {"MLP": 78_728, "GCN": 32_072, "MPNN": 74_632, "GPS": 82_760,
                      "ActionNode": 49_096, "ErrorAware": 32_072}
    for name, count in counts.items():
        assert count < 100_000
        assert abs(count - SPEC_PARAMS[name]) <= 0.10 * SPEC_PARAMS[name], name


def test_registry(models):
    with pytest.raises(ValueError, match="unknown backbone"):
        make_backbone("transformer", jax.random.key(0))
    assert backbone_name(make_backbone("mpnn", jax.random.key(0))) == "MPNN"
    assert {backbone_name(m) for m in models.values()} == set(BACKBONE_NAMES)


def test_xavier_uniform_weights_zero_biases(models):
    dense_layers = [leaf for leaf in jax.tree_util.tree_leaves(
        models["MPNN"], is_leaf=lambda x: isinstance(x, Dense)) if isinstance(leaf, Dense)]
    assert len(dense_layers) == 13                 # encoder, 2 × (φ: 2, ψ: 2), heads: 4
    for layer in dense_layers:
        d_out, d_in = layer.weight.shape
        limit = np.sqrt(6.0 / (d_in + d_out))
        assert float(jnp.abs(layer.weight).max()) <= limit
        assert float(jnp.abs(layer.weight).max()) > 0.8 * limit          # uniform, not tiny
        assert not np.asarray(layer.bias).any()


def permuted_padded(g: dict, n_real: int, n_max: int, rng: np.random.Generator):
    """The same graph in `n_max` slots with its real nodes at random ids and junk in the padded
    slots (statuses, types, attributes: everything but nmask and edges). Returns (graph, ids)."""
    ids = rng.permutation(n_max)[:n_real]
    out = types.empty_graph_np(n_max)
    out["status"][:] = rng.integers(0, 5, n_max)
    out["ntype"][:] = rng.integers(0, 5, n_max)
    out["goal"][:] = rng.random(n_max) < 0.5
    out["attr"][:] = rng.random((n_max, config.N_ATTR))
    for name in ("status", "ntype", "goal", "attr", "hidden", "nmask"):
        out[name][ids] = g[name][:n_real]
    out["etype"][np.ix_(ids, ids)] = g["etype"][:n_real, :n_real]
    return out, ids


def remap_actions(acts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    out = acts.copy()
    out[:, 1] = np.where(acts[:, 1] >= 0, ids[np.maximum(acts[:, 1], 0)], -1)
    out[:, 2] = np.where(acts[:, 2] >= 0, ids[np.maximum(acts[:, 2], 0)], -1)
    return out


@eqx.filter_jit
def score(model, inputs, acts):
    return jax.vmap(model, in_axes=(None, 0))(inputs, acts)


@pytest.mark.parametrize("name", BACKBONE_NAMES)
def test_padding_permutation_and_hidden_invariance(models, name):
    model, rng, n_real = models[name], np.random.default_rng(7), 7
    g = random_graph_np(rng, n_real, edge_p=0.4)
    g["etype"][4, 1] = config.ASSIGNED                                   # a back edge, both directions
    g["etype"][1, 4] = config.PROPAGATES
    acts = np.array([[0, 2, 5], [1, 0, -1], [2, 6, -1], [0, 3, 3], [-1, -1, -1]], np.int32)
    ref = score(model, features.graph_inputs(types.graph_from_np(g)), jnp.asarray(acts))
    chex.assert_shape(ref.delta_logits, (5, 24, 3))
    chex.assert_tree_all_finite(ref)

    for n_max in (24, 32):
        other, ids = permuted_padded(g, n_real, n_max, rng)
        other["hidden"][:] = rng.integers(0, 2, other["hidden"].shape)      # never read
        out = score(model, features.graph_inputs(types.graph_from_np(other)),
                    jnp.asarray(remap_actions(acts, ids)))
        for field in ("valid_logit", "reward", "done_logit", "risk_logit", "value"):
            np.testing.assert_allclose(getattr(out, field), getattr(ref, field), atol=1e-5,
                                       rtol=1e-5, err_msg=f"{name} {field} n_max={n_max}")
        np.testing.assert_allclose(np.asarray(out.delta_logits)[:, ids],
                                   np.asarray(ref.delta_logits)[:, :n_real], atol=1e-5, rtol=1e-5)
        padded = np.setdiff1d(np.arange(n_max), ids)
        assert not np.asarray(out.delta_logits)[:, padded].any()


def test_hidden_and_anc_never_change_outputs(models):
    g = hand_graph()
    # Same candidate count as the invariance test, so `score` reuses its compiled versions.
    acts = jnp.array([[0, 1, -1], [2, 3, 0], [1, 2, -1], [0, 0, 3], [-1, -1, -1]], jnp.int32)
    other = {**g, "hidden": np.random.default_rng(0).integers(-3, 3, g["hidden"].shape),
             "anc": np.ones_like(g["anc"])}
    for _name, model in models.items():
        a = score(model, features.graph_inputs(types.graph_from_np(g)), acts)
        b = score(model, features.graph_inputs(types.graph_from_np(other)), acts)
        chex.assert_trees_all_equal(a, b)


def test_vmapped_scorer_traces_once(models):
    chex.clear_trace_counter()

    def scorer(model, inputs, acts):
        return jax.vmap(model, in_axes=(None, 0))(inputs, acts)

    scorer_jit = eqx.filter_jit(chex.assert_max_traces(scorer, n=1))
    rng = np.random.default_rng(3)
    for seed in range(3):
        g = random_graph_np(rng, 5 + seed)
        acts = jnp.asarray(rng.integers(0, 5, (config.A_MAX, 3)), jnp.int32)
        out = scorer_jit(models["MPNN"], features.graph_inputs(types.graph_from_np(g)), acts)
        assert isinstance(out, BackboneOut)
        chex.assert_shape(out.valid_logit, (config.A_MAX,))


def test_expected_next_status_matches_decode():
    g = types.graph_from_np(hand_graph())
    action = jnp.array([0, 0, -1], jnp.int32)
    dirs = jnp.zeros(24, jnp.int32).at[0].set(1).at[3].set(-1)
    decisive = jax.nn.one_hot(dirs + 1, 3) * 50.0
    expected = features.expected_next_status(toy_decode, g, action, decisive)
    np.testing.assert_allclose(expected, jax.nn.one_hot(toy_decode(g, action, dirs), 5), atol=1e-6)
    uniform = features.expected_next_status(toy_decode, g, action, jnp.zeros((24, 3)))
    np.testing.assert_allclose(uniform.sum(-1), 1.0, rtol=1e-6)
    soft = features.with_soft_status(features.graph_inputs(g), uniform)
    np.testing.assert_allclose(soft.node_x[:4, :5], uniform[:4], rtol=1e-6)
    assert not np.asarray(soft.node_x[4:]).any()


def test_mpnn_layer_matches_the_per_edge_formula(models):
    """The dense rewrite equals the formula: receiver r sums φ([h_s ‖ h_r ‖ E[τ] ‖ ±1]) over its
    in-edges (+1) and out-edges (−1), then h_r + ψ([h_r ‖ m_r])."""
    model, rng = models["MPNN"], np.random.default_rng(11)
    n, layer = 6, models["MPNN"].layers[0]
    etype = np.full((n, n), -1)
    etype[0, 1], etype[1, 0], etype[2, 3], etype[4, 2], etype[5, 0] = 0, 6, 7, 2, 5
    nmask = np.array([True] * 5 + [False])                  # node 5 is padding: its edge is masked
    etype_masked = np.where(nmask[:, None] & nmask[None, :], etype, -1)
    h = rng.normal(size=(n, 64)).astype(np.float32) * nmask[:, None]
    real = jnp.asarray(nmask, jnp.float32)[:, None]
    got = layer(jnp.asarray(h), jnp.asarray(etype_masked), model.edge_table, real)

    table = np.asarray(model.edge_table)
    phi = lambda z: np.asarray(layer.message(jnp.asarray(z, jnp.float32)))  # noqa: E731
    want = np.zeros_like(h)
    for r in range(n):
        m = np.zeros(64, np.float32)
        for s in range(n):
            if etype_masked[s, r] >= 0:
                m += phi(np.concatenate([h[s], h[r], table[etype_masked[s, r]], [1.0]]))
            if etype_masked[r, s] >= 0:
                m += phi(np.concatenate([h[s], h[r], table[etype_masked[r, s]], [-1.0]]))
        upd = np.asarray(layer.update(jnp.asarray(np.concatenate([h[r], m]))))
        want[r] = (h[r] + upd) * nmask[r]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
