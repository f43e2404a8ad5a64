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
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from .._errors import DataMismatchError, InputError, OptionError
from .._io import iter_jsonl_lines, open_output, parse_line
from ._labels import TurnKey, row_key

Allocation = Literal["equal", "proportional"]
ALLOCATIONS: tuple[Allocation, ...] = ("equal", "proportional")


class SampledTurn(BaseModel):
    """One line of a sample file: a drawn turn, its stratum and its design weight."""

    model_config = ConfigDict(strict=True, extra="forbid")

    dialogue_id: str = Field(min_length=1)
    turn_index: int = Field(ge=0)
    stratum: str = Field(min_length=1)
    judge: StrictBool
    rule: StrictBool
    domain: str | None = None
    stratum_size: int = Field(ge=1)
    stratum_sample: int = Field(ge=1)
    inclusion_probability: float = Field(gt=0, le=1)
    weight: float = Field(ge=1)
    gold: str = Field(min_length=1)
    population: int = Field(ge=1)
    seed: int
    allocation: Allocation

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
    def gold(self) -> str:
        return self.turns[0].gold

    @property
    def population(self) -> int:
        return self.turns[0].population

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


def turn_domain(row: Mapping[str, Any], gold: str) -> str:
    """The domain a turn is about: the one domain of the slots its prediction or gold change
    sets, ``several`` when they span domains, ``none`` when neither sets anything."""
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


def allocate(sizes: Mapping[str, int], n: int, allocation: Allocation) -> dict[str, int]:
    """How many turns to draw from each stratum (never more than it has).

    ``equal``: water-filling, so small strata are taken whole and the rest share what is left;
    ``proportional``: largest remainders of ``n · N_h / N``. Ties break by stratum name.
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
        return out
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
    return out


def draw_sample(rows: Sequence[Mapping[str, Any]], *, n: int, gold: str, seed: int = 0,
                by_domain: bool = False, allocation: Allocation = "equal") -> Sample:
    """Draw ``n`` turns of a judge run, stratified by judge verdict × RULE-``gold`` verdict
    (× domain), without replacement within each stratum.

    Turns without a judge verdict (error rows) or RULE verdict cannot be placed in a stratum
    and are not part of the population. The same rows, options and seed give the same sample.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OptionError(f"--n must be a whole number >= 1 (got {n!r})")
    if allocation not in ALLOCATIONS:
        raise OptionError(f"unknown allocation {allocation!r}; choose from "
                          f"{', '.join(ALLOCATIONS)}")
    gold = resolve_version(gold, [v for row in rows for v in (row.get("rule") or {})])
    members: dict[str, list[int]] = {}
    placed: dict[int, tuple[bool, bool, str | None]] = {}
    for index, row in enumerate(rows):
        judge, rule = row.get("verdict"), (row.get("rule") or {}).get(gold)
        if not isinstance(judge, bool) or not isinstance(rule, bool):
            continue
        domain = turn_domain(row, gold) if by_domain else None
        name = f"judge={_verdict(judge)}, RULE-{gold}={_verdict(rule)}"
        if domain is not None:
            name += f", domain={domain}"
        members.setdefault(name, []).append(index)
        placed[index] = (judge, rule, domain)
    if not placed:
        raise OptionError("the run has no turn with both a judge and a RULE verdict")
    sizes = {h: len(m) for h, m in members.items()}
    counts = allocate(sizes, n, allocation)
    rng = np.random.default_rng(seed)
    chosen: dict[int, str] = {}
    for h in sorted(members):
        picks = rng.choice(sizes[h], size=counts[h], replace=False) if counts[h] else []
        chosen.update({members[h][int(i)]: h for i in picks})
    population = len(placed)
    turns = []
    for index in sorted(chosen):
        h = chosen[index]
        judge, rule, domain = placed[index]
        row = rows[index]
        turns.append(SampledTurn(
            dialogue_id=str(row["dialogue_id"]), turn_index=int(row["turn_index"]), stratum=h,
            judge=judge, rule=rule, domain=domain, stratum_size=sizes[h],
            stratum_sample=counts[h], inclusion_probability=counts[h] / sizes[h],
            weight=sizes[h] / counts[h], gold=gold, population=population, seed=seed,
            allocation=allocation))
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
    for line, text in iter_jsonl_lines(path):
        turn = parse_line(SampledTurn, text, path=path, line=line)
        if turn.key in seen:
            raise InputError(f"dialogue {turn.dialogue_id!r} turn {turn.turn_index} is drawn "
                             f"twice (line {seen[turn.key]})", path=path, line=line,
                             field="turn_index")
        seen[turn.key] = line
        if turns:
            for name in ("gold", "population", "seed", "allocation"):
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
    drawn = Counter(t.stratum for t in turns)
    for stratum, count in drawn.items():
        declared = turns[first[stratum]].stratum_sample
        if count != declared:
            raise InputError(f"stratum {stratum!r} declares {declared} drawn turns but the file "
                             f"holds {count}", path=path, line=lines[first[stratum]],
                             field="stratum_sample")
    return Sample(turns, path=str(path), lines=lines)


def check_sample(sample: Sample, rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a sample drawn from another run: every drawn turn must exist in ``rows`` with
    the judge and RULE verdicts it was drawn with."""
    by_key = {row_key(row): row for row in rows}
    for index, turn in enumerate(sample.turns):
        row = by_key.get(turn.key)
        line = sample.lines[index] if sample.lines else None
        if row is None:
            raise DataMismatchError(
                f"the sample draws dialogue {turn.dialogue_id!r} turn {turn.turn_index}, which "
                "the run does not hold (was it drawn from another run?)", path=sample.path,
                line=line, field="dialogue_id")
        rule = (row.get("rule") or {}).get(turn.gold)
        if row.get("verdict") is not turn.judge or rule is not turn.rule:
            raise DataMismatchError(
                f"dialogue {turn.dialogue_id!r} turn {turn.turn_index} was drawn with judge="
                f"{turn.judge}, RULE-{turn.gold}={turn.rule} but the run says judge="
                f"{row.get('verdict')}, RULE-{turn.gold}={rule} (was it drawn from another "
                "run?)", path=sample.path, line=line, field="judge")
