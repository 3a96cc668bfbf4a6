"""Studies: several runs that make one table — the paper's decomposition, a parameter sweep.

A study is a base `RunConfig` and named rows, each a set of overrides of the base. Every row is an
ordinary run directory under `OUT/runs/ROW` (resumable on its own); `OUT/study.json` records the
rows, and `bsjax.battleship.report.tables` rebuilds the table and figures from those files alone.

Definitions come from code (`paper_study`, `sweep_study`) or from TOML files (`experiments/`):

    [experiment]
    kind = "paper"                  # paper | sweep
    baseline = "B3"                 # optional: the report compares every row with this one
    [base]                          # RunConfig fields shared by every row
    protocol = "paper"
    sampler = "chain"
    [[rows]]                        # paper: the rows, in table order
    id = "B1"
    layer = "L1"
    label = "greedy + MCMC (belief only)"
    agent = "greedy"
    against = "B2"                  # optional: with --paired adjacent, compare with this row
    [sweep]                         # sweep: one row per value
    param = "tau"
    values = "0:1:0.05"             # lo:hi:step (both ends included) or a list
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import tomllib
from pathlib import Path
from typing import Any

import jax

from bsjax.battleship.harness import experiment, run_config
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core.errors import UsageError
from bsjax.core.files import LOCK_NAME, command_line, write_text_atomic, writer_lock


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a study's table: a run with `overrides` of the base config."""

    id: str
    label: str
    layer: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()
    needs_llm: bool = False   # skipped (and said so in the table) when the base has --llm none
    against: str | None = None  # `--paired adjacent` compares the row with this one, not the above

    def config(self, base: RunConfig) -> RunConfig:
        overrides = dict(self.overrides)
        if overrides.get("llm", "ollama") != "ollama":  # host and model belong to Ollama
            overrides = {"llm_host": None, "model": None, **overrides}
        if isinstance(overrides.get("params"), dict):  # a row's params add to the base's
            overrides["params"] = {**base.params, **overrides["params"]}
        return dataclasses.replace(base, **overrides)

    def to_json(self) -> dict:
        out = {"id": self.id, "label": self.label, "layer": self.layer,
               "overrides": dict(self.overrides), "needs_llm": self.needs_llm}
        return out if self.against is None else dict(out, against=self.against)


@dataclasses.dataclass(frozen=True)
class Study:
    kind: str                 # "paper" | "sweep"
    base: RunConfig
    rows: tuple[Row, ...]
    title: str = ""
    param: str | None = None  # sweep: the swept RunConfig field, or agent param (in `params`)
    baseline: str | None = None  # the row the report compares every other row with, game by game

    def active_rows(self) -> list[Row]:
        return [r for r in self.rows if not self.skipped(r)]

    def skipped(self, row: Row) -> bool:
        return row.needs_llm and self.base.llm == "none"

    def to_json(self) -> dict:
        return {"kind": self.kind, "title": self.title, "param": self.param,
                "baseline": self.baseline, "base": dataclasses.asdict(self.base),
                "rows": [dict(r.to_json(), skipped=self.skipped(r)) for r in self.rows]}


def _row(id, label, layer="", needs_llm=False, **overrides) -> Row:
    return Row(id, label, layer, tuple(overrides.items()), needs_llm)


# The paper's unified table (docs/battleship/protocol.md §13.1), in its order, plus Grand's LLM-free Bayes
# captain for reference. L4 rows need an LLM backend.
PAPER_ROWS = (
    _row("B1", "greedy + MCMC (belief only)", "L1", agent="greedy"),
    _row("B2", "WMA (planning)", "L2", agent="wma"),
    _row("B3", "MRA, revision off", "L3", agent="mra", revision="off"),
    _row("B4", "MRA, revision on", "L3", agent="mra", revision="on"),
    _row("B5", "MRA-LLM, tau = 0 (gate closed)", "L4", True, agent="mra-llm", tau=0.0),
    _row("B6", "MRA-LLM, tau = 1.0", "L4", True, agent="mra-llm", tau=1.0),
    # The null for B6: every gate opening answered by a uniformly random legal revision.
    _row("B6-uniform", "MRA-LLM, tau = 1.0, uniform random revisions", "L4", agent="mra-llm",
         tau=1.0, llm="uniform", llm_format="schema"),
    _row("bayes", "Bayes-QMD without LLM (Grand et al.)", "ref", agent="bayes"),
)

