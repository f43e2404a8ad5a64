"""A sample file trusted only as far as it can be drawn again from the run it names.

Every consumer of a sample (agreement, estimates, planning, comparisons, the leaderboard's
labelled figures) calls :func:`check_sample`, which draws the sample again with the design its
file records and refuses a file whose turns, strata or weights differ, naming the first line
that differs and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import DataMismatchError, OptionError
from ._labels import row_key
from ._sampling import (
    Sample,
    SampledTurn,
    Strata,
    design_strata,
    draw_sample,
    run_turns_digest,
)

_DESIGN_FIELDS = ("stratum", "judge", "rule", "domain", "stratum_size", "stratum_sample",
                  "population", "weight")
"""What a redrawn turn must agree on with the file's line (weights compared to rounding)."""


def _short(digest: str) -> str:
    return f"{digest[:12]}…"


def _drawn_by(first: SampledTurn, n: int) -> str:
    gold = f", gold {first.gold}" if first.gold else ""
    return (f"design {first.design} ({first.unit}s, {first.allocation} allocation{gold}), "
            f"n {n}, seed {first.seed}, procedure {first.procedure}")


def check_sample(sample: Sample, rows: Sequence[Mapping[str, Any]], *,
                 predictions_sha256: str | None = None) -> str:
    """Draw the sample again from ``rows`` with the design its file records, and refuse it
    (:class:`DataMismatchError` naming the first line that differs and why) unless the same
    units come out, in the same strata with the same weights. ``predictions_sha256`` (the
    predictions file the run judged, when known) must match the one the file records.

    A file of an older release (no ``n``, no digests) is drawn again with procedure 1 and
    ``n`` = the units it holds. Returns one sentence saying how the file was checked."""
    first = sample.turns[0]
    recorded = first.predictions_sha256
    if predictions_sha256 and recorded and recorded != predictions_sha256:
        raise DataMismatchError(
            f"the sample was drawn from a run of predictions {_short(recorded)}, but this run "
            f"judged predictions {_short(predictions_sha256)}: it is a sample of another run",
            path=sample.path, line=sample.line_of(0), field="predictions_sha256")
    digest = run_turns_digest(rows)
    drawn_from = first.run_turns_sha256
    other_run = drawn_from is not None and drawn_from != digest
    another = (f"the sample was drawn from another run (its run digest {_short(drawn_from)} is "
               f"not this run's {_short(digest)}; a retry of error turns also changes a run)"
               if drawn_from is not None and other_run else "")
    n = first.n or len(sample.units())
    drawn_by = _drawn_by(first, n)
    try:
        again = draw_sample(rows, n=n, gold=first.gold, seed=first.seed,
                            by_domain=first.design == "judge-rule" and sample.by_domain,
                            allocation=first.allocation, design=first.design, unit=first.unit,
                            procedure=first.procedure)
    except OptionError as exc:
        corrected = "+corr:" in str(first.gold or "")
        hint = ("it was drawn against a corrected gold: pass the corrections it was drawn "
                "with (--corrections)" if corrected else
                another or "was it drawn from another run?")
        raise DataMismatchError(
            f"the sample cannot be drawn again from this run ({exc.args[0]}): {hint}",
            path=sample.path,
            line=sample.line_of(0), field="design") from None
    redrawn = {turn.key: turn for turn in again.turns}
    listed = {turn.key for turn in sample.turns}
    held = {row_key(row) for row in rows}
    extra = [turn for turn in sample.turns if turn.key not in redrawn]
    missing = [turn for turn in again.turns if turn.key not in listed]
    for index, turn in enumerate(sample.turns):
        if turn.key in redrawn:
            continue
        what = f"dialogue {turn.dialogue_id!r} turn {turn.turn_index}"
        if turn.key not in held:
            why = f"{what} is not in this run"
            reason = another or "edited, or drawn from another run"
        else:
            why = f"{what} is not drawn by the recorded {drawn_by} from this run"
            if another:
                reason = another
            elif len(extra) == 1 and len(missing) == 1:
                reason = (f"edited: that design draws dialogue {missing[0].dialogue_id!r} turn "
                          f"{missing[0].turn_index} instead")
            else:
                what_else = ("a hand-picked set or a review queue" if drawn_from is not None
                             else "a hand-picked set, a review queue or a sample of another "
                             "run")
                reason = (f"not drawn by this design ({len(extra)} of the file's "
                          f"{len(sample.turns)} turns are not): {what_else} is not this random "
                          "sample; label the turns 'labels sample' draws")
        raise DataMismatchError(f"{why}: {reason}", path=sample.path,
                                line=sample.line_of(index), field="dialogue_id")
    if missing:
        turn = missing[0]
        raise DataMismatchError(
            f"the recorded {drawn_by} draws dialogue {turn.dialogue_id!r} turn "
            f"{turn.turn_index}, which the file does not list ({len(missing)} drawn turn(s) "
            f"missing): {another or 'edited (lines removed)'}", path=sample.path,
            line=sample.line_of(0), field="dialogue_id")
    for index, turn in enumerate(sample.turns):
        expected = redrawn[turn.key]
        for name in _DESIGN_FIELDS:
            got, want = getattr(turn, name), getattr(expected, name)
            same = (abs(got - want) <= 1e-9 * max(1.0, abs(want)) if name == "weight"
                    else got == want)
            if not same:
                raise DataMismatchError(
                    f"dialogue {turn.dialogue_id!r} turn {turn.turn_index} has {name} {got!r}, "
                    f"but the recorded design draws it with {want!r}: "
                    f"{another or 'edited'}", path=sample.path, line=sample.line_of(index),
                    field=name)
    if not sample.recorded:
        return (f"a file of an older release (no provenance recorded), drawn again with "
                f"{drawn_by}: the same turns")
    if other_run:
        return (f"drawn again with {drawn_by}: the same turns, though the run's verdicts "
                "differ from those it was drawn from (the design does not depend on them)")
    return f"drawn again from this run with {drawn_by}: the same turns"


def sample_strata(sample: Sample, rows: Sequence[Mapping[str, Any]], *,
                  predictions_sha256: str | None = None) -> Strata:
    """The population the sample was drawn from, rebuilt from the run with the sample's design,
    once :func:`check_sample` has drawn the sample again from it."""
    check_sample(sample, rows, predictions_sha256=predictions_sha256)
    return design_strata(rows, design=sample.design, unit=sample.unit, gold=sample.gold,
                         by_domain=sample.design == "judge-rule" and sample.by_domain)
