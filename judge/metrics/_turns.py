"""Per-turn verdicts of the headline exact-match metrics (JGA, slot accuracy, FGA, GCA's
counts) as compact numpy columns: what a leaderboard clusters by dialogue, breaks down by turn
position or domain and writes one row per turn. Their pooled means are the suite's figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..data import DialogueSet, PredictionSet, Schema, State
from ._fga import fga_turn_marks
from ._gca import turn_changes
from ._matching import parse_policy
from ._options import MetricOptions

if TYPE_CHECKING:  # numpy loads when verdicts are computed, not with the metrics stage
    import numpy as np

_CHUNK = 8192
"""Turns per chunk when the total is not known in advance (a streaming reader)."""


@dataclass
class TurnVerdicts:
    """One system against one gold version, turn by turn in the dialogues' order (a few bytes
    per turn, so fifty systems of a large test set fit in memory where their states would
    not)."""

    num_slots: int
    """K of slot accuracy."""
    fga_lambda: float
    """The decay constant of :attr:`fga`."""
    jga: np.ndarray
    """bool: the state matches exactly (under the matching policy)."""
    wrong: np.ndarray
    """int16: slots wrong in the turn (missed, extra or with another value)."""
    fga_mark: np.ndarray
    """int16: -1 exact, 0 a turn-level error, k > 0 an error carried k turns (FGA)."""
    changes: np.ndarray
    """int16, shape (turns, 4): GCA's counts C, W, O, M of the turn."""
    domain_errors: np.ndarray
    """uint8/16/32 (by the schema's domain count): bit d set when a slot of domain d is wrong
    in the turn."""

    @property
    def sa(self) -> np.ndarray:
        """Slot accuracy of each turn, a share in [0, 1] (float64, exact as the suite's)."""
        import numpy as np

        return (self.num_slots - self.wrong.astype(np.float64)) / self.num_slots

    @property
    def fga(self) -> np.ndarray:
        """FGA of each turn, a share in [0, 1]."""
        import numpy as np

        marks = self.fga_mark.astype(np.float64)
        return np.where(marks < 0, 1.0, np.where(marks == 0, 0.0,
                                                 1.0 - np.exp(-self.fga_lambda * marks)))

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.jga, self.wrong, self.fga_mark, self.changes,
                                      self.domain_errors))


