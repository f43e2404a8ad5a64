"""A stratified random sample of turns for human labelling, with inclusion weights.

Labelling only the turns where the judge and RULE disagree is cheap but biased: those turns
are the hardest, so agreement measured on them says nothing about the turns where judge and
RULE agree (most of the run), and counting the agreeing turns as correct without review, as
the paper's re-evaluation does, assumes the two are never wrong together. A fair estimate needs
turns drawn by design from *every* stratum of judge verdict × RULE verdict (× domain), each
with a known inclusion probability ``π = n_h / N_h``; a labelled turn then stands for
``w = 1/π = N_h / n_h`` turns of its stratum, and weighted (Horvitz–Thompson) sums estimate
population totals without bias.

``equal`` allocation (the default) gives each stratum the same number of turns (capped by its
size, the rest spread over the others), so the small disagreement strata get enough labels to
say something; ``proportional`` allocation mirrors the population.

That design (``judge-rule``) suits agreement figures. For *estimating the metric* it gives
prediction-powered inference nothing to work with: inside a stratum the judge's verdict is
constant, so correcting by it is the labels-only estimate. Two designs leave the judge's
verdict free to vary: ``random`` (a simple random sample) and ``domain`` (strata by the domain
the turn is about; proportional allocation, at least two per stratum so each has a variance).
Neither needs gold annotation. With ``unit="dialogue"`` whole dialogues are drawn (every turn
of a drawn dialogue is to be labelled), which makes dialogue-level figures estimable and
clusters the intervals by dialogue.

A sample file is trusted only as far as it can be drawn again. Every line records what the draw
needs (design, unit, ``n``, allocation, seed, gold, the ``procedure`` version) and digests of
what it was drawn from (the run's turns and verdicts, and the predictions file); every consumer
draws it again from the run (:func:`check_sample`) and refuses a file whose turns or strata
differ, naming the first line that differs and why: hand-picked turns and review queues under
a random design's header, an edited turn id, or a sample of another run. Files written before
these fields existed are drawn again with procedure 1 and ``n`` = the units they hold. The
check lives in ``_sample_check``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from .._digest import text_digest
from .._errors import InputError, OptionError
from .._glossary import ALLOCATIONS, DESIGNS, UNITS, Allocation, Design, Unit
from .._io import iter_jsonl_lines, open_output, parse_line
from ._labels import TurnKey, row_key
from .reports import SampleDesign

UnitKey = TurnKey | str
"""A sampling unit: a turn key, or a dialogue key for whole-dialogue designs."""
PROCEDURE = 1
"""Version of the drawing procedure (:func:`draw_sample`). A change that draws other units
from the same run, options and seed gets a new number, and the old one stays drawable, so
every sample file ever written can be checked by drawing it again."""
PROCEDURES: tuple[int, ...] = (1,)
_SHA256 = r"^[0-9a-f]{64}$"


class SampledTurn(BaseModel):
    """One line of a sample file: a drawn turn, its stratum and its design weight."""

    model_config = ConfigDict(strict=True, extra="forbid")

    dialogue_id: str = Field(min_length=1)
    turn_index: int = Field(ge=0)
    stratum: str = Field(min_length=1)
    judge: StrictBool | None = None
    """The judge's verdict the turn was drawn with (``judge-rule`` design only)."""
    rule: StrictBool | None = None
    domain: str | None = None
    stratum_size: int = Field(ge=1)
    stratum_sample: int = Field(ge=1)
    inclusion_probability: float = Field(gt=0, le=1)
    weight: float = Field(ge=1)
    gold: str | None = Field(default=None, min_length=1)
    population: int = Field(ge=1)
    seed: int
    allocation: Allocation
    design: Design = "judge-rule"
    unit: Unit = "turn"
    """What was drawn: turns, or whole dialogues (stratum sizes and weights count units)."""
    n: int | None = Field(default=None, ge=1)
    """Units asked for (``--n``); files of older releases lack it (then: the units drawn)."""
    procedure: int = Field(default=1, ge=1)
    """Version of the drawing procedure (files of older releases: 1)."""
    run_turns_sha256: str | None = Field(default=None, pattern=_SHA256)
    """Digest of the run's turns and verdicts it was drawn from (:func:`run_turns_digest`)."""
    predictions_sha256: str | None = Field(default=None, pattern=_SHA256)
    """sha256 of the predictions file the run judged, when known (labels name it too)."""

    @property
    def unit_key(self) -> UnitKey:
        return self.key if self.unit == "turn" else self.key[0]

    @property
    def key(self) -> TurnKey:
        return row_key({"dialogue_id": self.dialogue_id, "turn_index": self.turn_index})


