"""Agreement between the judge, the exact-match RULE verdicts and human labels.

Every rater gives each turn a label, 1 = the predicted turn state is correct and 0 = incorrect.
Point estimates come from scikit-learn. Confidence intervals come from a percentile bootstrap
that resamples *dialogues*, because the turns of one dialogue share a context and a cumulative
state, so they are not independent draws (METHOD.md §6). A statistic that is undefined on the
data (say kappa when both raters give every turn the same label) is ``None``, never NaN.
"""

from __future__ import annotations

import itertools
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_recall_fscore_support

from .._errors import DataMismatchError, InputError, OptionError
from .._io import iter_jsonl_lines, parse_line
from ..data import dialogue_key

TurnKey = tuple[str, int]
"""A turn as ``(dialogue_key(dialogue_id), turn_index)``, so id spellings do not matter."""

LABEL_NAMES: tuple[str, str] = ("incorrect", "correct")
"""Label order of every confusion matrix: index 0 = incorrect, 1 = correct."""

UNNAMED = "(unnamed)"
"""How labels without an ``annotator`` are shown: together they are one annotator."""

STATISTICS: tuple[str, ...] = ("accuracy", "kappa", "precision", "recall", "f1")

_CHUNK = 256  # bootstrap replicates drawn at once, to bound memory on large data sets
_MAX_EXAMPLES = 20

REEVALUATION_ASSUMPTION = (
    "Humans labelled only the turns where the judge and RULE-{version} disagree. Turns where "
    "they agree are counted as correct judgments without human review; disagreeing turns count "
    "as correct only when the human label equals the judge verdict, and disagreeing turns "
    "without a (majority) human label count as not matching."
)


# --------------------------------------------------------------------------- human labels


def _zero_or_one(value: int) -> int:
    if value not in (0, 1):
        raise ValueError("label must be 0 (incorrect) or 1 (correct)")
    return value


class HumanLabel(BaseModel):
    """One person's verdict on one predicted turn state (one line of a labels file).

    Strict types and no extra fields: a hand-made file with ``"label": true`` or a misspelt
    ``"annotater"`` is more likely a mistake than an intent, so it is rejected, not guessed.
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    dialogue_id: str = Field(min_length=1)
    turn_index: int = Field(ge=0)
    label: Annotated[StrictInt, AfterValidator(_zero_or_one)]
    annotator: str | None = Field(default=None, min_length=1)
    note: str | None = None

    @property
    def key(self) -> TurnKey:
        return (dialogue_key(self.dialogue_id), self.turn_index)

    @property
    def annotator_name(self) -> str:
        return self.annotator if self.annotator is not None else UNNAMED


@dataclass
class HumanLabels:
    """The labels of one file, checked so that no annotator labels one turn twice."""

    records: list[HumanLabel]
    path: str | None = None
    lines: list[int] | None = field(default=None, repr=False)
    """1-based line of each record, when the labels were read from a file."""

    def __post_init__(self) -> None:
        if self.lines is not None and len(self.lines) != len(self.records):
            raise ValueError("lines must give one line number per record")
        seen: dict[tuple[str | None, TurnKey], int] = {}
        for index, record in enumerate(self.records):
            slot = (record.annotator, record.key)
            if slot in seen:
                first = seen[slot]
                where = f"line {self.lines[first]}" if self.lines else f"record {first + 1}"
                who = (f"annotator {record.annotator!r}" if record.annotator is not None
                       else "a label without annotator (name the annotators to give one turn "
                            "several labels)")
                raise InputError(
                    f"{who} already labelled dialogue {record.dialogue_id!r} turn "
                    f"{record.turn_index} ({where})",
                    path=self.path, line=self.line_of(index), field="annotator")
            seen[slot] = index

    def line_of(self, index: int) -> int | None:
        """The file line of record ``index``, for messages that point the user at it."""
        return self.lines[index] if self.lines else None

    @property
    def annotators(self) -> tuple[str, ...]:
        """Annotator names in order of first appearance (unlabelled ones as ``UNNAMED``)."""
        return tuple(dict.fromkeys(r.annotator_name for r in self.records))

    def by_annotator(self) -> dict[str, dict[TurnKey, int]]:
        """Each annotator's labels by turn (an annotator labels a turn at most once)."""
        out: dict[str, dict[TurnKey, int]] = {name: {} for name in self.annotators}
        for record in self.records:
            out[record.annotator_name][record.key] = record.label
        return out

    def _votes(self) -> dict[TurnKey, Counter[int]]:
        votes: dict[TurnKey, Counter[int]] = {}
        for record in self.records:
            votes.setdefault(record.key, Counter())[record.label] += 1
        return votes

    def per_turn(self) -> dict[TurnKey, int]:
        """The majority label of every turn; tied turns are left out (see ``tied_turns``)."""
        return {key: int(votes[1] > votes[0]) for key, votes in self._votes().items()
                if votes[1] != votes[0]}

    def tied_turns(self) -> list[TurnKey]:
        """Turns whose annotators split evenly, so they have no majority label."""
        return [key for key, votes in self._votes().items() if votes[1] == votes[0]]

    def _unknown_indices(self, rows: Iterable[Mapping[str, Any]]) -> list[int]:
        known = {_row_key(row) for row in rows}
        return [i for i, record in enumerate(self.records) if record.key not in known]

    def unknown_turns(self, rows: Iterable[Mapping[str, Any]]) -> list[HumanLabel]:
        """Labels naming a turn the run does not hold; reported, because a labels file made
        for a larger (or different) run is a common and harmless mismatch."""
        return [self.records[i] for i in self._unknown_indices(rows)]


