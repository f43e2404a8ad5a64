"""The order in which to review label-error candidates: the one that moves the corrected gold
furthest for the reviewer's time.

Ranking candidates by how likely each is a real annotation error finds errors, but a reviewer
who wants a better JGA wants more: a turn counts for JGA only when every slot of it is right,
and a fix reaches every later turn that carries the wrong value. So the order works on what a
review can gain. For every system and turn whose predicted state differs from the audited gold,
it collects the candidates whose fixes would together make the gold equal the prediction there
(one per differing slot, each covering that turn); such a set is worth the number of (system,
turn) pairs it would complete, times the chance that every candidate in it is a real error. The
order then takes, again and again, the set with the most expected gain per review still to be
done, reviews its candidates (the most likely error first), and carries on; candidates that
complete nothing come last, by their evidence score.

The chance that a candidate is a real error is its evidence score mapped through a logistic
curve whose two constants were fitted on the first half of the MultiWOZ 2.1 test dialogues
against 2.4 (``bench/review_order.py --tune``); the order itself never reads another annotation
version.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..data import Dialogue, DialogueSet, State, dialogue_key
from ._audit_inputs import AuditSource
from ._candidates import Candidate

#: Logistic calibration of the evidence score (logit) into P(real error): ``a · logit + b``.
CALIBRATION: tuple[float, float] = (0.789, -0.933)


def error_chance(candidate: Candidate, calibration: tuple[float, float] = CALIBRATION) -> float:
    """The calibrated chance that a candidate is a real error of the audited gold."""
    scale, shift = calibration
    return 1.0 / (1.0 + math.exp(-(scale * candidate.logit + shift)))


@dataclass(frozen=True)
class OrderTradeoff:
    """What choosing the order costs and gains, as ``bench/review_order.py`` measured it on the
    held-out half of the shared MultiWOZ test set with 2.4 as the reviewer of 2.1 (a test
    checks these against ``bench/results/review_order.json``)."""

    reviews: int
    review_fixed: float
    """Share (%) of the wrongly annotated turns brought to 2.4 after ``reviews`` reviews in
    review order ..."""
    evidence_fixed: float
    """... and in evidence order."""
    review_head: int
    """Share (%) of real errors among the first 50 candidates in review order ..."""
    evidence_head: int
    """... and in evidence order."""

    def sentence(self) -> str:
        return (f"Whole turns first (the review order) gathers the candidates that together "
                f"make a turn right, so reviews move JGA sooner: on MultiWOZ 2.1 with 2.4 as "
                f"the reviewer, {self.reviews} reviews fix {self.review_fixed:.1f} % of the "
                f"wrongly annotated turns against {self.evidence_fixed:.1f} % in evidence "
                f"order. But fewer of its first candidates are real errors: "
                f"{self.review_head} % of the first 50 against {self.evidence_head} % in "
                "evidence order (the most likely errors first).")


ORDER_TRADEOFF = OrderTradeoff(reviews=250, review_fixed=31.4, evidence_fixed=19.5,
                               review_head=68, evidence_head=98)


def fix_span(candidate: Candidate, dialogues: DialogueSet, gold: str) -> range:
    """The turns a fix of the candidate covers by default: its turn and the following turns
    whose gold value of the slot stays the same (what ``corrections apply`` carries)."""
    dialogue = dialogues.get(candidate.dialogue_id)
    if dialogue is None:
        return range(candidate.turn_index, candidate.turn_index + 1)
    return dialogue_fix_span(candidate, dialogue, gold)


def dialogue_fix_span(candidate: Candidate, dialogue: Dialogue, gold: str) -> range:
    """:func:`fix_span` within the candidate's own dialogue."""
    wrong = dialogue.turns[candidate.turn_index].gold_states[gold].get(candidate.slot)
    end = candidate.turn_index + 1
    while end < len(dialogue.turns) and \
            dialogue.turns[end].gold_states[gold].get(candidate.slot) == wrong:
        end += 1
    return range(candidate.turn_index, end)


@dataclass
class _Bundle:
    members: frozenset[int]
    pairs: int
    chance: float


