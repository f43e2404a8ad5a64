"""RULE turn verdicts (exact-match baselines RULE-M21 / RULE-M24) and their TSA."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..data import Schema, State, turn_states
from ._matching import MatchPolicy, parse_policy


def rule_verdicts(
    gold_states: Sequence[State],
    pred_turns: Sequence[State],
    policy: MatchPolicy,
    *,
    ignore_none_pairs: bool = False,
    none_values: Iterable[str] = ("none",),
) -> list[bool]:
    """Per turn: does the predicted turn state equal the gold turn state?

    The gold turn state holds the pairs of the gold cumulative state that are new or changed
    since the previous turn (alternatives-aware when the policy accepts alternatives); gold
    pairs with a ``none`` value are not part of the state. Under ``nospace`` the reference
    ignores the prediction's ``none`` deletion pairs.
    """
    nones = frozenset(none_values)
    separator = policy.separator if policy.alternatives else None
    gold_turns = turn_states([{s: v for s, v in g.items() if v not in nones} for g in gold_states],
                             separator=separator)
    verdicts = []
    for gold, pred in zip(gold_turns, pred_turns, strict=True):
        if ignore_none_pairs:
            pred = {s: v for s, v in pred.items() if v not in nones}
        verdicts.append(
            gold.keys() == pred.keys()
            and all(policy.matches(s, gold[s], pred[s]) for s in gold)
        )
    return verdicts


def rule_policy(match: str, schema: Schema) -> tuple[MatchPolicy, bool]:
    """The RULE policy for a base policy name: gold alternatives always accepted; under
    ``nospace`` the prediction's ``none`` pairs are ignored (the second value)."""
    policy = parse_policy(match if "alternatives" in match else f"{match}+alternatives",
                          time_slots=schema.time_slots, separator=schema.multi_value_separator)
    return policy, "nospace" in policy.steps
