"""Records of the bench (a figure beside its limit, and its target) and the printed table."""

from __future__ import annotations

import re
from dataclasses import dataclass


# ------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Target:
    """A project target: ``value`` or ``ratio`` compared with ``bound``; ``text`` for the table."""

    text: str
    on: str  # "value" or "ratio"
    op: str  # "<=" or ">="
    bound: float

    def met(self, rec: Record) -> bool:
        x = rec.ratio if self.on == "ratio" else rec.value
        return x <= self.bound if self.op == "<=" else x >= self.bound


@dataclass
class Record:
    """One row: a figure of npuemu and the limit it is compared with."""

    name: str
    value: float
    unit: str
    limit_name: str
    limit_value: float
    target: Target | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.limit_value

    def public(self) -> dict:
        """The ``--json`` record."""
        return {"name": self.name, "value": self.value, "unit": self.unit,
                "limit_name": self.limit_name, "limit_value": self.limit_value,
                "ratio": self.ratio}

    @classmethod
    def load(cls, d: dict) -> Record:
        target = Target(**d["target"]) if d.get("target") else None
        return cls(**{**d, "target": target})



def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 10000:
        return f"{v:,.0f}".replace(",", " ")
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


_CELL = re.compile(r"(?P<label>.+) (?P<row>\d+)->(?P<col>\d+)")
"""Records named ``<label> <i>-><j>`` are cells of a matrix (row i, column j)."""


def format_table(records: list[Record]) -> str:
    """The table: figure, value, unit, limit (same run), its value, ratio, target: met?
    Matrix cells (``P2P 16 MiB 0->1``...) are printed as a matrix below the rows."""
    head = ["figure", "value", "unit", "limit (same run)", "limit", "ratio", "target: met?"]
    plain = [r for r in records if not _CELL.fullmatch(r.name)]
    rows = [[r.name, _fmt(r.value), r.unit, r.limit_name, _fmt(r.limit_value),
             f"{r.ratio:.3g}x",
             f"{r.target.text}: {'yes' if r.target.met(r) else 'NO'}" if r.target else "-"]
            for r in plain]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    right = {1, 4, 5}

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *(line(r) for r in rows), *format_matrices(records)])


def format_matrices(records: list[Record]) -> list[str]:
    """Each group of matrix cells as a block: values by row and column, then the limit and
    the range of ratios (the cells of one matrix share their limit)."""
    groups: dict[str, dict[tuple[int, int], Record]] = {}
    for r in records:
        m = _CELL.fullmatch(r.name)
        if m:
            groups.setdefault(m["label"], {})[int(m["row"]), int(m["col"])] = r
    lines = []
    for label, cells in groups.items():
        rows = sorted({i for i, _ in cells})
        cols = sorted({j for _, j in cells})
        first = next(iter(cells.values()))
        ratios = [r.ratio for r in cells.values()]
        table = [["", *(f"->{j}" for j in cols)]]
        table += [[f"{i}->", *(_fmt(cells[i, j].value) if (i, j) in cells else "-"
                                for j in cols)] for i in rows]
        width = max(len(c) for row in table for c in row)
        lines += ["", f"{label} i->j, {first.unit} (row: source card i, whose DMA engine "
                      "copies; column: destination card j)"]
        lines += ["  " + "  ".join(c.rjust(width) for c in row) for row in table]
        lines.append(f"  limit (same run): {first.limit_name} {_fmt(first.limit_value)} "
                     f"{first.unit}; ratio {min(ratios):.3g}x .. {max(ratios):.3g}x")
    return lines