@dataclass
class Sample:
    """The turns of one stratified sample (as drawn, or as read from a sample file)."""

    turns: list[SampledTurn]
    path: str | None = None
    lines: list[int] | None = field(default=None, repr=False)

    @property
    def gold(self) -> str | None:
        return self.turns[0].gold

    @property
    def population(self) -> int:
        return self.turns[0].population

    @property
    def design(self) -> Design:
        return self.turns[0].design

    @property
    def unit(self) -> Unit:
        return self.turns[0].unit

    @property
    def by_domain(self) -> bool:
        return self.turns[0].domain is not None

    def describe(self) -> SampleDesign:
        """The design in a few fields, for reports."""
        first = self.turns[0]
        return {"design": first.design, "unit": first.unit, "gold": first.gold,
                "allocation": first.allocation, "seed": first.seed,
                "population": first.population, "drawn_units": len(self.units()),
                "drawn_turns": len(self.turns), "n": first.n or len(self.units()),
                "procedure": first.procedure, "recorded": self.recorded,
                "predictions_sha256": first.predictions_sha256}

    def units(self) -> list[UnitKey]:
        """The drawn units in file order."""
        return list(dict.fromkeys(turn.unit_key for turn in self.turns))

    def strata(self) -> dict[str, dict[str, Any]]:
        """Per stratum: its population size, sample size and the (judge, rule) verdicts."""
        out: dict[str, dict[str, Any]] = {}
        for turn in self.turns:
            out.setdefault(turn.stratum, {
                "stratum": turn.stratum, "judge": turn.judge, "rule": turn.rule,
                "domain": turn.domain, "size": turn.stratum_size,
                "sample": turn.stratum_sample})
        return out

    def by_key(self) -> dict[TurnKey, SampledTurn]:
        return {turn.key: turn for turn in self.turns}

    @property
    def recorded(self) -> bool:
        """Whether the file records its provenance (``n`` and the run's digest); files of
        older releases do not, and are checked by drawing them again all the same."""
        return self.turns[0].n is not None and self.turns[0].run_turns_sha256 is not None

    def line_of(self, index: int) -> int | None:
        return self.lines[index] if self.lines else None


def turn_domain(row: Mapping[str, Any], gold: str | None) -> str:
    """The domain a turn is about: the one domain of the slots its prediction or gold change
    (of RULE version ``gold``, when given) sets, ``several`` when they span domains, ``none``
    when neither sets anything."""
    slots = list(row.get("pred_turn_state") or {})
    slots += list(((row.get("gold_turn_state") or {}).get(gold)) or {})
    domains = {slot.split("-", 1)[0] for slot in slots}
    if not domains:
        return "none"
    return domains.pop() if len(domains) == 1 else "several"


def resolve_version(requested: str, versions: Sequence[str]) -> str:
    """The annotation version asked for (``2.1`` or ``21``) among the run's RULE versions."""
    known = list(dict.fromkeys(versions))
    wanted = requested.replace(".", "").lower()
    for version in known:
        if version.replace(".", "").lower() == wanted:
            return version
    raise OptionError(f"the run has no RULE verdicts for version {requested!r}; it has: "
                      f"{', '.join(known) or 'none'}")


def _verdict(flag: bool) -> str:
    return "correct" if flag else "incorrect"


