"""The table object of the GILP report: columns with a format kind, rendered to Markdown and CSV.

Markdown prints fractions with 3 decimals, steps and calls with 2, tokens as thousands
(`15.0k`), CIs as `[lo, hi]` and undefined values as `—`; a [rev] (secondary) paper value is
marked †. The CSV holds the raw numbers (a CI as `_lo` / `_hi` columns, a count beside its value
as `_n`, the [rev] paper columns listed in `paper_rev`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from bsjax.gilp import paper_numbers

DASH = "—"
REV_MARK = "†"


@dataclasses.dataclass(frozen=True)
class Column:
    """`key` names the CSV column; `fmt` is f3 / f2 / tok / usd / sec / int / str / ci / paper_*
    (a paper value printed like *) / srn (an (sr, n) pair) / perr (a p_err(k) dict)."""

    key: str
    header: str
    fmt: str = "f3"


@dataclasses.dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    rows: list[dict]
    notes: list[str] = dataclasses.field(default_factory=list)

    def markdown(self) -> str:
        head = [c.header for c in self.columns]
        lines = [f"# {self.title}", "", "| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)]
        for row in self.rows:
            lines.append("| " + " | ".join(_md(row.get(c.key), c.fmt) for c in self.columns)
                         + " |")
        notes = list(self.notes)
        if any(isinstance(row.get(c.key), paper_numbers.Paper) and row[c.key].rev
               for row in self.rows for c in self.columns):
            notes.append(f"{REV_MARK} [rev]: secondary value from the later revision "
                         "(shape checks only).")
        return "\n".join(lines + ([""] + notes if notes else [])) + "\n"

    def csv(self) -> str:
        header = []
        for c in self.columns:
            header += {"ci": [f"{c.key}_lo", f"{c.key}_hi"], "srn": [c.key, f"{c.key}_n"],
                       "perr": [c.key, f"{c.key}_n"]}.get(c.fmt, [c.key])
        has_paper = any(c.fmt.startswith("paper") for c in self.columns)
        header += ["paper_rev"] if has_paper else []
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        for row in self.rows:
            cells = []
            for c in self.columns:
                cells += _csv(row.get(c.key), c.fmt)
            if has_paper:
                cells.append(";".join(c.key for c in self.columns
                                      if isinstance(row.get(c.key), paper_numbers.Paper) and row[c.key].rev))
            writer.writerow(cells)
        return buffer.getvalue()


# Scalar cell formats by column kind.
_SCALAR_FORMATS = {
    "f3": "{:.3f}".format, "f2": "{:.2f}".format, "sec": "{:.2f}".format,
    "tok": lambda value: f"{value / 1000:.1f}k", "usd": "${:.2f}".format,
    "g3": "{:.3g}".format, "pct": "{:+.0f}%".format,
}


def _md(value, fmt: str) -> str:
    if value is None:
        return DASH
    if fmt.startswith("paper"):
        return _md(value.value, fmt.split("_", 1)[1]) + (REV_MARK if value.rev else "")
    if isinstance(value, float) and abs(value) < 5e-4 and fmt != "g3":
        value = 0.0  # no "-0.000" (g3 keeps small MSEs)
    if fmt in _SCALAR_FORMATS:
        return _SCALAR_FORMATS[fmt](value)
    if fmt == "ci":
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    if fmt == "srn":
        sr, n = value
        return f"{DASH} (n=0)" if sr is None else f"{sr:.3f} (n={n})"
    if fmt == "perr":
        return DASH if value["p"] is None else f"{value['p']:.3f}" + ("*" if value["flagged"]
                                                                      else "")
    return str(value)


def _num(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def _csv(value, fmt: str) -> list[str]:
    if fmt == "ci":
        return ["", ""] if value is None else [_num(value[0]), _num(value[1])]
    if fmt == "srn":
        return ["", ""] if value is None else [_num(value[0]), _num(value[1])]
    if fmt == "perr":
        return ["", ""] if value is None else [_num(value["p"]), _num(value["n"])]
    if fmt.startswith("paper"):
        return [_num(None if value is None else value.value)]
    return [_num(value)]


def write_table(table: Table, out_dir: str | Path) -> list[Path]:
    """Writes `NAME.md` and `NAME.csv` into `out_dir`; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, cv = out / f"{table.name}.md", out / f"{table.name}.csv"
    md.write_text(table.markdown())
    cv.write_text(table.csv())
    return [md, cv]
