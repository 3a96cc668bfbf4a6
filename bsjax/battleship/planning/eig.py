"""Noisy-channel expected information gain and the Bayes-D ask-or-shoot rule (grand §5.5-5.6)."""

from __future__ import annotations

import jax.numpy as jnp

from bsjax.battleship.planning.sim import Lookahead


def binary_entropy(x: jnp.ndarray) -> jnp.ndarray:
    """H_b(x) in bits, with 0 log 0 = 0."""
    x = jnp.clip(x, 0.0, 1.0)
    safe = lambda v: jnp.where(v > 0, v * jnp.log2(jnp.where(v > 0, v, 1.0)), 0.0)  # noqa: E731
    return -(safe(x) + safe(1.0 - x))


def expected_information_gain(p_yes: jnp.ndarray, epsilon: float) -> jnp.ndarray:
    """EIG = H_b(eps + (1 - 2 eps) p) - H_b(eps), in bits, for a yes/no question whose noise-free
    answer is yes with probability p and is flipped with probability eps. `[K]` -> `[K]`."""
    return binary_entropy(epsilon + (1.0 - 2.0 * epsilon) * p_yes) - binary_entropy(
        jnp.asarray(epsilon, jnp.float32))


def expected_best_after(look: Lookahead) -> jnp.ndarray:
    """`[K]` E_a[max_t p_t | a] = W_yes p*_yes + W_no p*_no with the partition weights."""
    return look.p_yes * look.best_after[:, 0] + (1.0 - look.p_yes) * look.best_after[:, 1]


def bayes_d_ask(best_now: jnp.ndarray, best_after: jnp.ndarray, gamma: float = 0.95) -> jnp.ndarray:
    """Ask iff gamma * E[max p after the answer] > max p now."""
    return gamma * best_after > best_now