def allocate(sizes: Mapping[str, int], n: int, allocation: Allocation, *,
             minimum: int = 0) -> dict[str, int]:
    """How many units to draw from each stratum (never more than it has).

    ``equal``: water-filling, so small strata are taken whole and the rest share what is left;
    ``proportional``: largest remainders of ``n · N_h / N``. Ties break by stratum name.
    ``minimum``: every stratum gets at least that many (or all it has), taken from the strata
    with the most, so that each stratum has a variance estimate.
    """
    names = sorted(sizes)
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    out = dict.fromkeys(names, 0)
    if allocation == "proportional":
        exact = {h: n * sizes[h] / total for h in names}
        out = {h: int(exact[h]) for h in names}
        by_remainder = sorted(names, key=lambda h: (-(exact[h] - out[h]), h))
        for h in by_remainder[: n - sum(out.values())]:
            out[h] += 1
        return _raise_to(out, sizes, minimum)
    remaining = n
    for position, h in enumerate(sorted(names, key=lambda h: (sizes[h], h))):
        share = remaining // (len(names) - position)
        out[h] = min(sizes[h], share)
        remaining -= out[h]
    for h in sorted(names, key=lambda h: (-(sizes[h] - out[h]), h)):
        if remaining == 0:
            break
        if out[h] < sizes[h]:
            out[h] += 1
            remaining -= 1
    return _raise_to(out, sizes, minimum)


def _raise_to(counts: dict[str, int], sizes: Mapping[str, int],
              minimum: int) -> dict[str, int]:
    """Move draws from the largest allocations to strata below ``minimum`` (while the total
    allows: a stratum never gives up draws it needs itself)."""
    out = dict(counts)
    for h in sorted(out, key=lambda h: (sizes[h], h)):
        while out[h] < min(minimum, sizes[h]):
            donor = max(sorted(out), key=lambda g: out[g])
            if donor == h or out[donor] <= minimum:
                return out
            out[donor] -= 1
            out[h] += 1
    return out


@dataclass
class Strata:
    """The population of a design: its units by stratum, in run order, and the rows of each."""

    members: dict[str, list[UnitKey]]
    rows: dict[UnitKey, list[int]]
    verdicts: dict[UnitKey, tuple[bool | None, bool | None, str | None]]
    left_out: int
    """Units outside the population (a turn without a judge verdict, or a dialogue with one)."""

    @property
    def size(self) -> int:
        return sum(len(m) for m in self.members.values())


def _dialogue_domain(domains: Sequence[str]) -> str:
    named = {d for d in domains if d != "none"} - {"several"}
    if "several" in domains or len(named) > 1:
        return "several"
    return named.pop() if named else "none"


def design_strata(rows: Sequence[Mapping[str, Any]], *, design: Design, unit: Unit = "turn",
                  gold: str | None = None, by_domain: bool = False) -> Strata:
    """Place every unit of a run in its stratum under a design (the same for drawing a sample
    and for estimating from it). ``gold`` is a RULE version the run holds (``judge-rule``
    needs it; ``domain`` also reads its gold turn state when given)."""
    if design not in DESIGNS:
        raise OptionError(f"unknown design {design!r}; choose from {', '.join(DESIGNS)}")
    if unit not in UNITS:
        raise OptionError(f"unknown unit {unit!r}; choose from {', '.join(UNITS)}")
    if design == "judge-rule" and gold is None:
        raise OptionError("the judge-rule design stratifies by a RULE verdict: give --gold")
    if design == "judge-rule" and unit == "dialogue":
        raise OptionError("the judge-rule design stratifies turns; draw whole dialogues with "
                          "--design random or --design domain")
    strata = Strata({}, {}, {}, 0)
    placed: dict[UnitKey, tuple[str, list[str]]] = {}
    for index, row in enumerate(rows):
        judge = row.get("verdict")
        rule = (row.get("rule") or {}).get(gold) if gold is not None else None
        domain = (turn_domain(row, gold) if design == "domain" or by_domain else None)
        key = row_key(row)
        if unit == "dialogue":
            entry = placed.setdefault(key[0], ("", []))
            strata.rows.setdefault(key[0], []).append(index)
            entry[1].append(domain or "none")
            if not isinstance(judge, bool):
                placed[key[0]] = ("excluded", entry[1])
            continue
        if not isinstance(judge, bool) or (design == "judge-rule" and not isinstance(rule, bool)):
            strata.left_out += 1
            continue
        if design == "judge-rule":
            # both verdicts are booleans here (checked just above)
            name = f"judge={_verdict(judge)}, RULE-{gold}={_verdict(bool(rule))}"
            if by_domain:
                name += f", domain={domain}"
        elif design == "domain":
            name = f"domain={domain}"
        else:
            name = "all turns"
        strata.members.setdefault(name, []).append(key)
        strata.rows[key] = [index]
        strata.verdicts[key] = (judge if design == "judge-rule" else None,
                                rule if design == "judge-rule" else None,
                                domain if design == "domain" or by_domain else None)
    for dialogue, (mark, domains) in placed.items():
        if mark == "excluded":
            strata.left_out += 1
            del strata.rows[dialogue]
            continue
        domain = _dialogue_domain(domains) if design == "domain" else None
        name = f"domain={domain}" if design == "domain" else "all dialogues"
        strata.members.setdefault(name, []).append(dialogue)
        strata.verdicts[dialogue] = (None, None, domain)
    return strata


