"""Corrections of a gold annotation: read them, check them, apply them as a new version.

An audit ends with decisions such as "under MultiWOZ 2.1, the state after turn 4 of PMUL0117
should say ``hotel-area: east``". A corrections file holds such decisions, one per JSON Lines
record; applying it to a dialogues file gives a corrected annotation version whose cumulative
and turn states agree with each other, beside every version the file already has. Commands that
score against ``--gold`` apply corrections on the fly and name the result with a digest of what
was applied (``2.1+corr:1a2b3c4d``), so a figure always says which gold it was computed on.

A decision that the annotation is right ("reject") is a correction whose value is the
annotation's own: applying it changes nothing, but it counts when two reviewers disagree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from .._digest import sha256_text
from .._errors import CorrectionConflicts, DataMismatchError, InputError, OptionError
from .._io import MAX_NAME_CHARS, iter_jsonl_lines, parse_line
from ._dialogues import Dialogue, DialogueSet, Turn, dialogue_key
from ._schema import Schema
from ._slotnames import closest_slot
from ._states import NONE, State

DIGEST_CHARS = 8
"""Hex digits of the corrections digest in a corrected version's name."""


class Correction(BaseModel):
    """One reviewed decision about one slot of one turn's gold state."""

    model_config = ConfigDict(extra="forbid")

    dialogue_id: str = Field(min_length=1)
    turn_index: int = Field(ge=0)
    slot: str = Field(min_length=1, description="domain-slot name, e.g. hotel-area")
    value: str | None = Field(
        description="the right value of the slot in the state after the turn; null: the slot "
        "holds no value there")
    gold: str = Field(min_length=1, max_length=MAX_NAME_CHARS,
                      description="the annotation version it corrects, e.g. 2.1")
    through_turn: int | None = Field(
        default=None, ge=0,
        description="the last turn it covers; absent: the turn and the following turns whose "
        "state under that version still holds the same wrong value unchanged")
    reviewer: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    time: AwareDatetime
    was: str | None = Field(
        default=None,
        description="the value it replaces (null: the slot was empty); a correction whose "
        "'was' no longer matches the annotation is stale and refused")
    note: str | None = None
    candidate: str | None = Field(default=None, description="the candidate it answers")
    adjudicated: bool = Field(
        default=False,
        description="an adjudicator's decision: it settles reviewers' disagreeing corrections "
        "on the turns it covers")

    @field_validator("value", "was")
    @classmethod
    def _none_is_empty(cls, value: str | None) -> str | None:
        """``"none"`` is the data's word for an empty slot: the same as null here."""
        return None if value is not None and value.strip().lower() == NONE else value

    @property
    def checks_was(self) -> bool:
        return "was" in self.model_fields_set


@dataclass(frozen=True)
class Located:
    """A correction with the file and line it came from (for every message about it)."""

    correction: Correction
    path: str
    line: int

    def error(self, message: str, field: str | None = None) -> InputError:
        return InputError(message, path=self.path, line=self.line, field=field)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def read_corrections(paths: Iterable[str | Path], *, each_nonempty: bool = False
                     ) -> list[Located]:
    """Every correction of the given files, in file order; the first bad record is an error
    naming its file, line and field. ``each_nonempty``: a file without any correction is an
    error too (a command given a file means a fix, not an empty one)."""
    found: list[Located] = []
    for path in paths:
        if Path(path).is_dir():
            raise InputError("is a directory, not a corrections file", path=path)
        if not Path(path).exists():
            raise InputError("file not found", path=path)
        before = len(found)
        for line, text in iter_jsonl_lines(path):
            found.append(Located(parse_line(Correction, text, path=path, line=line),
                                 str(path), line))
        if each_nonempty and len(found) == before:
            raise InputError("no corrections in the file (every line is blank)", path=path)
    return found


@dataclass(frozen=True)
class Conflict:
    """Corrections that set one slot of one turn to different values, undecided."""

    dialogue_id: str
    turn_index: int
    slot: str
    values: dict[str | None, list[Located]]

    def describe(self) -> str:
        sides = "; ".join(
            f"{'(no value)' if value is None else repr(value)} by "
            + ", ".join(f"{c.correction.reviewer} ({c.where})" for c in located)
            for value, located in self.values.items())
        return f"{self.dialogue_id} turn {self.turn_index} {self.slot}: {sides}"