# The Grand suite: its LLM-free anchors first (random, greedy), then the same layers.
GRAND_ROWS = (
    _row("random", "Random", "ref", agent="random"),
    _row("greedy", "Greedy (MAP)", "L1", agent="greedy"),
) + PAPER_ROWS[1:]

# Per protocol: the belief the paper's rows were run with (the reference chain, bit-exact
# streams) and the Grand captains' importance sampler over 1000 boards.
PAPER_BASE = {"paper": {"sampler": "chain", "rng": "reference", "particles": 500},
              "grand": {"sampler": "importance", "rng": "jax", "particles": 1000}}


def paper_study(base: RunConfig) -> Study:
    rows = PAPER_ROWS if base.protocol == "paper" else GRAND_ROWS
    return Study("paper", base, rows, f"bsjax paper ({base.protocol} protocol)")


def paper_base(protocol: str = "paper", **fields) -> RunConfig:
    """The paper table's base config for a protocol; `fields` override it."""
    if protocol not in PAPER_BASE:
        raise UsageError(f"unknown protocol {protocol!r} (choose from paper, grand)")
    defaults = dict(PAPER_BASE[protocol])
    if fields.get("sampler", defaults["sampler"]) != "chain":
        defaults["rng"] = "jax"  # the reference streams exist for the chain only
    return RunConfig(**{"protocol": protocol, **defaults, **fields})


# --- sweeps -------------------------------------------------------------------------------------

SWEEPABLE = {f.name: f for f in dataclasses.fields(RunConfig)}
NOT_SWEEPABLE = ("protocol", "suite", "board_file", "llm_host", "devices", "batch_size", "verbose")


def _number(text: str, kind: type):
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"not a {kind.__name__}: {text!r}") from None


def is_agent_param(param: str) -> bool:
    """Whether a swept name is an agent (or belief) param, set through `RunConfig.params`,
    rather than a RunConfig field. Which names the agent has is checked per row."""
    return param not in SWEEPABLE


def parse_values(param: str, spec: str | list) -> list:
    """Values of a swept RunConfig field or agent param (numbers): `lo:hi:step` (inclusive),
    `a,b,c`, or a TOML list."""
    if param in NOT_SWEEPABLE or param == "params":
        names = ", ".join(n for n in SWEEPABLE if n not in NOT_SWEEPABLE and n != "params")
        raise UsageError(f"cannot sweep {param!r} (choose from {names}, or an agent param "
                         "such as gamma)")
    if is_agent_param(param):
        kind = float
    else:
        default = getattr(RunConfig(), param)
        kind = float if param in ("tau", "answer_noise") else type(default)
    if isinstance(spec, list):
        items = [str(v) for v in spec]
    elif ":" in spec:
        if kind not in (int, float):
            raise UsageError(f"{param} is not numeric: give a list such as a,b,c")
        parts = spec.split(":")
        if len(parts) != 3:
            raise UsageError(f"a range is lo:hi:step (got {spec!r})")
        lo, hi, step = (_number(x, float) for x in parts)
        if step <= 0 or hi < lo:
            raise UsageError(f"a range needs lo <= hi and step > 0 (got {spec!r})")
        count = int(round((hi - lo) / step)) + 1
        if count > 1000:
            raise UsageError(f"{spec!r} gives {count} values; at most 1000")
        items = [repr(round(lo + i * step, 10)) for i in range(count)]
    else:
        items = [x.strip() for x in spec.split(",") if x.strip()]
    if not items:
        raise UsageError(f"no values for {param}")
    if kind in (int, float):
        values = [_number(x, kind) if kind is float else int(_number(x, float)) for x in items]
    else:
        values = items
    if len(set(values)) != len(values):
        raise UsageError(f"repeated values for {param}: {spec!r}")
    return values


def _value_id(param: str, value) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{param}={text}"