def review_order(candidates: Sequence[Candidate], dialogues: DialogueSet,
                 sources: Sequence[AuditSource], *, gold: str | None = None,
                 calibration: tuple[float, float] = CALIBRATION) -> list[Candidate]:
    """The candidates in review order (see the module docstring), ranks renumbered."""
    version = dialogues.resolve_version(gold)
    chance = [error_chance(c, calibration) for c in candidates]
    covering = covering_turns(candidates, version, dialogues.get)
    pairs: dict[frozenset[int], int] = defaultdict(int)
    for dialogue in dialogues.dialogues:
        key = dialogue_key(dialogue.dialogue_id)
        count_pairs(key, [t.gold_states[version] for t in dialogue.turns],
                    [source.states.get(key) for source in sources], covering, chance, pairs)
    return order_by_pairs(candidates, chance, pairs)


Covering = dict[tuple[str, int, str, str | None], list[int]]
"""(dialogue key, turn, slot, proposed value) → positions of the candidates whose fix
covers it."""


def covering_turns(candidates: Sequence[Candidate], version: str,
                   dialogue_of: Callable[[str], Dialogue | None]) -> Covering:
    """Which candidates' fixes cover each (turn, slot, value), by position in ``candidates``."""
    covering: Covering = defaultdict(list)
    for position, candidate in enumerate(candidates):
        key = dialogue_key(candidate.dialogue_id)
        dialogue = dialogue_of(candidate.dialogue_id)
        span = (dialogue_fix_span(candidate, dialogue, version) if dialogue is not None
                else range(candidate.turn_index, candidate.turn_index + 1))
        for turn in span:
            covering[(key, turn, candidate.slot, candidate.predicted)].append(position)
    return covering


def count_pairs(key: str, golds: Sequence[State], sources: Sequence[Sequence[State] | None],
                covering: Covering, chance: Sequence[float],
                pairs: dict[frozenset[int], int]) -> None:
    """Add one dialogue's (system, turn) pairs to ``pairs``: each pair whose differing slots
    all have a covering candidate counts for the set of them (the likeliest per slot). One
    dialogue at a time, so a streamed audit counts them as it reads."""
    for states in sources:
        if states is None:
            continue
        for turn, (predicted, annotated) in enumerate(zip(states, golds, strict=True)):
            if predicted == annotated:
                continue
            needed: set[int] = set()
            for slot in set(predicted) | set(annotated):
                if predicted.get(slot) == annotated.get(slot):
                    continue
                found = covering.get((key, turn, slot, predicted.get(slot)))
                if not found:
                    needed.clear()
                    break
                needed.add(max(found, key=lambda p: chance[p]))
            if needed:
                pairs[frozenset(needed)] += 1


def order_by_pairs(candidates: Sequence[Candidate], chance: Sequence[float],
                   pairs: dict[frozenset[int], int]) -> list[Candidate]:
    """The greedy order over the counted pairs (see the module docstring), ranks renumbered.
    ``pairs`` is read in its insertion order, which breaks ties."""
    # a product in a fixed order: a set's order (how it was built) would move the last bits
    bundles = [_Bundle(members, count, math.prod(chance[p] for p in sorted(members)))
               for members, count in pairs.items()]
    of_candidate: dict[int, list[int]] = defaultdict(list)
    for index, bundle in enumerate(bundles):
        for position in bundle.members:
            of_candidate[position].append(index)
    reviewed: set[int] = set()
    order: list[int] = []

    def priority(index: int) -> float:
        bundle = bundles[index]
        left = len(bundle.members - reviewed)
        return bundle.pairs * bundle.chance / left if left else 0.0

    heap = [(-priority(i), i) for i in range(len(bundles))]
    heapq.heapify(heap)
    done: set[int] = set()
    while heap:
        negative, index = heapq.heappop(heap)
        if index in done:
            continue
        current = priority(index)
        if current <= 0.0:
            done.add(index)
            continue
        if -negative > current + 1e-12 or -negative < current - 1e-12:
            heapq.heappush(heap, (-current, index))
            continue
        done.add(index)
        # ties by position: a set's order of its members depends on how it was built
        new = sorted(bundles[index].members - reviewed, key=lambda p: (-chance[p], p))
        for position in new:
            reviewed.add(position)
            order.append(position)
            for other in of_candidate[position]:
                if other not in done:
                    heapq.heappush(heap, (-priority(other), other))
    rest = [p for p in range(len(candidates)) if p not in reviewed]
    order.extend(sorted(rest, key=lambda p: -chance[p]))
    ranked = [candidates[p] for p in order]
    for rank, candidate in enumerate(ranked, start=1):
        candidate.rank = rank
    return ranked