def load_labels(path: str | Path) -> HumanLabels:
    """Read and validate a human labels file (JSON Lines, plain or gzipped).

    Raises :class:`InputError` naming file, line and field at the first problem.
    """
    records: list[HumanLabel] = []
    lines: list[int] = []
    for line, text in iter_jsonl_lines(path):
        records.append(parse_line(HumanLabel, text, path=path, line=line))
        lines.append(line)
    if not records:
        raise InputError("no labels in file", path=path)
    return HumanLabels(records, path=str(path), lines=lines)


# --------------------------------------------------------------------------- statistics


def _row_key(row: Mapping[str, Any]) -> TurnKey:
    return (dialogue_key(str(row["dialogue_id"])), int(row["turn_index"]))


def _as_label(value: Any, what: str, row: Mapping[str, Any]) -> int | None:
    """A judgment-row verdict as 0/1; ``None`` (an error row, or no RULE verdict) stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    raise DataMismatchError(
        f"{what} of dialogue {row['dialogue_id']!r} turn {row['turn_index']} must be true, "
        f"false or null (got {value!r})")


def _optional(value: float) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def resample_dialogues(n_dialogues: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each dialogue is drawn in each bootstrap replicate, shape (n_boot, n_dialogues).

    Each replicate draws ``n_dialogues`` dialogues with replacement; every turn of a drawn
    dialogue comes along, which is what a weight per dialogue expresses.
    """
    draws = rng.integers(0, n_dialogues, size=(n_boot, n_dialogues))
    counts = np.zeros((n_boot, n_dialogues), dtype=np.int64)
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1)
    return counts


