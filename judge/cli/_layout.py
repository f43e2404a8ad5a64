"""Tables that fit the terminal without cutting what matters.

rich shrinks every column of a table wider than the terminal, so at 80 columns a figure broke
over two lines (``50.0`` / ``0``) and names and ids lost their ends (``tok_de80…``), which
``revoke`` then could not use. A :class:`FitTable` decides its layout when it is printed, from
the width it is given:

1. the boxed table, every cell on one line, when it fits;
2. the same with headers and free-text cells wrapped at spaces;
3. a compact table (no borders) like 2;
4. the compact table cut into parts of a few columns each, one under the other, every part
   repeating the first column (the row's name), each part laid out as in 2 or 3;
5. otherwise one block per row, ``column  value`` on a line each.

No word is ever broken inside (a header once read ``gol`` / ``d``). Columns marked ``whole``
(figures, ids, dates, names) are never wrapped or cut in 1–4; only in 5, when a single value
is wider than the whole terminal, is it folded onto the next line, never shortened.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .._io import printable

Justify = Literal["left", "right"]


def cell_text(value: Any) -> str:
    """A value as shown in a table: figures to two decimals, none as a dash, and only
    printable characters (data never moves the cursor or rings the bell)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return printable(f"{value:.2f}")
    return printable(str(value))


def inert(value: Any) -> Text:
    """Text never read as markup."""
    return Text(cell_text(value))


@dataclass(frozen=True)
class Field:
    """One column: its header, alignment and whether its cells must stay on one line."""

    header: str
    justify: Justify = "left"
    whole: bool = True


def _longest_word(value: str) -> int:
    return max((cell_len(word) for word in value.split()), default=0)


def _longest_line(value: str) -> int:
    return max((cell_len(line) for line in value.splitlines()), default=0)