@dataclass
class CorrectedGold:
    """The outcome of applying corrections to one annotation version."""

    base: str
    name: str
    digest: str
    dialogues: DialogueSet
    applied: int
    """Corrections that take part (matching version, dialogue in the set)."""
    changed_turns: int
    """Turns whose state under the corrected version differs from the base version's."""
    changed_slots: int
    other_versions: int = 0
    """Corrections for another annotation version, left aside."""
    decisions: dict[tuple[str, int, str], str | None] = field(default_factory=dict, repr=False)
    """(dialogue key, turn, slot) → the value decided (None: empty), where it differs."""

    def summary(self) -> dict[str, Any]:
        """What a result says of the corrected gold it used: which version, its name with the
        digest, and how much the corrections changed."""
        return {"base": self.base, "name": self.name, "digest": self.digest,
                "applied": self.applied, "changed_turns": self.changed_turns,
                "changed_slots": self.changed_slots}


def _same_version(a: str, b: str) -> bool:
    return a.replace(".", "").lower() == b.replace(".", "").lower()


def _covered(located: Located, states: Sequence[State], stops: Sequence[int]) -> range:
    """The turns a correction covers: explicit ``through_turn``, else the turn and those after
    it whose annotation still holds the same wrong value, up to the next corrected turn of the
    same slot (a later decision about the slot speaks for its own turns)."""
    c = located.correction
    if c.through_turn is not None:
        if c.through_turn < c.turn_index:
            raise located.error(f"through_turn {c.through_turn} is before turn_index "
                                f"{c.turn_index}", "through_turn")
        if c.through_turn >= len(states):
            raise located.error(f"through_turn {c.through_turn} is past the dialogue's last "
                                f"turn ({len(states) - 1})", "through_turn")
        return range(c.turn_index, c.through_turn + 1)
    wrong = states[c.turn_index].get(c.slot)
    end = c.turn_index + 1
    limit = min([s for s in stops if s > c.turn_index], default=len(states))
    while end < limit and states[end].get(c.slot) == wrong:
        end += 1
    return range(c.turn_index, end)


def slot_problem(located: Located, schema: Schema) -> InputError | None:
    """A slot outside the schema, as a problem naming the closest schema slot."""
    if schema.resolve_slot(located.correction.slot) is not None:
        return None
    near = closest_slot(located.correction.slot, schema)
    return located.error(f"slot {located.correction.slot!r} is not in the schema"
                         + (f"; did you mean {near!r}?" if near else ""), "slot")


def _check_against(located: Located, dialogue: Dialogue, version: str) -> list[State]:
    c = located.correction
    if c.turn_index >= len(dialogue.turns):
        raise located.error(f"turn {c.turn_index} is past the dialogue's last turn "
                            f"({len(dialogue.turns) - 1})", "turn_index")
    states = [turn.gold_states.get(version, {}) for turn in dialogue.turns]
    current = states[c.turn_index].get(c.slot)
    if c.checks_was and current != c.was:
        shown = "no value" if current is None else repr(current)
        raise located.error(
            f"stale correction: it replaces {c.was!r} but version {version} now has {shown} "
            f"for {c.slot} at turn {c.turn_index}", "was")
    return states


def decide(dialogues: DialogueSet, version: str, corrections: Sequence[Located], *,
           schema: Schema | None = None) -> tuple[dict[tuple[str, int, str], str | None], int, int]:
    """Check every correction of ``version`` against the dialogues and decide each covered
    (dialogue, turn, slot): ``(decisions, applied, other_versions)``.

    Raises :class:`CorrectionConflicts` listing every undecided disagreement, and an
    :class:`InputError` naming file and line for an unknown dialogue, a turn out of range, a
    slot outside ``schema`` or a stale ``was``."""
    mine = [_canonical(c, schema) for c in corrections
            if _same_version(c.correction.gold, version)]
    other = len(corrections) - len(mine)
    starts: dict[tuple[str, str], list[int]] = defaultdict(list)
    usable: list[tuple[Located, Dialogue]] = []
    for located in mine:
        c = located.correction
        dialogue = dialogues.get(c.dialogue_id)
        if dialogue is None:
            if dialogue_key(c.dialogue_id) in dialogues.excluded:
                continue  # left out by --dialogue-ids / --limit: not scored, not applied
            raise DataMismatchError(f"dialogue {c.dialogue_id!r} is not in {dialogues.path}",
                                    path=located.path, line=located.line)
        usable.append((located, dialogue))
        starts[(dialogue_key(c.dialogue_id), c.slot)].append(c.turn_index)
    votes: dict[tuple[str, int, str], dict[bool, dict[str | None, list[Located]]]] = {}
    for located, dialogue in usable:
        c = located.correction
        states = _check_against(located, dialogue, version)
        key = dialogue_key(c.dialogue_id)
        for turn in _covered(located, states, starts[(key, c.slot)]):
            by_kind = votes.setdefault((key, turn, c.slot), {})
            by_kind.setdefault(c.adjudicated, {}).setdefault(c.value, []).append(located)
    decisions: dict[tuple[str, int, str], str | None] = {}
    conflicts: list[Conflict] = []
    for (key, turn, slot), by_kind in votes.items():
        ballot = by_kind.get(True) or by_kind[False]
        if len(ballot) > 1:
            first = next(iter(ballot.values()))[0].correction
            conflicts.append(Conflict(first.dialogue_id, turn, slot, ballot))
            continue
        decisions[(key, turn, slot)] = next(iter(ballot))
    if conflicts:
        conflicts.sort(key=lambda c: (c.dialogue_id, c.turn_index, c.slot))
        raise CorrectionConflicts(_first_turn_of_each(conflicts))
    return decisions, len(usable), other