def _check_agent_param(base: RunConfig, param: str) -> None:
    """A swept name that is no RunConfig field must be a param of the base's agent (or belief).
    A base that cannot build its player is left to `run_config.validate`, which names the fault."""
    from bsjax.battleship.config import protocol
    from bsjax.battleship.harness import params as params_lib
    try:
        player = run_config.make_player(base, protocol(base.protocol))
    except (KeyError, ValueError, UsageError):
        return
    known = sorted(params_lib.names(jax.device_get(player.default_params())))
    if param not in known:
        raise UsageError(f"cannot sweep {param!r}: no setting has that name, and agent "
                         f"{base.agent!r} has no such param (its params: "
                         f"{', '.join(known) or 'none'})")


def sweep_study(base: RunConfig, param: str, values: str | list) -> Study:
    parsed = parse_values(param, values)
    if is_agent_param(param):
        _check_agent_param(base, param)

    def setting(value):
        return ("params", {param: value}) if is_agent_param(param) else (param, value)

    rows = tuple(Row(_value_id(param, v), _value_id(param, v), "", (setting(v),))
                 for v in parsed)
    return Study("sweep", base, rows, f"bsjax sweep: {base.agent} over {param}", param)


# --- TOML ---------------------------------------------------------------------------------------

ROW_KEYS = ("id", "label", "layer", "needs_llm", "against")


def _config_fields(table: dict, where: str) -> dict:
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    return table


def load_toml(path: str | Path, overrides: dict | None = None) -> Study:
    """A study from an experiment file; `overrides` (CLI flags) replace its base settings."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"experiment file not found: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: not valid TOML ({str(err).splitlines()[0]})") from None
    meta = data.get("experiment", {})
    kind = meta.get("kind", "paper")
    base_fields = _config_fields(dict(data.get("base", {})), f"{path.name} [base]")
    overrides = dict(overrides or {})
    if isinstance(base_fields.get("params"), dict) and "params" in overrides:  # --set adds
        overrides["params"] = {**base_fields["params"], **overrides["params"]}
    base_fields.update(overrides)
    try:
        base = RunConfig(**base_fields)
    except TypeError as err:
        raise UsageError(f"{path.name}: {err}") from None
    if kind == "sweep":
        sweep = data.get("sweep", {})
        if "param" not in sweep or "values" not in sweep:
            raise UsageError(f"{path.name}: a sweep needs [sweep] param and values")
        study = sweep_study(base, sweep["param"], sweep["values"])
    elif kind == "paper":
        rows = []
        for i, entry in enumerate(data.get("rows", [])):
            entry = dict(entry)
            if "id" not in entry:
                raise UsageError(f"{path.name}: row {i + 1} has no id")
            meta_keys = {k: entry.pop(k) for k in ROW_KEYS if k in entry}
            fields = _config_fields(entry, f"{path.name} row {meta_keys['id']}")
            rows.append(Row(meta_keys["id"], meta_keys.get("label", meta_keys["id"]),
                            meta_keys.get("layer", ""), tuple(fields.items()),
                            bool(meta_keys.get("needs_llm", False)), meta_keys.get("against")))
        if not rows:
            rows = list(paper_study(base).rows)
        ids = [r.id for r in rows]
        if len(set(ids)) != len(ids):
            raise UsageError(f"{path.name}: repeated row ids")
        study = Study("paper", base, tuple(rows), f"bsjax paper ({base.protocol} protocol)")
    else:
        raise UsageError(f"{path.name}: unknown experiment kind {kind!r} (choose from paper, "
                         "sweep)")
    study = dataclasses.replace(study, title=meta.get("title", study.title),
                                baseline=meta.get("baseline"))
    check_baseline(study, f"{path.name}: ")
    return study


# --- running ------------------------------------------------------------------------------------

def check_baseline(study: Study, where: str = "") -> None:
    """The study's baseline and each row's `against`, where named, are other rows of the study.
    Raises UsageError."""
    ids = [row.id for row in study.rows]
    if study.baseline is not None and study.baseline not in ids:
        raise UsageError(f"{where}unknown baseline row {study.baseline!r} "
                         f"(rows: {', '.join(ids)})")
    for row in study.rows:
        if row.against is not None and (row.against not in ids or row.against == row.id):
            raise UsageError(f"{where}row {row.id}: against must name another row "
                             f"(got {row.against!r}; rows: {', '.join(ids)})")


def validate(study: Study) -> None:
    """Check the baseline and every row's config before anything is written. Raises UsageError."""
    check_baseline(study)
    for row in study.active_rows():
        try:
            cfg = row.config(study.base)
            run_config.validate(cfg)
            # A row's own settings must apply to its run (a base setting may serve other rows).
            run_config.check_applies(cfg, [name for name, _ in row.overrides])
        except UsageError as err:
            raise UsageError(f"row {row.id}: {err}") from None
        except TypeError as err:
            raise UsageError(f"row {row.id}: {err}") from None


