"""The simulator's input-token model, fitted on prompts rendered with the real templates
(docs/gilp/spec.md §5.2 event 6).

`T_in = a0[call_type] + a_N·N_real + a_A·|A_t| + a_B·|B_t|·[skeleton] + a_W·history_lines`

`render_token_samples` walks the observed states of val tasks (the task's initial state with
statuses moved along, so serialised lengths vary as they do mid-episode), renders the four call
types with `bsjax.gilp.llm.prompts` (system prompt + user message, as one LLM call sends them),
and counts tokens with a tokenizer function (default `len(text) / 4`, the spec's fallback when no
offline tokenizer is loaded). `fit_token_model` solves the least-squares problem and reports R².

Everything is host-side string work; the only JAX call is the benchmark's jitted candidate list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.behaviour.agent import CALL_CORRECT, CALL_DRAFT, CALL_REPARSE
from bsjax.gilp.envs import registry
from bsjax.gilp.llm import prompts
from bsjax.gilp.planners import gate
from bsjax.gilp.types import graph_from_np

CALL_TYPES = ("draft", "reparse", "correct", "risk")
# SimParams field of each coefficient, in design-matrix column order.
COEF_FIELDS = ("tok_a0_draft", "tok_a0_reparse", "tok_a0_correct", "tok_a0_risk",
               "tok_a_n", "tok_a_a", "tok_a_b", "tok_a_w")
MIN_ROWS, MAX_ROWS = 4, 8  # k ≤ |B_t| ≤ 2k with k = 4 (top-k by value ∪ top-k by risk)
# Share of draft calls rendered without a skeleton (the Agent-Replan prompt).
AGENT_SHARE = 0.5


def char_tokens(text: str) -> float:
    """The spec's tokenizer fallback: characters / 4."""
    return len(text) / 4.0


@dataclasses.dataclass(frozen=True)
class TokenSamples:
    """Rendered prompts' features and token counts (one entry per prompt, `[S]` each).

    Attributes:
      call_type: int index into `CALL_TYPES` (`behaviour.agent.CALL_*`).
      n_real, n_cands, n_rows, history: N_real, |A_t|, |B_t| (0 without skeleton), history lines.
      tokens: float token count of system prompt + user message.
      bench: benchmark name of each prompt.
    """

    call_type: np.ndarray
    n_real: np.ndarray
    n_cands: np.ndarray
    n_rows: np.ndarray
    history: np.ndarray
    tokens: np.ndarray
    bench: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.tokens)

    def design(self) -> np.ndarray:
        """`[S, 8]` design matrix: call-type one-hots, then N_real, |A_t|, |B_t|, history."""
        onehot = np.eye(len(CALL_TYPES))[self.call_type]
        return np.column_stack([onehot, self.n_real, self.n_cands, self.n_rows, self.history])


def _concat(parts: Sequence[TokenSamples]) -> TokenSamples:
    return TokenSamples(**{f.name: (tuple(x for p in parts for x in getattr(p, f.name))
                                    if f.name == "bench" else
                                    np.concatenate([getattr(p, f.name) for p in parts]))
                           for f in dataclasses.fields(TokenSamples)})


def _moved_on(rng: np.random.Generator, graph: dict, progress: float) -> dict:
    """A plausible mid-episode observed state: a `progress` share of real nodes moved to a later
    status (most COMPLETED, some ACTIVE / FAILED / SKIPPED), as an episode leaves them."""
    status = np.asarray(graph["status"]).copy()
    real = np.flatnonzero(np.asarray(graph["nmask"], bool))
    moved = real[rng.random(len(real)) < progress]
    status[moved] = rng.choice(
        [config.COMPLETED, config.ACTIVE, config.FAILED, config.SKIPPED],
        size=len(moved),
        p=[0.7, 0.15, 0.1, 0.05],
    )
    return {**graph, "status": status.astype(np.int8)}


def _random_atoms(rng: np.random.Generator, real: np.ndarray, count: int) -> list[prompts.Atom]:
    nodes = rng.choice(real, size=min(count, len(real)), replace=False)
    return [(int(v), int(rng.integers(0, config.N_STATUS))) for v in sorted(nodes)]


def _n_claims(rng) -> int:
    """Atoms of one predicted or claimed delta: 1, or 2 w.p. 0.3 (a typical backbone delta and
    the simulator's n_h mix)."""
    return 1 + int(rng.random() < 0.3)