def decided_slots(dialogues: DialogueSet, version: str, corrections: Sequence[Located], *,
                  schema: Schema | None = None) -> set[tuple[str, int, str]]:
    """Every (dialogue key, turn, slot) a correction of ``version`` covers, rejections ("the
    annotation is right") included: what a re-audit must not ask about again."""
    base = dialogues.resolve_version(version)
    return set(decide(dialogues, base, corrections, schema=schema)[0])


def _canonical(located: Located, schema: Schema | None) -> Located:
    """The correction with its slot named as the schema names it (the gold states' names)."""
    if schema is None:
        return located
    problem = slot_problem(located, schema)
    if problem is not None:
        raise problem
    canonical = schema.resolve_slot(located.correction.slot)
    if canonical is None or canonical == located.correction.slot:
        return located
    renamed = located.correction.model_copy(update={"slot": canonical})
    return Located(renamed, located.path, located.line)


def _first_turn_of_each(conflicts: list[Conflict]) -> list[Conflict]:
    """One conflict per disagreement: the covered turns after the first say the same again."""
    seen: set[tuple[str, str, tuple[tuple[str | None, tuple[str, ...]], ...]]] = set()
    kept = []
    for conflict in conflicts:
        sides = tuple(sorted(((v, tuple(c.where for c in located))
                              for v, located in conflict.values.items()),
                             key=lambda side: (side[0] is None, side[0] or "")))
        marker = (conflict.dialogue_id, conflict.slot, sides)
        if marker not in seen:
            seen.add(marker)
            kept.append(conflict)
    return kept


def corrections_digest(base: str, decisions: dict[tuple[str, int, str], str | None]) -> str:
    """A digest of what the corrections decide (not who decided or when): two files that give
    the same corrected gold give the same name."""
    rows = sorted([key, turn, slot, value] for (key, turn, slot), value in decisions.items())
    return sha256_text(repr((base.replace(".", "").lower(), rows)))


def corrected_name(base: str, digest: str) -> str:
    return f"{base}+corr:{digest[:DIGEST_CHARS]}"


def _new_turn_state(old_turn: State, old_before: State, before: State, after: State,
                    touched: Iterable[str]) -> State:
    """The turn state that leads from ``before`` to ``after``, keeping the annotation's own
    entries for every slot the corrections did not touch (and its restatements of an
    unchanged value, where the corrected states leave them true)."""
    update = dict(old_turn)
    for slot in touched:
        previous, current = before.get(slot), after.get(slot)
        restated = (current is not None and old_turn.get(slot) == current
                    and old_before.get(slot) == current)
        if current != previous:
            update[slot] = NONE if current is None else current
        elif not restated:
            update.pop(slot, None)
    return dict(sorted(update.items()))


def _corrected_dialogue(dialogue: Dialogue, key: str, base: str, name: str,
                        decisions: dict[tuple[str, int, str], str | None]
                        ) -> tuple[Dialogue, int, int]:
    """The dialogue with version ``name`` added: ``(dialogue, changed turns, changed slots)``."""
    old = [turn.gold_states.get(base, {}) for turn in dialogue.turns]
    new: list[State] = []
    touched: list[set[str]] = []
    changed_turns = changed_slots = 0
    by_turn: dict[int, list[tuple[str, str | None]]] = defaultdict(list)
    for (_, turn_index, slot), value in decisions.items():
        by_turn[turn_index].append((slot, value))
    for index, state in enumerate(old):
        fixed = dict(state)
        slots: set[str] = set()
        for slot, value in by_turn.get(index, ()):
            if value is None:
                fixed.pop(slot, None)
            else:
                fixed[slot] = value
            if fixed.get(slot) != state.get(slot):
                slots.add(slot)
        new.append(dict(sorted(fixed.items())))
        touched.append(slots)
        changed_turns += bool(slots)
        changed_slots += len(slots)
    turns: list[Turn] = []
    for index, turn in enumerate(dialogue.turns):
        states = dict(turn.gold_states)
        states[name] = new[index]
        turn_states = dict(turn.gold_turn_states)
        if base in turn.gold_turn_states:
            here = touched[index] | (touched[index - 1] if index else set())
            turn_states[name] = _new_turn_state(turn.gold_turn_states[base],
                                                old[index - 1] if index else {},
                                                new[index - 1] if index else {}, new[index],
                                                here)
        turns.append(turn.model_copy(update={"gold_states": states,
                                             "gold_turn_states": turn_states}))
    return dialogue.model_copy(update={"turns": turns}), changed_turns, changed_slots