def prepare(study: Study, out: Path, resume: bool) -> None:
    """Check the study directory (writes nothing)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    study_json = out / "study.json"
    shared = jax.process_count() > 1  # other processes write beside this one
    if study_json.exists():
        if not resume and not shared:
            raise UsageError(f"{out} already holds a study: pass --resume or choose another --out")
        try:
            previous = json.loads(study_json.read_text())
        except json.JSONDecodeError:
            raise UsageError(f"{study_json} is not valid JSON; cannot resume") from None
        if _identity(previous) != _identity(study.to_json()):
            raise UsageError(f"{out} holds a study with a different configuration; cannot resume")
    elif out.exists() and any(p.name != LOCK_NAME for p in out.iterdir()) and not shared:
        raise UsageError(f"{out} exists and is not a bsjax study directory")
    for row in study.active_rows():
        experiment.prepare_out_dir(out / "runs" / row.id, row.config(study.base), resume)


def _identity(study_json: dict) -> dict:
    # Defaults fill fields added since the study was written (as a run's identity does).
    full = {**dataclasses.asdict(RunConfig()), **run_config.LEGACY_FIELDS, **study_json["base"]}
    base = {k: v for k, v in full.items() if k not in run_config.PLACEMENT_FIELDS}
    return {"kind": study_json["kind"], "param": study_json.get("param"), "base": base,
            "rows": study_json["rows"]}


def _write_study_json(study: Study, path: Path) -> None:
    """Write study.json, or on resume bring its baseline up to date: the baseline only shapes the
    report, so a resumed study may change it, and `bsjax report` must then read the new one."""
    if not path.exists():
        write_text_atomic(path, json.dumps(
            dict(study.to_json(), created=datetime.datetime.now().isoformat(timespec="seconds")),
            indent=2))
        return
    previous = json.loads(path.read_text())
    if previous.get("baseline") != study.baseline:
        write_text_atomic(path, json.dumps(dict(previous, baseline=study.baseline), indent=2))


def row_groups(study: Study) -> list[list[Row]]:
    """The active rows in groups that play as one batch of one compiled program: rows whose
    configs differ only in params (`run_config.PARAM_FIELDS`) and call no LLM share a group;
    every other row is a group of its own. Groups keep the order of their first rows."""
    groups: dict[object, list[Row]] = {}
    for row in study.active_rows():
        cfg = row.config(study.base)
        key = (run_config.structure_identity(cfg) if experiment.groupable([cfg])
               else ("alone", row.id))
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def run(study: Study, out: Path, resume: bool = False, progress_factory=None) -> dict:
    """Play every active row into `out/runs/ROW`, rows that differ only in params as one
    batch (`row_groups`); returns {row id: summary}."""
    validate(study)
    prepare(study, out, resume)
    # Process 0 writes the study's own files; every process locks its own run directories.
    lock = (writer_lock(out, command_line()) if jax.process_index() == 0
            else contextlib.nullcontext())
    with lock:
        if jax.process_index() == 0:
            _write_study_json(study, out / "study.json")
        summaries = {}
        for group in row_groups(study):
            label = "+".join(row.id for row in group)
            progress = progress_factory(label) if progress_factory is not None else None
            results = experiment.run_group([row.config(study.base) for row in group],
                                           [out / "runs" / row.id for row in group],
                                           resume=resume, progress=progress)
            summaries.update({row.id: summary for row, summary in zip(group, results)})
    return {row.id: summaries[row.id] for row in study.active_rows()}