def _bootstrap(per_dialogue: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Sums of per-dialogue count vectors (D, k) over ``n_boot`` dialogue resamples: (n_boot, k)."""
    n_dialogues = per_dialogue.shape[0]
    out = np.zeros((n_boot, per_dialogue.shape[1]), dtype=np.int64)
    for start in range(0, n_boot, _CHUNK):
        stop = min(n_boot, start + _CHUNK)
        out[start:stop] = resample_dialogues(n_dialogues, stop - start, rng) @ per_dialogue
    return out


def _rng(seed: int, name: str) -> np.random.Generator:
    """A generator per comparison, so adding a rater does not change another pair's interval."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def statistics_from_counts(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, kappa and incorrect-class precision/recall/F1 from confusion counts.

    ``counts[..., :]`` is ``[c00, c01, c10, c11]`` where ``cXY`` counts turns rater a labelled
    X and rater b labelled Y (0 = incorrect). Vectorised so that thousands of bootstrap
    replicates cost one pass; undefined values come out as NaN. Percentages are ×100.
    """
    c = np.asarray(counts, dtype=float)
    c00, c01, c10, c11 = (c[..., i] for i in range(4))
    n = c00 + c01 + c10 + c11
    agree = c00 + c11
    # kappa = (po - pe) / (1 - pe), both sides multiplied by n² to stay in whole numbers
    chance = (c00 + c01) * (c00 + c10) + (c10 + c11) * (c01 + c11)

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    return {
        "accuracy": 100.0 * ratio(agree, n),
        "kappa": ratio(n * agree - chance, n * n - chance),
        "precision": 100.0 * ratio(c00, c00 + c01),
        "recall": 100.0 * ratio(c00, c00 + c10),
        "f1": 100.0 * ratio(2 * c00, 2 * c00 + c01 + c10),
    }


def _kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Cohen's kappa, or None when chance agreement is 1 (both raters constant, same label)."""
    if not a or (len(set(a)) == 1 and set(a) == set(b)):
        return None
    return _optional(cohen_kappa_score(list(a), list(b), labels=[0, 1]))


def _percentile_ci(replicates: np.ndarray, confidence: float) -> list[float] | None:
    """Percentile interval over the replicates where the statistic is defined."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return [float(low), float(high)]


def _compare(name_a: str, labels_a: Mapping[TurnKey, int], name_b: str,
             labels_b: Mapping[TurnKey, int], order: Sequence[TurnKey], *, n_boot: int,
             seed: int, confidence: float) -> dict[str, Any]:
    """Every statistic of one rater pair, over the turns both labelled; b is the reference."""
    keys = [k for k in order if k in labels_a and k in labels_b]
    a = [labels_a[k] for k in keys]
    b = [labels_b[k] for k in keys]
    dialogues = list(dict.fromkeys(k[0] for k in keys))
    entry: dict[str, Any] = {
        "name": f"{name_a} vs {name_b}", "a": name_a, "b": name_b, "reference": name_b,
        "n": len(keys), "dialogues": len(dialogues),
    }
    if keys:
        matrix = confusion_matrix(a, b, labels=[0, 1])
        precision, recall, f1, _ = precision_recall_fscore_support(
            b, a, labels=[0], zero_division=np.nan)
        points: dict[str, float | None] = {
            "accuracy": 100.0 * sum(x == y for x, y in zip(a, b, strict=True)) / len(keys),
            "kappa": _kappa(a, b),
            "precision": _optional(100.0 * precision[0]),
            "recall": _optional(100.0 * recall[0]),
            "f1": _optional(100.0 * f1[0]),
        }
    else:
        matrix = np.zeros((2, 2), dtype=np.int64)
        points = dict.fromkeys(STATISTICS)
    intervals: dict[str, list[float] | None] = dict.fromkeys(STATISTICS)
    if keys and n_boot > 0:
        index = {d: i for i, d in enumerate(dialogues)}
        per_dialogue = np.zeros((len(dialogues), 4), dtype=np.int64)
        for k, x, y in zip(keys, a, b, strict=True):
            per_dialogue[index[k[0]], 2 * x + y] += 1
        replicates = statistics_from_counts(
            _bootstrap(per_dialogue, n_boot, _rng(seed, entry["name"])))
        intervals = {s: _percentile_ci(replicates[s], confidence) for s in STATISTICS}
    for statistic in STATISTICS:
        entry[statistic] = {"value": points[statistic], "ci": intervals[statistic]}
    entry["confusion"] = {"rows": name_a, "columns": name_b, "labels": list(LABEL_NAMES),
                          "matrix": [[int(v) for v in row] for row in matrix]}
    return entry


def _inter_annotator(human: HumanLabels) -> dict[str, Any] | None:
    """Pairwise kappa and percent agreement of the annotators, over all labels in the file."""
    if len(human.annotators) < 2:
        return None
    labels = human.by_annotator()
    pairs = []
    for x, y in itertools.combinations(human.annotators, 2):
        both = [k for k in labels[x] if k in labels[y]]
        a = [labels[x][k] for k in both]
        b = [labels[y][k] for k in both]
        pairs.append({
            "a": x, "b": y, "n": len(both),
            "agreement": (100.0 * sum(p == q for p, q in zip(a, b, strict=True)) / len(both)
                          if both else None),
            "kappa": _kappa(a, b),
        })
    kappas = [p["kappa"] for p in pairs if p["kappa"] is not None]
    agreements = [p["agreement"] for p in pairs if p["agreement"] is not None]
    return {
        "scope": "all labels in the file, including turns the run does not hold",
        "pairs": pairs,
        "mean_kappa": float(np.mean(kappas)) if kappas else None,
        "mean_agreement": float(np.mean(agreements)) if agreements else None,
    }


def _reevaluation(version: str, judge: Mapping[TurnKey, int], rule: Mapping[TurnKey, int],
                  human: Mapping[TurnKey, int], tied: set[TurnKey], order: Sequence[TurnKey],
                  *, n_boot: int, seed: int, confidence: float) -> dict[str, Any]:
    """The paper's "accuracy after human re-evaluation" of the judge against one RULE version."""
    keys = [k for k in order if k in judge and k in rule]
    agreeing = [k for k in keys if judge[k] == rule[k]]
    disagreeing = [k for k in keys if judge[k] != rule[k]]
    labelled = [k for k in disagreeing if k in human]
    matches = [k for k in labelled if human[k] == judge[k]]
    hits = set(agreeing) | set(matches)
    entry: dict[str, Any] = {
        "name": f"judge vs RULE-{version}", "version": version, "rule": f"RULE-{version}",
        "turns": len(keys), "agreeing": len(agreeing), "disagreeing": len(disagreeing),
        "disagreeing_labelled": len(labelled),
        "disagreeing_unlabelled": len(disagreeing) - len(labelled),
        "disagreeing_tied": sum(k in tied for k in disagreeing),
        "human_matches_judge": len(matches),
        "human_matches_rule": len(labelled) - len(matches),
        "agreeing_labelled": sum(k in human for k in agreeing),
        "agreeing_contradicted": sum(k in human and human[k] != judge[k] for k in agreeing),
        "accuracy": {"value": 100.0 * len(hits) / len(keys) if keys else None, "ci": None},
        "assumption": REEVALUATION_ASSUMPTION.format(version=version),
    }
    if keys and n_boot > 0:
        dialogues = list(dict.fromkeys(k[0] for k in keys))
        index = {d: i for i, d in enumerate(dialogues)}
        per_dialogue = np.zeros((len(dialogues), 2), dtype=np.int64)
        for k in keys:
            per_dialogue[index[k[0]], 0] += k in hits
            per_dialogue[index[k[0]], 1] += 1
        sums = _bootstrap(per_dialogue, n_boot, _rng(seed, f"reevaluation {version}"))
        entry["accuracy"]["ci"] = _percentile_ci(100.0 * sums[:, 0] / sums[:, 1], confidence)
    return entry


def agreement_report(rows: list[dict[str, Any]], human: HumanLabels | None = None, *,
                     n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
                     ) -> dict[str, Any]:
    """Agreement of every pair of raters (judge, each RULE version, humans) on a judge run.

    ``rows`` are the lines of ``judgments.jsonl``. In each pair ``(a, b)`` the later rater is
    the reference for precision, recall and F1 of the "incorrect" class (order: judge, RULE
    versions as they appear, human). With human labels the report also holds the annotators'
    agreement and the paper's accuracy after human re-evaluation.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise OptionError(f"n_boot must be a whole number >= 0 (got {n_boot!r})")
    if not 0.0 < confidence < 1.0:
        raise OptionError(f"confidence must lie strictly between 0 and 1 (got {confidence!r})")
    order: list[TurnKey] = []
    seen: set[TurnKey] = set()
    judge: dict[TurnKey, int] = {}
    rules: dict[str, dict[TurnKey, int]] = {}
    for row in rows:
        key = _row_key(row)
        if key in seen:
            raise DataMismatchError(
                f"the run holds dialogue {row['dialogue_id']!r} turn {row['turn_index']} twice")
        order.append(key)
        seen.add(key)
        verdict = _as_label(row.get("verdict"), "verdict", row)
        if verdict is not None:
            judge[key] = verdict
        for version, value in (row.get("rule") or {}).items():
            label = _as_label(value, f"RULE-{version} verdict", row)
            rater = rules.setdefault(str(version), {})
            if label is not None:
                rater[key] = label
    raters: dict[str, dict[TurnKey, int]] = {"judge": judge}
    raters.update({f"RULE-{v}": labels for v, labels in rules.items()})
    human_block: dict[str, Any] | None = None
    reevaluation: list[dict[str, Any]] | None = None
    if human is not None:
        majority = {k: v for k, v in human.per_turn().items() if k in seen}
        tied = set(human.tied_turns())
        unknown = human._unknown_indices(rows)
        raters["human"] = majority
        human_block = {
            "path": human.path, "labels": len(human.records),
            "annotators": list(human.annotators),
            "turns": len(majority), "tied_turns": len(tied & seen),
            "unknown": {"count": len(unknown), "examples": [
                {"line": human.line_of(i), "dialogue_id": human.records[i].dialogue_id,
                 "turn_index": human.records[i].turn_index,
                 "annotator": human.records[i].annotator_name}
                for i in unknown[:_MAX_EXAMPLES]]},
            "inter_annotator": _inter_annotator(human),
        }
        reevaluation = [
            _reevaluation(v, judge, labels, majority, tied, order, n_boot=n_boot, seed=seed,
                          confidence=confidence)
            for v, labels in rules.items()]
    names = list(raters)
    pairs = [_compare(x, raters[x], y, raters[y], order, n_boot=n_boot, seed=seed,
                      confidence=confidence) for x, y in itertools.combinations(names, 2)]
    return {
        "raters": names,
        "labels": list(LABEL_NAMES),
        "dialogues": len(dict.fromkeys(k[0] for k in order)),
        "turns": len(order),
        "judged_turns": len(judge),
        "error_turns": len(order) - len(judge),
        "pairs": pairs,
        "human": human_block,
        "reevaluation": reevaluation,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "confidence": confidence,
                      "unit": "dialogue", "method": "percentile"},
    }


# --------------------------------------------------------------------------- display


AGREEMENT_HEADER: tuple[str, ...] = (
    "pair (a vs reference)", "n", "accuracy % [CI]", "kappa [CI]", "F1 incorrect % [CI]")
REEVALUATION_HEADER: tuple[str, ...] = (
    "judge vs", "turns", "agree", "disagree", "no human label",
    "accuracy after re-evaluation % [CI]")


def _cell(figure: Mapping[str, Any], digits: int) -> str:
    value, ci = figure["value"], figure["ci"]
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    if ci is not None:
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return text


def format_agreement(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One table row per rater pair, in the order of ``AGREEMENT_HEADER``."""
    return [(p["name"], str(p["n"]), _cell(p["accuracy"], 1), _cell(p["kappa"], 3),
             _cell(p["f1"], 1)) for p in report["pairs"]]


def format_reevaluation(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One table row per RULE version for the paper's re-evaluation figure (none without
    human labels), in the order of ``REEVALUATION_HEADER``."""
    return [(e["rule"], str(e["turns"]), str(e["agreeing"]), str(e["disagreeing"]),
             str(e["disagreeing_unlabelled"]), _cell(e["accuracy"], 1))
            for e in report.get("reevaluation") or []]