class FitTable:
    """A table that picks the layout that fits (see the module's docstring)."""

    def __init__(self, fields: Sequence[Field | str], *, title: str | None = None) -> None:
        self.fields = [f if isinstance(f, Field) else Field(f) for f in fields]
        self.title = title
        self.rows: list[list[str]] = []

    def add_row(self, *cells: Any) -> None:
        if len(cells) != len(self.fields):
            raise ValueError(f"{len(cells)} cells for {len(self.fields)} columns")
        self.rows.append([cell_text(cell) for cell in cells])

    # -- widths ------------------------------------------------------------------------
    def _natural(self) -> list[int]:
        return [max([_longest_line(f.header), *(_longest_line(r[i]) for r in self.rows)])
                for i, f in enumerate(self.fields)]

    def _needed(self, *, break_headers: bool) -> list[int]:
        out = []
        for i, f in enumerate(self.fields):
            cells = [(_longest_line if f.whole else _longest_word)(r[i]) for r in self.rows]
            header = 1 if break_headers else _longest_word(f.header)
            out.append(max([1, header, *cells]))
        return out

    def _frame(self, style: str) -> Table:
        compact = style == "compact"
        return Table(title=inert(self.title) if self.title else None, title_justify="left",
                     box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
                     show_edge=not compact, pad_edge=not compact,
                     padding=(0, 0) if compact else (0, 1))

    def _table(self, style: str, widths: Sequence[int] | None) -> Table:
        """With ``widths`` (each at least the longest line of a whole column's cells) only
        headers and free text wrap; without, nothing does."""
        table = self._frame(style)
        for i, f in enumerate(self.fields):
            table.add_column(inert(f.header), justify=f.justify, overflow="fold",
                             width=None if widths is None else widths[i],
                             no_wrap=widths is None)
        for row in self.rows:
            table.add_row(*(Text(cell) for cell in row))
        return table

    def _overhead(self, console: Console, options: ConsoleOptions, style: str) -> int:
        """Borders and padding of ``style``: the table's width less its columns'."""
        probe = self._frame(style)
        for _ in self.fields:
            probe.add_column(width=1)
        wide = options.update_width(10_000)
        return Measurement.get(console, wide, probe).maximum - len(self.fields)

    def _fitting(self, console: Console, options: ConsoleOptions) -> Table | None:
        """The first of layouts 1–3 that fits ``options.max_width``, if any."""
        width = options.max_width
        natural = self._natural()
        for style, wrap in (("boxed", False), ("boxed", True), ("compact", True)):
            room = width - self._overhead(console, options, style)
            if not wrap:
                if sum(natural) <= room:
                    return self._table(style, None)
                continue
            needed = self._needed(break_headers=False)
            if sum(needed) <= room:
                return self._table(style, _fill(needed, natural, room))
        return None

    def _part(self, columns: Sequence[int], title: str | None) -> FitTable:
        part = FitTable([self.fields[i] for i in columns], title=title)
        part.rows = [[row[i] for i in columns] for row in self.rows]
        return part

    def _key(self) -> int:
        """How many leading columns name a row: the left-aligned ones (system, gold, slot),
        at least one."""
        count = 0
        while count < len(self.fields) - 1 and self.fields[count].justify == "left":
            count += 1
        return max(1, count)

    def _parts(self, console: Console, options: ConsoleOptions, key: int
               ) -> list[Table] | None:
        """Layout 4: the columns after the ``key`` columns in as few consecutive groups as
        fit, each part repeating the key columns; None when one column does not fit."""
        parts: list[Table] = []
        rest = list(range(key, len(self.fields)))
        title = self.title
        while rest:
            fitted = None
            for count in range(len(rest), 0, -1):
                fitted = self._part([*range(key), *rest[:count]], title)._fitting(console,
                                                                                 options)
                if fitted is not None:
                    break
            if fitted is None:
                return None
            parts.append(fitted)
            rest = rest[count:]
            title = None
        return parts if len(parts) > 1 else None

    def layout(self, console: Console, options: ConsoleOptions) -> RenderableType:
        """The first layout of the module's list that fits ``options.max_width``."""
        whole = self._fitting(console, options)
        if whole is not None:
            return whole
        for key in dict.fromkeys((self._key(), 1)):
            if len(self.fields) - key < 2:
                continue
            parts = self._parts(console, options, key)
            if parts is not None:
                return Group(*(item for n, part in enumerate(parts)
                               for item in ((Text(""), part) if n else (part,))))
        return self._vertical(options.max_width)

    def _vertical(self, width: int) -> Table:
        table = Table(title=inert(self.title) if self.title else None, title_justify="left",
                      show_header=False, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                      padding=(0, 1))
        label = min(max(cell_len(f.header) for f in self.fields), max(8, width // 3))
        table.add_column(width=label, overflow="fold", style="bold")
        table.add_column(overflow="fold", width=max(1, width - label - 3))
        for n, row in enumerate(self.rows):
            for i, (f, cell) in enumerate(zip(self.fields, row, strict=True)):
                table.add_row(Text(f.header), Text(cell),
                              end_section=i == len(row) - 1 and n < len(self.rows) - 1)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.layout(console, options)


def _fill(needed: list[int], natural: list[int], room: int) -> list[int]:
    """Column widths from each column's minimum up towards its natural width, the spare room
    going one cell at a time to the column furthest from its natural width."""
    widths = list(needed)
    spare = room - sum(widths)
    while spare > 0:
        gaps = [n - w for n, w in zip(natural, widths, strict=True)]
        best = max(range(len(widths)), key=lambda i: gaps[i])
        if gaps[best] <= 0:
            break
        widths[best] += 1
        spare -= 1
    return widths


def fit_table(fields: Sequence[Field | str], rows: Iterable[Sequence[Any]] = (), *,
              title: str | None = None) -> FitTable:
    table = FitTable(fields, title=title)
    for row in rows:
        table.add_row(*row)
    return table