class TurnScorer:
    """Scores one system against one gold version a dialogue at a time, appending to growing
    columns: the in-memory path (:func:`turn_verdicts`) and a streaming reader (dialogues and
    predictions read in step, never a whole file) share it."""

    def __init__(self, schema: Schema, options: MetricOptions, *, fga_lambda: float,
                 expected_turns: int = 0) -> None:
        import numpy as np

        self.schema = schema
        self.options = options
        self.fga_lambda = fga_lambda
        self.num_slots = options.num_slots or len(schema.slot_names)
        self.policy = parse_policy(options.match, time_slots=schema.time_slots,
                                   separator=schema.multi_value_separator)
        self.nones = frozenset(options.none_values)
        self.none = options.none_values[0] if options.none_values else "none"
        self.bit_of_domain = {d.domain: 1 << i for i, d in enumerate(schema.domains[:32])}
        self.bits: dict[str, int] = {}
        self.domain_dtype = (np.uint8 if len(self.bit_of_domain) <= 8 else
                             np.uint16 if len(self.bit_of_domain) <= 16 else np.uint32)
        self.chunk = expected_turns or _CHUNK
        self._full: list[tuple[np.ndarray, ...]] = []
        self._columns = self._new_chunk()
        self._used = 0
        self.rows = 0

    def _new_chunk(self, size: int | None = None) -> tuple[np.ndarray, ...]:
        import numpy as np

        size = self.chunk if size is None else size
        return (np.zeros(size, bool), np.zeros(size, np.int16), np.zeros(size, np.int16),
                np.zeros((size, 4), np.int16), np.zeros(size, self.domain_dtype))

    def add(self, gold_states: Sequence[State], pred_states: Sequence[State]) -> None:
        """Score one dialogue's turns (gold and predicted cumulative states, in order)."""
        options, policy = self.options, self.policy
        gold, predicted = policy.prepare(gold_states, pred_states, none_values=self.nones)
        if options.keep_explicit_none:
            gca_gold, gca_pred = policy.prepare(gold_states, pred_states,
                                                none_values=self.nones, keep_none=True)
        else:
            gca_gold, gca_pred = gold, predicted
        marks = fga_turn_marks(gold, predicted)
        changes = turn_changes(gca_gold, gca_pred, dedupe=options.gca_dedupe, none=self.none)
        bits, bit_of_domain, domain_of = self.bits, self.bit_of_domain, self.schema.domain_of
        for g, p, mark, counts in zip(gold, predicted, marks, changes, strict=True):
            if self._used == len(self._columns[0]):  # fixed-size chunks, no doubling
                self._full.append(self._columns)
                self._columns = self._new_chunk()
                self._used = 0
            jga, wrong_count, fga_mark, counts_of, domain_errors = self._columns
            row = self._used
            wrong = [s for s, v in g.items() if p.get(s) != v]
            wrong.extend(s for s in p if s not in g)
            mask = 0
            for slot in wrong:
                bit = bits.get(slot)
                if bit is None:
                    bit = bits[slot] = bit_of_domain.get(domain_of(slot), 0)
                mask |= bit
            jga[row] = not wrong
            wrong_count[row] = len(wrong)
            fga_mark[row] = mark
            counts_of[row] = (counts.C, counts.W, counts.O, counts.M)
            domain_errors[row] = mask
            self._used += 1
        self.rows += len(gold)

    def finish(self) -> TurnVerdicts:
        """The columns, trimmed to the turns scored (the scorer's chunks are let go)."""
        import numpy as np

        parts = [*self._full, tuple(c[: self._used] for c in self._columns)]
        self._full, self._columns, self._used = [], self._new_chunk(0), 0
        jga, wrong, fga_mark, changes, domain_errors = (
            np.concatenate([part[k] for part in parts]) for k in range(5))
        return TurnVerdicts(self.num_slots, self.fga_lambda, jga, wrong, fga_mark, changes,
                            domain_errors)


def turn_verdicts(dialogues: DialogueSet, predictions: PredictionSet, schema: Schema, *,
                  version: str, options: MetricOptions, fga_lambda: float) -> TurnVerdicts:
    """Score ``predictions`` turn by turn against gold ``version`` with the suite's options."""
    scorer = TurnScorer(schema, options, fga_lambda=fga_lambda,
                        expected_turns=dialogues.num_turns)
    for dialogue in dialogues.dialogues:
        pred = predictions.for_dialogue(dialogue)
        scorer.add([t.gold_states[version] for t in dialogue.turns],
                   [t.pred_state or {} for t in pred.turns])
    return scorer.finish()


def gca_from_counts(counts: np.ndarray, *, alpha: float = 10 / 11,
                    undefined: str = "zero") -> np.ndarray:
    """GCA (a share, not points) from pooled counts ``[..., 4]`` (C, W, O, M), vectorised:
    the same weighted harmonic mean as :func:`gca_score`, for many totals at once (the
    leave-one-dialogue-out totals of a jackknife)."""
    import numpy as np

    c, w, o, m = (counts[..., k].astype(np.float64) for k in range(4))
    n_pred, n_gold = c + w + o, c + w + m
    squares = n_pred**2 + n_gold**2
    with np.errstate(divide="ignore", invalid="ignore"):
        harmonic = (n_pred + n_gold) / (alpha * squares / c + (1 - alpha) * squares / (c + w))
    value = np.where(c > 0, harmonic, 0.0)
    empty = (n_pred == 0) | (n_gold == 0)
    return np.where(empty, np.nan if undefined == "null" else 0.0, value)