def apply_corrections(dialogues: DialogueSet, version: str, corrections: Sequence[Located], *,
                      name: str | None = None, schema: Schema | None = None
                      ) -> CorrectedGold:
    """Add version ``name`` (default: ``<version>+corr:<digest>``) to every dialogue: version
    ``version`` with the corrections applied, other versions untouched.

    ``version`` must be one the dialogues carry; corrections for other versions are left aside
    and counted, and a call whose corrections all name other versions is an error."""
    base = dialogues.resolve_version(version)
    decisions, applied, other = decide(dialogues, base, corrections, schema=schema)
    if corrections and applied == 0 and other == len(corrections):
        named = sorted({c.correction.gold for c in corrections})
        raise OptionError(f"none of the corrections is for version {base} (they correct "
                          f"{', '.join(named)})")
    digest = corrections_digest(base, decisions)
    new_name = name or corrected_name(base, digest)
    if new_name in dialogues.versions:
        raise OptionError(f"{dialogues.path} already has an annotation version {new_name!r}")
    fixed: list[Dialogue] = []
    changed_turns = changed_slots = 0
    effective: dict[tuple[str, int, str], str | None] = {}
    by_dialogue: dict[str, dict[tuple[str, int, str], str | None]] = defaultdict(dict)
    for decided, value in decisions.items():
        by_dialogue[decided[0]][decided] = value
    for dialogue in dialogues.dialogues:
        key = dialogue_key(dialogue.dialogue_id)
        mine = by_dialogue.get(key, {})
        corrected, turns, slot_count = _corrected_dialogue(dialogue, key, base, new_name, mine)
        fixed.append(corrected)
        changed_turns += turns
        changed_slots += slot_count
        for (k, t, s), value in mine.items():
            if dialogue.turns[t].gold_states.get(base, {}).get(s) != value:
                effective[(k, t, s)] = value
    versions = (*tuple(v for v in dialogues.versions if v != new_name), new_name)
    result = DialogueSet(dialogues.path, fixed, versions, dict(dialogues.index),
                         dialogues.excluded, dialogues.source_format, dialogues.renamed)
    return CorrectedGold(base, new_name, digest, result, applied, changed_turns, changed_slots,
                         other, effective)


def versions_named(corrections: Sequence[Located]) -> list[str]:
    """The annotation versions the corrections correct, in the order first named."""
    return list(dict.fromkeys(c.correction.gold for c in corrections))


def apply_each(dialogues: DialogueSet, corrections: Sequence[Located], *,
               versions: Sequence[str] | None = None, schema: Schema | None = None
               ) -> tuple[DialogueSet, list[CorrectedGold]]:
    """The dialogues with one corrected version (``VERSION+corr:DIGEST``) added for each of
    ``versions`` (default: every version the corrections correct), and what each applied.

    The one way every command, analysis and service job corrects its gold: the corrected
    versions are then judged or scored beside the file's own."""
    results: list[CorrectedGold] = []
    for version in versions_named(corrections) if versions is None else versions:
        result = apply_corrections(dialogues, version, corrections, schema=schema)
        dialogues = result.dialogues
        results.append(result)
    return dialogues, results


def only_version(corrections: Sequence[Located], *, option: str) -> str:
    """The one version the corrections correct, for a score of one version that names none
    (several: an error asking for ``option``)."""
    named = versions_named(corrections)
    if len(named) > 1:
        raise OptionError(f"the corrections correct several versions ({', '.join(named)}): "
                          f"say which with {option}")
    return named[0]


def scored_version(dialogues: DialogueSet, corrected: Sequence[CorrectedGold],
                   gold: str | None, *, option: str) -> CorrectedGold:
    """The corrected version a score of one version uses: that of ``gold`` (a version the
    dialogues carry, or a corrected version's name), or without ``gold`` the one version the
    corrections correct (``option`` names the choice in the messages)."""
    if gold is None:
        if len(corrected) > 1:
            raise OptionError(f"the corrections correct several versions "
                              f"({', '.join(c.base for c in corrected)}): say which with "
                              f"{option}")
        return corrected[0]
    for c in corrected:
        if gold == c.name:
            return c
    base = dialogues.resolve_version(gold)
    for c in corrected:
        if c.base == base:
            return c
    raise OptionError(f"the corrections correct {', '.join(c.base for c in corrected)}, not "
                      f"{option} {gold!r}")


def now_utc() -> datetime:
    """The time stamp a new correction gets (timezone-aware, as the file format requires)."""
    from datetime import timezone

    return datetime.now(timezone.utc).replace(microsecond=0)