def run_turns_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """A digest of what a draw reads of a run: its turns with their judge and (given) RULE
    verdicts and the predicted and gold turn states the domain design reads, in turn order
    (dialogue ids in any spelling; rows without the states, as the web's index holds them,
    digest them as absent)."""
    facts = sorted((*row_key(row), row.get("verdict"),
                    sorted((str(v), ok) for v, ok in (row.get("rule") or {}).items()
                           if ok is not None),
                    row.get("pred_turn_state"), row.get("gold_turn_state")) for row in rows)
    return text_digest(facts)


def draw_sample(rows: Sequence[Mapping[str, Any]], *, n: int, gold: str | None = None,
                seed: int = 0, by_domain: bool = False, allocation: Allocation | None = None,
                design: Design = "random", unit: Unit = "turn", procedure: int = PROCEDURE,
                predictions_sha256: str | None = None) -> Sample:
    """Draw ``n`` units of a judge run by a design, without replacement within each stratum.

    ``random`` (the default): one stratum; ``judge-rule``: strata judge verdict × RULE-``gold``
    verdict (× domain), for agreement figures; ``domain``: strata by domain. Units outside the
    population (turns without a judge verdict, or for ``judge-rule`` without a RULE verdict;
    dialogues with such a turn) are not drawn. The same rows, options and seed give the same
    sample. ``predictions_sha256`` (the predictions file the run judged, when known) is
    recorded with the run's digest so that a consumer can tell a sample of another run.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OptionError(f"--n must be a whole number >= 1 (got {n!r})")
    if procedure not in PROCEDURES:
        raise OptionError(f"unknown drawing procedure {procedure!r}; this release draws "
                          f"{', '.join(map(str, PROCEDURES))}")
    if allocation is None:
        allocation = "equal" if design == "judge-rule" else "proportional"
    if allocation not in ALLOCATIONS:
        raise OptionError(f"unknown allocation {allocation!r}; choose from "
                          f"{', '.join(ALLOCATIONS)}")
    if gold is not None:
        gold = resolve_version(gold, [v for row in rows for v in (row.get("rule") or {})])
    strata = design_strata(rows, design=design, unit=unit, gold=gold, by_domain=by_domain)
    if not strata.size:
        what = ("turn with both a judge and a RULE verdict" if design == "judge-rule"
                else "turn with a judge verdict" if unit == "turn"
                else "dialogue whose every turn has a judge verdict")
        raise OptionError(f"the run has no {what}")
    members = strata.members
    sizes = {h: len(m) for h, m in members.items()}
    counts = allocate(sizes, n, allocation, minimum=0 if design == "judge-rule" else 2)
    rng = np.random.default_rng(seed)
    chosen: dict[UnitKey, str] = {}
    for h in sorted(members):
        picks: list[int] = (rng.choice(sizes[h], size=counts[h], replace=False).tolist()
                            if counts[h] else [])
        chosen.update({members[h][i]: h for i in picks})
    turns = []
    digest = run_turns_digest(rows)
    for index in sorted(i for u in chosen for i in strata.rows[u]):
        row = rows[index]
        key = row_key(row)
        unit_key: UnitKey = key if unit == "turn" else key[0]
        stratum = chosen.get(unit_key)
        if stratum is None:
            continue
        judge, rule, domain = strata.verdicts[unit_key]
        size, drawn = sizes[stratum], counts[stratum]
        turns.append(SampledTurn(
            dialogue_id=str(row["dialogue_id"]), turn_index=int(row["turn_index"]),
            stratum=stratum, judge=judge, rule=rule, domain=domain, stratum_size=size,
            stratum_sample=drawn, inclusion_probability=drawn / size,
            weight=size / drawn, gold=gold, population=strata.size, seed=seed,
            allocation=allocation, design=design, unit=unit, n=n, procedure=procedure,
            run_turns_sha256=digest, predictions_sha256=predictions_sha256))
    return Sample(turns)


def write_sample(sample: Sample, path: str | Path) -> int:
    """Write a sample as JSON Lines (one drawn turn per line); returns the number of turns."""
    with open_output(path) as handle:
        for turn in sample.turns:
            handle.write(json.dumps(turn.model_dump(), ensure_ascii=False) + "\n")
    return len(sample.turns)


def load_sample(path: str | Path) -> Sample:
    """Read a sample file and check that it is one consistent stratified design."""
    turns: list[SampledTurn] = []
    lines: list[int] = []
    first: dict[str, int] = {}
    seen: dict[TurnKey, int] = {}
    unit_stratum: dict[UnitKey, str] = {}
    for line, text in iter_jsonl_lines(path):
        turn = parse_line(SampledTurn, text, path=path, line=line)
        if turn.procedure not in PROCEDURES:
            raise InputError(f"drawn by procedure {turn.procedure}, which this release does not "
                             f"know (it draws {', '.join(map(str, PROCEDURES))}): a newer "
                             "release wrote it", path=path, line=line, field="procedure")
        if unit_stratum.setdefault(turn.unit_key, turn.stratum) != turn.stratum:
            raise InputError(f"dialogue {turn.dialogue_id!r} is drawn whole, but its turns "
                             "name different strata", path=path, line=line, field="stratum")
        if turn.key in seen:
            raise InputError(f"dialogue {turn.dialogue_id!r} turn {turn.turn_index} is drawn "
                             f"twice (line {seen[turn.key]})", path=path, line=line,
                             field="turn_index")
        seen[turn.key] = line
        if turns:
            for name in ("gold", "population", "seed", "allocation", "design", "unit", "n",
                         "procedure", "run_turns_sha256", "predictions_sha256"):
                if getattr(turn, name) != getattr(turns[0], name):
                    raise InputError(f"{name} differs from line {lines[0]}: one sample file "
                                     "holds one design", path=path, line=line, field=name)
        if turn.stratum in first:
            other = turns[first[turn.stratum]]
            for name in ("stratum_size", "stratum_sample", "judge", "rule", "domain"):
                if getattr(turn, name) != getattr(other, name):
                    raise InputError(f"{name} differs from line {lines[first[turn.stratum]]} "
                                     "of the same stratum", path=path, line=line, field=name)
        else:
            first[turn.stratum] = len(turns)
        if turn.stratum_sample > turn.stratum_size:
            raise InputError("stratum_sample exceeds stratum_size", path=path, line=line,
                             field="stratum_sample")
        expected = turn.stratum_size / turn.stratum_sample
        if abs(turn.weight - expected) > 1e-9 * expected:
            raise InputError(f"weight must be stratum_size / stratum_sample = {expected:g}",
                             path=path, line=line, field="weight")
        turns.append(turn)
        lines.append(line)
    if not turns:
        raise InputError("no sampled turns in file", path=path)
    drawn = Counter(t.stratum for t in {t.unit_key: t for t in turns}.values())
    for stratum, count in drawn.items():
        declared = turns[first[stratum]].stratum_sample
        if count != declared:
            raise InputError(f"stratum {stratum!r} declares {declared} drawn {turns[0].unit}s "
                             f"but the file holds {count}", path=path, line=lines[first[stratum]],
                             field="stratum_sample")
    return Sample(turns, path=str(path), lines=lines)