def _skeleton(rng, graph: dict, bench: str, acts, slots: list[int], n_rows: int):
    """`n_rows` skeleton rows on random candidates with random scores and 1-2 atom deltas (the
    rendered length depends on the count of rows and atoms, not on the values)."""
    status = np.asarray(graph["status"])
    real = np.flatnonzero(np.asarray(graph["nmask"], bool))
    rows = []
    for a in rng.choice(slots, size=n_rows, replace=False):
        atoms = _random_atoms(rng, real, _n_claims(rng))
        delta = tuple((v, int(status[v]), s) for v, s in atoms)
        affected = tuple(v for v, _ in atoms)
        rows.append(
            prompts.SkeletonRow(
                prompts.action_str(bench, acts[a]),
                float(rng.random()),
                float(rng.normal()),
                float(rng.random()),
                delta,
                affected,
                bool(rng.random() < 0.4),
            )
        )
    return tuple(rows)


def _history(rng, bench: str, acts, slots: list[int], real, lines: int) -> list[str]:
    return [
        prompts.history_line(
            t,
            prompts.action_str(bench, acts[rng.choice(slots)]),
            bool(rng.random() < 0.8),
            _random_atoms(rng, real, _n_claims(rng)),
        )
        for t in range(lines)
    ]


def _render(rng, call: int, ctx: prompts.PromptContext, bench_rules) -> str:
    """The user message of one call type on a context (skeleton already set or None)."""
    if call == CALL_DRAFT:
        return prompts.user_prompt(ctx)
    if call == CALL_REPARSE:
        return prompts.reparse_prompt(ctx)
    names, slots = ctx.candidates()
    a = int(rng.integers(len(slots)))
    action = tuple(int(x) for x in ctx.acts[slots[a]])
    real = np.flatnonzero(np.asarray(ctx.graph["nmask"], bool))
    explain = bench_rules.explain(ctx.graph, action)
    if call == CALL_CORRECT:
        status = np.asarray(ctx.graph["status"])
        imagined = _random_atoms(rng, real, _n_claims(rng))
        backbone = _random_atoms(rng, real, _n_claims(rng))
        im_status, bb_status = status.astype(int).copy(), status.astype(int).copy()
        s_mask, s_hat = np.zeros(len(status), bool), np.zeros(len(status), bool)
        for v, s in imagined:
            im_status[v], s_mask[v] = s, True
        for v, s in backbone:
            bb_status[v], s_hat[v] = s, True
        lines = gate.discrepancies(im_status, bb_status, s_mask, s_hat)
        return prompts.correction_prompt(ctx, names[a], imagined, backbone, lines, explain if lines else ())
    alts = [
        (names[int(i)], float(rng.random()))
        for i in rng.choice(len(slots), size=int(rng.integers(1, min(4, len(slots)) + 1)), replace=False)
    ]
    return prompts.risk_prompt(ctx, names[a], float(0.65 + 0.35 * rng.random()), explain, alts)


