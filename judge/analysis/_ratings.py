"""The run's verdicts as raters of each turn, read from judgment rows (step 1 of agreement).

A rater gives each turn a label, 1 = the predicted turn state is correct and 0 = incorrect:
the judge, each RULE version, and (per slot) the judge's flagged slots. A bad row is named by
file, line and field through :class:`RowsSource`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DataMismatchError
from .._io import iter_jsonl_lines
from ._labels import SlotKey, TurnKey, row_key


@dataclass
class Ratings:
    """The run's verdicts as raters: the judge, each RULE version, and slot-level judge verdicts
    (a slot the judge flags incorrect or missed is 0, every other slot of a judged turn 1)."""

    order: list[TurnKey] = field(default_factory=list)
    judge: dict[TurnKey, int] = field(default_factory=dict)
    rules: dict[str, dict[TurnKey, int]] = field(default_factory=dict)
    flagged: dict[TurnKey, set[str]] = field(default_factory=dict)

    def raters(self) -> dict[str, dict[TurnKey, int]]:
        out: dict[str, dict[TurnKey, int]] = {"judge": self.judge}
        out.update({f"RULE-{v}": labels for v, labels in self.rules.items()})
        return out

    def judge_slot(self, key: SlotKey) -> int | None:
        turn = key[:2]
        if turn not in self.judge:
            return None
        return 0 if key[2] in self.flagged.get(turn, set()) else 1


@dataclass(frozen=True)
class RowsSource:
    """Where judgment rows came from, so a bad row is named by file, line and field."""

    path: str | None = None
    lines: Sequence[int] | None = None

    def error(self, message: str, index: int, field: str) -> DataMismatchError:
        line = self.lines[index] if self.lines is not None and index < len(self.lines) else None
        return DataMismatchError(message, path=self.path, line=line, field=field)


def judgment_rows_source(run_dir: str | Path) -> RowsSource:
    """The file and line of each row of a run's ``judgments.jsonl`` (rows are its non-blank
    lines, in order, as :func:`judge.pipeline.load_run` reads them)."""
    path = Path(run_dir) / "judgments.jsonl"
    return RowsSource(str(path), [line for line, _ in
                                  iter_jsonl_lines(path, max_string=None)])


def _as_label(value: Any, what: str, row: Mapping[str, Any], index: int, field_name: str,
              source: RowsSource) -> int | None:
    """A judgment-row verdict as 0/1; ``None`` (an error row, or no RULE verdict) stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    raise source.error(
        f"{what} of dialogue {row['dialogue_id']!r} turn {row['turn_index']} must be true, "
        f"false or null (got {value!r})", index, field_name)


def read_ratings(rows: Sequence[Mapping[str, Any]],
                 source: RowsSource | None = None) -> Ratings:
    """Step 1: the judge's and every RULE version's label of each turn, in run order."""
    source = source or RowsSource()
    ratings = Ratings()
    seen: dict[TurnKey, int] = {}
    for index, row in enumerate(rows):
        key = row_key(row)
        if key in seen:
            first = seen[key]
            where = (f"line {source.lines[first]}" if source.lines is not None
                     and first < len(source.lines) else f"row {first + 1}")
            raise source.error(f"the run holds dialogue {row['dialogue_id']!r} turn "
                               f"{row['turn_index']} twice (first at {where})", index,
                               "dialogue_id")
        ratings.order.append(key)
        seen[key] = index
        verdict = _as_label(row.get("verdict"), "verdict", row, index, "verdict", source)
        if verdict is not None:
            ratings.judge[key] = verdict
            ratings.flagged[key] = {str(s) for s in [*(row.get("incorrect") or []),
                                                     *(row.get("missed") or [])]}
        for version, value in (row.get("rule") or {}).items():
            label = _as_label(value, f"RULE-{version} verdict", row, index,
                              f"rule.{version}", source)
            rater = ratings.rules.setdefault(str(version), {})
            if label is not None:
                rater[key] = label
    return ratings


