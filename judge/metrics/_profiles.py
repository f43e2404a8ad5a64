"""Scoring profiles: the value conventions DST papers use, as named presets.

Papers report "JGA" under different conventions, and the choice moves the figure by several
points. A profile fixes the whole convention of one reference implementation: which values
count (``none``, ``dontcare``), how values are normalised, how one value is compared with
another (exact, fuzzy, alternatives), and which figures that implementation reports. The rules
are written out in :data:`PROFILES` (and in ``docs/PROFILES.md``); they are our own reading of
each implementation's published code, re-implemented here, not copied.

Every profile scores one predicted slot against one gold slot in [0, 1]; a turn's joint score
is the product over the slots active on either side (a slot on one side only scores 0), so
exact profiles give the usual 0/1 JGA and SGD's fuzzy matching its fractional one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..data import DialogueSet, PredictionSet, Schema, State
from ._types import f1, ratio

Side = str  # "gold" or "pred"


@dataclass(frozen=True)
class Profile:
    """One named scoring convention."""

    name: str
    title: str
    reference: str
    rules: tuple[str, ...]
    headline: tuple[str, ...]
    prepare: Callable[[str, str, Side, Schema], list[str] | None]
    """(slot, value, side, schema) → the value's comparable forms (several for gold
    alternatives), or None when the value does not count."""
    compare: Callable[[str, list[str], list[str], Schema], float]
    """(slot, gold forms, predicted forms, schema) → score in [0, 1]."""
    keep_slot: Callable[[str, Side, Schema], bool] = lambda slot, side, schema: True


# --- value helpers --------------------------------------------------------------------------

_WS = re.compile(r"\s+")


def _none(value: str) -> bool:
    return value.strip().lower() in ("", "none", "not mentioned")


def _tail(slot: str) -> str:
    """The slot without domain, ``book`` prefix or spaces: ``restaurant-book time`` → ``time``."""
    return slot.split("-", 1)[-1].removeprefix("book ").replace(" ", "")


def _exact(slot: str, gold: list[str], pred: list[str], schema: Schema) -> float:
    return 1.0 if pred[0] == gold[0] else 0.0


def _any_overlap(slot: str, gold: list[str], pred: list[str], schema: Schema) -> float:
    return 1.0 if set(gold) & set(pred) else 0.0


# --- TRADE ----------------------------------------------------------------------------------


def _trade_prepare(slot: str, value: str, side: Side, schema: Schema) -> list[str] | None:
    return None if _none(value) else [value]


# --- mwzeval --------------------------------------------------------------------------------

_TYPE_FORMS = {"swimming pool": "swimmingpool", "night club": "nightclub",
               "guest house": "guesthouse", "mutliple sports": "multiple sports"}
_AMPM = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)$")


def _mwz_time(value: str) -> str:
    """Times as ``HH:MM``: ``by 7pm``, ``after 17:15``, ``1715``, ``9:30`` and so on."""
    text = value.strip().lower()
    for prefix in ("by ", "after ", "afer "):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    text = text.rstrip(".,?")
    match = _AMPM.match(text)
    if match:
        hour = int(match.group(1)) % 12 + (12 if match.group(3).startswith("p") else 0)
        return f"{hour:02d}:{match.group(2) or '00'}"
    if text.isdigit() and len(text) == 4:
        return f"{text[:2]}:{text[2:]}"
    if text.isdigit() and len(text) <= 2:
        return f"{int(text):02d}:00"
    text = text.replace(" ", "")
    if re.fullmatch(r"\d:\d{2}", text):
        return "0" + text
    return text


def _mwz_prepare(slot: str, value: str, side: Side, schema: Schema) -> list[str] | None:
    if _none(value):
        return None
    text = value.split(schema.multi_value_separator)[0].strip().lower()
    if side == "gold" and text == "dontcare":
        return None  # the reference reads its gold states without dontcare
    tail = _tail(slot)
    if tail in ("name", "destination", "departure"):
        text = text.replace(" & ", " and ").replace("&", " and ").replace(" '", "'")
    elif tail == "type":
        text = _TYPE_FORMS.get(text, text)
    elif slot in schema.time_slots or tail in ("leaveat", "arriveby", "time"):
        text = _mwz_time(text)
    elif tail in ("parking", "internet") and text == "free":
        text = "yes"
    return [text]


def _partial_ratio(left: str, right: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.partial_ratio(left, right))


def _mwz_compare(slot: str, gold: list[str], pred: list[str], schema: Schema) -> float:
    return 1.0 if _partial_ratio(pred[0], gold[0]) > 95 else 0.0


# --- SGD ------------------------------------------------------------------------------------


def _sgd_prepare(slot: str, value: str, side: Side, schema: Schema) -> list[str] | None:
    if _none(value):
        return None
    if side == "gold":
        return value.split(schema.multi_value_separator)
    return [value]  # a prediction is one value, never split


def _sgd_compare(slot: str, gold: list[str], pred: list[str], schema: Schema) -> float:
    spec = schema.slots.get(slot)
    if spec is not None and spec.is_categorical:
        return 1.0 if pred[0] == gold[0] else 0.0
    from rapidfuzz import fuzz, utils

    # fuzzywuzzy's token_sort_ratio (which SGD's script calls) first folds case and
    # punctuation; rapidfuzz does that only when asked.
    return max(fuzz.token_sort_ratio(option, pred[0], processor=utils.default_process) / 100.0
               for option in gold)


# --- ConvLab-3 ------------------------------------------------------------------------------


def _convlab_prepare(slot: str, value: str, side: Side, schema: Schema) -> list[str] | None:
    forms = ["".join(v.split()).lower() for v in value.split(schema.multi_value_separator)]
    forms = [f for f in forms if f]
    return forms or None


def _in_schema(slot: str, side: Side, schema: Schema) -> bool:
    return slot in schema.slots


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile(
        "trade", "TRADE-style exact match",
        "TRADE (Wu et al., 2019), evaluation in its model code; SOM-DST and most "
        "MultiWOZ papers report the same",
        ("a state is the set of domain-slot-value triples; none and empty values are dropped "
         "on both sides, dontcare is a value",
         "values compare as identical strings (no case folding, no alternatives: a gold "
         "'a|b' is one string)",
         "joint goal accuracy: the turn's two sets are equal; final-turn JGA: the same on each "
         "dialogue's last turn (SOM-DST's 'final joint accuracy')",
         "slot accuracy: (K - gold slots missed - other predicted slots wrong) / K with K the "
         "schema's slot count (30 on MultiWOZ)",
         "joint F1: per turn F1 of the triples, 1 when gold and prediction are both empty and "
         "0 when only gold is, averaged over turns"),
        ("jga", "final_turn_jga", "slot_accuracy", "turn_f1"),
        _trade_prepare, _exact),
    Profile(
        "mwzeval", "mwzeval-style fuzzy matching",
        "MultiWOZ_Evaluation (mwzeval) get_dst: fuzzy match with partial ratio above 95",
        ("values are lower-cased and normalised as mwzeval does: names ('&' -> 'and', "
         "\" '\" -> \"'\"), types ('guest house' -> 'guesthouse', 'swimming pool' -> "
         "'swimmingpool', 'night club' -> 'nightclub'), times to HH:MM ('7pm', '1715', "
         "'after 17:15'), 'free' -> 'yes' for parking and internet",
         "gold dontcare values are dropped (mwzeval reads its gold states without them; a "
         "predicted dontcare stays and counts as a false positive); a gold 'a|b' keeps 'a'",
         "a predicted value matches when its partial ratio with the gold value is above 95",
         "joint goal accuracy: same slots on both sides and every value matching",
         "slot precision / recall / F1 pooled over all turns: a wrong value is a false "
         "positive and a false negative"),
        ("jga", "final_turn_jga", "slot_precision", "slot_recall", "slot_f1"),
        _mwz_prepare, _mwz_compare),
    Profile(
        "sgd", "SGD-style: fuzzy for non-categorical slots",
        "Schema-Guided Dialogue evaluation (Rastogi et al., 2020)",
        ("categorical slots (is_categorical in the schema): the prediction must equal the "
         "first gold value exactly",
         "non-categorical slots: token sort ratio / 100 against the best of the gold "
         "alternatives ('a|b'), a score in [0, 1]",
         "a slot on one side only scores 0; a prediction is never split into alternatives",
         "joint goal accuracy: mean over turns of the product of the slot scores (so it is "
         "fractional); per turn over all services, where SGD averages per service frame "
         "(identical for single-service dialogues)",
         "average goal accuracy: mean slot score over the slots active in gold"),
        ("jga", "final_turn_jga", "aga"),
        _sgd_prepare, _sgd_compare),
    Profile(
        "convlab", "ConvLab-3-style normalisation",
        "ConvLab-3 evaluate_unified_datasets (dst)",
        ("values are lower-cased with every whitespace removed; both gold and predicted "
         "values are split on '|' and any shared alternative matches",
         "only schema slots count: predicted slots outside the schema are ignored",
         "joint goal accuracy ('accuracy'): every gold slot matched and no other slot "
         "predicted",
         "slot precision / recall / F1 pooled over turns: a wrong value is a false positive "
         "and a false negative"),
        ("jga", "final_turn_jga", "slot_precision", "slot_recall", "slot_f1"),
        _convlab_prepare, _any_overlap, keep_slot=_in_schema),
)}
PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


# --- scoring --------------------------------------------------------------------------------


@dataclass
class _Turn:
    scores: dict[str, float]
    gold: int
    pred: int
    gold_slots: set[str]


def _prepared(state: State, side: Side, profile: Profile, schema: Schema
              ) -> dict[str, list[str]]:
    out = {}
    for slot, value in state.items():
        if not profile.keep_slot(slot, side, schema):
            continue
        forms = profile.prepare(slot, value, side, schema)
        if forms:
            out[slot] = forms
    return out


def _score_turn(gold: State, pred: State, profile: Profile, schema: Schema,
                cache: dict[Any, float]) -> _Turn:
    g = _prepared(gold, "gold", profile, schema)
    p = _prepared(pred, "pred", profile, schema)
    scores = {}
    for slot in g.keys() | p.keys():
        if slot in g and slot in p:
            key = (slot, tuple(g[slot]), tuple(p[slot]))
            if key not in cache:
                cache[key] = profile.compare(slot, g[slot], p[slot], schema)
            scores[slot] = cache[key]
        else:
            scores[slot] = 0.0
    return _Turn(scores, len(g), len(p), set(g))


def _figures(turns: list[tuple[bool, _Turn]], num_slots: int) -> dict[str, float | None]:
    joint = [math.prod(t.scores.values()) for _, t in turns]
    final = [math.prod(t.scores.values()) for last, t in turns if last]
    wrong = [sum(1 for s in t.scores.values() if s < 1.0) for _, t in turns]
    tp = sum(sum(s for slot, s in t.scores.items() if slot in t.gold_slots and t.pred and s > 0)
             for _, t in turns)
    n_gold = sum(t.gold for _, t in turns)
    n_pred = sum(t.pred for _, t in turns)
    precision, recall = ratio(tp, n_pred), ratio(tp, n_gold)
    turn_f1 = []
    for _, t in turns:
        hits = sum(1 for slot, s in t.scores.items() if slot in t.gold_slots and s >= 1.0)
        if t.gold == 0:
            turn_f1.append(1.0 if t.pred == 0 else 0.0)
            continue
        p = hits / t.pred if t.pred else 0.0
        r = hits / t.gold
        turn_f1.append(2 * p * r / (p + r) if p + r else 0.0)
    active = [sum(t.scores[s] for s in t.gold_slots) / len(t.gold_slots)
              for _, t in turns if t.gold_slots]
    return {
        "jga": ratio(sum(joint), len(joint)),
        "final_turn_jga": ratio(sum(final), len(final)),
        "slot_accuracy": ratio(sum((num_slots - w) / num_slots for w in wrong), len(wrong)),
        "aga": ratio(sum(active), len(active)),
        "slot_precision": precision,
        "slot_recall": recall,
        "slot_f1": f1(precision, recall),
        "turn_f1": ratio(sum(turn_f1), len(turn_f1)),
        "turns": len(turns),
    }


def score_profile(dialogues: DialogueSet, predictions: PredictionSet, schema: Schema,
                  profile: str | Profile, *, gold: str | None = None,
                  num_slots: int | None = None) -> dict[str, Any]:
    """Score one system under one profile against one annotation version.

    Returns the profile's figures (percent), the headline names, the per-domain JGA
    (dialogues whose gold or prediction uses the domain, the states restricted to it) and
    the profile's rules, so a report can print them beside the figures.
    """
    chosen = get_profile(profile) if isinstance(profile, str) else profile
    version = dialogues.resolve_version(gold)
    cache: dict[Any, float] = {}
    turns: list[tuple[bool, _Turn]] = []
    domains: dict[str, list[tuple[bool, _Turn]]] = {}
    for dialogue in dialogues.dialogues:
        pred = predictions.for_dialogue(dialogue)
        used: set[str] = set()
        scored = []
        last = len(dialogue.turns) - 1
        for index, (turn, p_turn) in enumerate(zip(dialogue.turns, pred.turns, strict=True)):
            g_state, p_state = turn.gold_states[version], p_turn.pred_state or {}
            item = _score_turn(g_state, p_state, chosen, schema, cache)
            turns.append((index == last, item))
            scored.append((index == last, g_state, p_state))
            used |= {schema.domain_of(s) for s in item.scores}
        for domain in used:
            def keep(state: State, name: str = domain) -> State:
                return {s: v for s, v in state.items() if schema.domain_of(s) == name}

            domains.setdefault(domain, []).extend(
                (is_last, _score_turn(keep(g), keep(p), chosen, schema, cache))
                for is_last, g, p in scored)
    k = num_slots or len(schema.slot_names)
    figures = _figures(turns, k)
    per_domain = {d: _figures(domains[d], k)["jga"] for d in schema.domain_names if d in domains}
    return {"profile": chosen.name, "gold": version, "figures": figures,
            "headline": list(chosen.headline), "per_domain_jga": per_domain,
            "rules": list(chosen.rules), "reference": chosen.reference}


def get_profile(name: str) -> Profile:
    from .._errors import OptionError

    if name not in PROFILES:
        raise OptionError(f"unknown scoring profile {name!r}; choose from "
                          f"{', '.join(PROFILE_NAMES)}")
    return PROFILES[name]


def profile_table(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flatten :func:`score_profile` results into table rows (one per system × profile ×
    version) with the profile's headline figures."""
    out = []
    for row in rows:
        item = {"system": row.get("system", ""), "profile": row["profile"], "gold": row["gold"]}
        item.update({name: row["figures"][name] for name in row["headline"]})
        out.append(item)
    return out