def render_token_samples(
    bench: str,
    tasks: Mapping[str, np.ndarray],
    n_prompts: int,
    seed: int = 0,
    tokenizer: Callable[[str], float] = char_tokens,
    fmt: str = "json_table",
) -> TokenSamples:
    """Render `n_prompts` prompts on the observed states of `tasks` (cycling through them).

    Each prompt draws a call type (draft half the time, the other three a sixth each), a state
    progress in [0, 1), 0-3 history lines and, where a skeleton is shown, 1-8 rows; draft calls
    are the agent-only prompt (`AGENT_SHARE`) or the full-skeleton prompt. Correction, re-parse
    and risk prompts always carry the full skeleton, as GILP's do.

    Args:
      bench: benchmark name.
      tasks: stacked task arrays `[T, ...]` (`workdir.tasks` / `generate.stack_tasks`).
      n_prompts: prompts to render.
      seed: host RNG seed.
      tokenizer: text -> token count (system prompt + user message are counted together).
      fmt: state serialisation format.
    Returns:
      `TokenSamples` with `n_prompts` entries.
    """
    rules = registry.get(bench)
    rng = np.random.default_rng(seed)
    n_tasks = int(np.asarray(tasks["status"]).shape[0])
    # Every prompt's state first, then one vmapped candidate call (one dispatch, not S).
    states = [
        _moved_on(rng, {k: np.asarray(v[i % n_tasks]) for k, v in tasks.items()}, float(rng.random()))
        for i in range(n_prompts)
    ]
    stacked = {k: np.stack([st[k] for st in states]) for k in states[0]}
    all_acts, all_amask = jax.device_get(
        jax.jit(jax.vmap(rules.candidates))(jax.vmap(graph_from_np)(stacked))
    )
    system_text = prompts.SYSTEM_PROMPT + "\n"
    cols: dict[str, list] = {k: [] for k in ("call_type", "n_real", "n_cands", "n_rows", "history", "tokens")}
    for i, graph in enumerate(states):
        acts, amask = all_acts[i], all_amask[i]
        names_slots = prompts.candidate_list(bench, acts, amask)[1]
        real = np.flatnonzero(np.asarray(graph["nmask"], bool))
        call = int(rng.choice(4, p=[0.5, 1 / 6, 1 / 6, 1 / 6]))
        with_skeleton = call != CALL_DRAFT or rng.random() >= AGENT_SHARE
        # |B_t| = |top-4 by value ∪ top-4 by risk|: 4-8 rows (fewer only with fewer candidates).
        most = min(MAX_ROWS, len(names_slots))
        n_rows = int(rng.integers(min(MIN_ROWS, most), most + 1)) if with_skeleton else 0
        # History lines at step t are min(t, W), t uniform over the episode's budget.
        lines = min(int(rng.integers(0, int(graph["budget"]))), prompts.HISTORY_WINDOW)
        ctx = prompts.PromptContext(
            graph=graph,
            bench=bench,
            acts=acts,
            amask=amask,
            history=_history(rng, bench, acts, names_slots, real, lines),
            skeleton=_skeleton(rng, graph, bench, acts, names_slots, n_rows) if with_skeleton else None,
            fields="full",
            fmt=fmt,
        )
        text = system_text + _render(rng, call, ctx, rules)
        for key, value in (
            ("call_type", call),
            ("n_real", len(real)),
            ("n_cands", len(names_slots)),
            ("n_rows", n_rows),
            ("history", lines),
            ("tokens", float(tokenizer(text))),
        ):
            cols[key].append(value)
    return TokenSamples(
        **{k: np.asarray(v, np.float64 if k == "tokens" else np.int64) for k, v in cols.items()},
        bench=(bench,) * n_prompts,
    )


def render_all(
    task_sets: Mapping[str, Mapping[str, np.ndarray]],
    n_prompts: int,
    seed: int = 0,
    tokenizer: Callable[[str], float] = char_tokens,
) -> TokenSamples:
    """`render_token_samples` over several benchmarks (`{bench: tasks}`), `n_prompts` split
    evenly (the remainder to the first benchmarks)."""
    benches = list(task_sets)
    share = [n_prompts // len(benches) + (i < n_prompts % len(benches)) for i in range(len(benches))]
    return _concat(
        [
            render_token_samples(b, task_sets[b], n, seed + i, tokenizer)
            for i, (b, n) in enumerate(zip(benches, share))
        ]
    )


@dataclasses.dataclass(frozen=True)
class TokenFit:
    """A least-squares fit of the token model.

    Attributes:
      coefs: `{SimParams field: value}` for `COEF_FIELDS`.
      r2: coefficient of determination on the samples.
      rmse: root-mean-square residual in tokens.
      n: prompts fitted.
      mean_tokens: mean token count per call type (`{name: value}`).
    """

    coefs: dict[str, float]
    r2: float
    rmse: float
    n: int
    mean_tokens: dict[str, float]


def fit_token_model(samples: TokenSamples) -> TokenFit:
    """Ordinary least squares of tokens on `samples.design()`; R² = 1 − SS_res / SS_tot."""
    x, y = samples.design(), samples.tokens
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    means = {
        name: float(y[samples.call_type == i].mean())
        for i, name in enumerate(CALL_TYPES)
        if np.any(samples.call_type == i)
    }
    return TokenFit(
        coefs={f: float(c) for f, c in zip(COEF_FIELDS, coef)},
        r2=r2,
        rmse=float(np.sqrt(np.mean(resid**2))),
        n=len(y),
        mean_tokens=means,
    )


__all__ = [
    "CALL_TYPES",
    "COEF_FIELDS",
    "TokenFit",
    "TokenSamples",
    "char_tokens",
    "fit_token_model",
    "render_all",
    "render_token_samples",
]
