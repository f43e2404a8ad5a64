"""What DST models' own evaluation code writes: mwzeval dicts, TRADE, SOM-DST and TripPy
dumps, and plain per-turn JSON Lines.

* **mwzeval** (the MultiWOZ_Evaluation package's input): ``{"sng0073": [{"state": {"taxi":
  {"leave": "17:15", ...}}, "response": ..., "active_domains": [...]}, ...]}``, one entry per
  turn, lower-case ids without ``.json``. Its slot names drop the domain and the ``book``
  prefix and shorten ``leaveat``/``arriveby`` to ``leave``/``arrive``; they are mapped back
  (``restaurant`` + ``day`` → ``restaurant-book day``, ``train`` + ``day`` → ``train-day``).
* **TRADE** (``all_prediction_TRADE.json``): ``{dialogue_id: {turn: {"turn_belief": [gold
  "domain-slot-value", ...], "pred_bs_ptr": [predicted ...]}}}``.
* **SOM-DST** (``preds_<epoch>.json``): ``{"<dialogue_id>_<turn>": [predicted, gold]}`` with
  "domain-slot-value" lists.
* **TripPy** (``pred_res.*.json``): a list of per-turn records with ``guid`` =
  ``[split, dialogue_id, turn]`` and ``slot_prediction_<slot>`` / ``slot_groundtruth_<slot>``
  values (``none`` = no value; a ``§§`` marker on informed values is removed).
* **per-turn JSON Lines**: one turn per line with ``dialogue_id``, ``turn_index`` (or
  ``turn_id``/``turn_idx``/``turn``) and a state (``pred_state``/``state``/``belief_state`` for
  predictions; ``gold_state*``/``state``/``belief_state`` plus ``system``/``user`` for
  dialogues) in any shape :func:`flat_state` reads.

The dumps hold no utterances; converted to dialogues (their gold side), turns have empty text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..._errors import InputError
from .._schema import Schema
from .._states import State
from ._common import (
    Check,
    Context,
    Fit,
    Located,
    Record,
    Source,
    first_item,
    flat_state,
    join,
    nested,
    paired_turns,
    triples,
)

TITLE_MWZEVAL = "mwzeval prediction dict ({id: [{state: {domain: {slot: value}}}]})"
TITLE_TRADE = "TRADE all_prediction dump ({id: {turn: {turn_belief, pred_bs_ptr}}})"
TITLE_SOMDST = "SOM-DST preds dump ({id_turn: [predicted, gold]})"
TITLE_TRIPPY = "TripPy pred_res dump (list of {guid, slot_prediction_*})"
TITLE_TURNS = "per-turn JSON Lines ({dialogue_id, turn_index, state} per line)"


def _record(dialogue_id: str, states: list[State], key: str, context: Context) -> Record:
    turns = []
    for index, state in enumerate(states):
        turn: Record = {"turn_index": index, key: state}
        if key != "pred_state":
            turn.update(system="", user="")
        turns.append(turn)
    record: Record = {"dialogue_id": dialogue_id, "turns": turns}
    if key == "pred_state" and context.system_name:
        record["system_name"] = context.system_name
    return record


# --- mwzeval --------------------------------------------------------------------------------

_MWZ_SHORT = {"leave": "leaveat", "arrive": "arriveby"}
_MWZ_LONG = {v: k for k, v in _MWZ_SHORT.items()}


def fit_mwzeval(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, dict) and bool(document), "(top level)",
               "expected an object keyed by dialogue id")
    if check.failed:
        return check.result()
    where, turns = first_item(document)
    check.need(isinstance(turns, list), where, "expected a list of turns")
    if check.failed:
        return check.result()
    check.need(bool(turns) and isinstance(turns[0], dict), join(where, 0),
               "expected turn objects")
    check.need(isinstance(turns[0].get("state") if turns and isinstance(turns[0], dict)
                          else None, dict), join(join(where, 0), "state"),
               "expected 'state': {domain: {slot: value}}")
    return check.result()


def mwzeval_slot(domain: str, slot: str, schema: Schema | None) -> str:
    """The native name of mwzeval's (domain, slot)."""
    short = slot.lower().replace(" ", "")
    candidates = [f"{domain}-{short}", f"{domain}-book {short}"]
    if short in _MWZ_SHORT:
        candidates.insert(0, f"{domain}-{_MWZ_SHORT[short]}")
    if schema is None:
        known = {"day": "book day", "people": "book people", "stay": "book stay",
                 "time": "book time"}
        if domain == "train" and short == "day":
            return "train-day"
        if short in _MWZ_SHORT:
            return candidates[0]
        return f"{domain}-{known.get(short, short)}"
    for candidate in candidates:
        found = schema.resolve_slot(candidate)
        if found is not None:
            return found
    return f"{domain}-{slot}"


def read_mwzeval(source: Source, context: Context) -> Iterator[Located]:
    for dialogue_id, turns in source.document.items():
        where = str(dialogue_id)
        if not isinstance(turns, list) or not turns:
            raise InputError("expected a non-empty list of turns", path=source.path, field=where)
        states = []
        for index, turn in enumerate(turns):
            field = join(where, index)
            state = turn.get("state") if isinstance(turn, dict) else None
            if not isinstance(state, dict):
                raise InputError("expected 'state': {domain: {slot: value}}",
                                 path=source.path, field=join(field, "state"))
            flat = {}
            for name, value in flat_state(state, join(field, "state"), source.path).items():
                domain, _, slot = name.partition("-")
                flat[mwzeval_slot(domain, slot, context.schema)] = value
            states.append(flat)
        yield where, _record(str(dialogue_id), states, "pred_state", context)


def _mwzeval_name(name: str) -> tuple[str, str]:
    domain, _, slot = name.partition("-")
    slot = slot.removeprefix("book ").replace(" ", "")
    return domain, _MWZ_LONG.get(slot, slot)


def write_mwzeval(records: list[Record], context: Context) -> dict[str, Any]:
    out = {}
    for record in records:
        key = record["dialogue_id"].lower().removesuffix(".json")
        out[key] = [{"response": "", "state": nested(t.get("pred_state") or {}, _mwzeval_name)}
                    for t in record["turns"]]
    return out


# --- TRADE ----------------------------------------------------------------------------------


def fit_trade(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, dict) and bool(document), "(top level)",
               "expected an object keyed by dialogue id")
    if check.failed:
        return check.result()
    where, turns = first_item(document)
    check.need(isinstance(turns, dict) and bool(turns), where,
               "expected an object keyed by turn number")
    if check.failed:
        return check.result()
    turn_where, turn = first_item(turns)
    check.need(isinstance(turn, dict) and ("pred_bs_ptr" in turn or "turn_belief" in turn),
               join(where, turn_where.strip("[]")), "expected 'turn_belief' / 'pred_bs_ptr'")
    return check.result()


def _trade_turns(source: Source) -> Iterator[tuple[str, str, list[tuple[str, Any]]]]:
    for dialogue_id, turns in source.document.items():
        where = str(dialogue_id)
        if not isinstance(turns, dict) or not turns:
            raise InputError("expected an object keyed by turn number", path=source.path,
                             field=where)
        try:
            ordered = sorted(turns.items(), key=lambda item: int(item[0]))
        except ValueError:
            raise InputError("turn keys must be numbers", path=source.path,
                             field=where) from None
        yield where, str(dialogue_id), ordered


def read_trade(source: Source, context: Context, *, gold: bool) -> Iterator[Located]:
    field = "turn_belief" if gold else "pred_bs_ptr"
    key = context.gold_key() if gold else "pred_state"
    for where, dialogue_id, ordered in _trade_turns(source):
        states = []
        for turn_key, turn in ordered:
            path = join(where, turn_key)
            if not isinstance(turn, dict) or field not in turn:
                raise InputError(f"expected '{field}'", path=source.path, field=path)
            states.append(flat_state(turn[field], join(path, field), source.path))
        yield where, _record(dialogue_id, states, key, context)


def write_trade(records: list[Record], context: Context,
                gold: list[Record] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for record, index, turn, gold_state in paired_turns(records, gold):
        out.setdefault(record["dialogue_id"], {})[str(index)] = {
            "turn_belief": triples(gold_state),
            "pred_bs_ptr": triples(turn.get("pred_state") or {})}
    return out


# --- SOM-DST --------------------------------------------------------------------------------

_TURN_SUFFIX = re.compile(r"^(.+)_(\d+)$")


def fit_somdst(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, dict) and bool(document), "(top level)",
               "expected an object keyed by '<dialogue id>_<turn>'")
    if check.failed:
        return check.result()
    key = next(iter(document))
    check.need(_TURN_SUFFIX.match(str(key)) is not None, str(key),
               "keys are '<dialogue id>_<turn>'")
    value = document[key]
    check.need(isinstance(value, list) and len(value) == 2
               and all(isinstance(v, list) for v in value), str(key),
               "expected [predicted, gold] lists")
    return check.result()


def read_somdst(source: Source, context: Context, *, gold: bool) -> Iterator[Located]:
    key = context.gold_key() if gold else "pred_state"
    by_dialogue: dict[str, dict[int, tuple[str, Any]]] = {}
    for name, value in source.document.items():
        match = _TURN_SUFFIX.match(str(name))
        if match is None or not isinstance(value, list) or len(value) != 2:
            raise InputError("expected '<dialogue id>_<turn>': [predicted, gold]",
                             path=source.path, field=str(name))
        by_dialogue.setdefault(match.group(1), {})[int(match.group(2))] = (
            str(name), value[1 if gold else 0])
    for dialogue_id, turns in by_dialogue.items():
        states = [flat_state(turns[i][1], turns[i][0], source.path) for i in sorted(turns)]
        yield dialogue_id, _record(dialogue_id, states, key, context)


def write_somdst(records: list[Record], context: Context,
                 gold: list[Record] | None = None) -> dict[str, Any]:
    return {f"{record['dialogue_id']}_{index}": [triples(turn.get("pred_state") or {}),
                                                 triples(gold_state)]
            for record, index, turn, gold_state in paired_turns(records, gold)}


# --- TripPy ---------------------------------------------------------------------------------

_PRED, _GOLD = "slot_prediction_", "slot_groundtruth_"


def fit_trippy(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, list) and bool(document), "(top level)",
               "expected a list of per-turn records")
    if check.failed:
        return check.result()
    first = document[0]
    check.need(isinstance(first, dict) and isinstance(first.get("guid"), (list, str)),
               "[0].guid", "expected 'guid': [split, dialogue id, turn]")
    check.need(isinstance(first, dict) and any(k.startswith(_PRED) for k in first),
               "[0].slot_prediction_*", "expected slot_prediction_<slot> values")
    return check.result()


def _guid(value: Any) -> tuple[str, int] | None:
    parts = value.split("-") if isinstance(value, str) else value
    if not isinstance(parts, list) or len(parts) < 3:
        return None
    try:
        return "-".join(str(p) for p in parts[1:-1]), int(parts[-1])
    except ValueError:
        return None


def read_trippy(source: Source, context: Context, *, gold: bool) -> Iterator[Located]:
    prefix = _GOLD if gold else _PRED
    key = context.gold_key() if gold else "pred_state"
    by_dialogue: dict[str, dict[int, tuple[str, State]]] = {}
    for position, item in enumerate(source.document):
        where = f"[{position}]"
        guid = _guid(item.get("guid")) if isinstance(item, dict) else None
        if guid is None:
            raise InputError("expected 'guid': [split, dialogue id, turn]", path=source.path,
                             field=join(where, "guid"))
        values = {k[len(prefix):]: (v.removeprefix("§§").strip() if isinstance(v, str) else v)
                  for k, v in item.items() if k.startswith(prefix)}
        by_dialogue.setdefault(guid[0], {})[guid[1]] = (
            where, flat_state(values, where, source.path))
    for dialogue_id, turns in by_dialogue.items():
        first = turns[min(turns)][0]
        yield first, _record(dialogue_id, [turns[i][1] for i in sorted(turns)], key, context)


def write_trippy(records: list[Record], context: Context,
                 gold: list[Record] | None = None) -> list[dict[str, Any]]:
    names = list(context.schema.slot_names) if context.schema else []
    out = []
    for record, index, turn, gold_state in paired_turns(records, gold):
        pred = turn.get("pred_state") or {}
        item: dict[str, Any] = {"guid": ["test", record["dialogue_id"], str(index)]}
        for slot in names or sorted(pred.keys() | gold_state.keys()):
            item[_PRED + slot] = pred.get(slot, "none")
            item[_GOLD + slot] = gold_state.get(slot, "none")
        out.append(item)
    return out


# --- per-turn JSON Lines --------------------------------------------------------------------

_ID_KEYS = ("dialogue_id", "dial_id", "dialogue")
_TURN_KEYS = ("turn_index", "turn_id", "turn_idx", "turn")
_PRED_KEYS = ("pred_state", "pred_turn_state", "state", "belief_state", "prediction")
_GOLD_KEYS = ("state", "belief_state")


def fit_turns(record: Any) -> Fit:
    check = Check()
    check.need(isinstance(record, dict), "(line 1)", "expected one JSON object per line")
    if check.failed:
        return check.result()
    check.need(any(k in record for k in _ID_KEYS), "dialogue_id",
               "expected 'dialogue_id' on every line")
    check.need("turns" not in record, "turns",
               "a line with 'turns' is a whole dialogue (native format)")
    check.need(any(k in record for k in _TURN_KEYS), "turn_index",
               "expected 'turn_index' (or turn_id / turn_idx / turn) on every line")
    return check.result()


def _turn_lines(source: Source) -> dict[str, list[tuple[int, int, dict[str, Any]]]]:
    by_dialogue: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    for line, record in source.records():
        if not isinstance(record, dict):
            raise InputError("expected a JSON object", path=source.path, line=line)
        dialogue_id = next((record[k] for k in _ID_KEYS if k in record), None)
        turn = next((record[k] for k in _TURN_KEYS if k in record), None)
        if not isinstance(dialogue_id, str) or not dialogue_id:
            raise InputError("expected 'dialogue_id'", path=source.path, line=line,
                             field="dialogue_id")
        if isinstance(turn, str) and turn.isdigit():
            turn = int(turn)
        if not isinstance(turn, int) or isinstance(turn, bool):
            raise InputError("expected a turn number", path=source.path, line=line,
                             field="turn_index")
        by_dialogue.setdefault(dialogue_id, []).append((turn, line, record))
    return by_dialogue


def read_turns(source: Source, context: Context, *, gold: bool) -> Iterator[Located]:
    for dialogue_id, rows in _turn_lines(source).items():
        rows.sort(key=lambda row: row[0])
        turns = []
        for index, (_, line, record) in enumerate(rows):
            turn: Record = {"turn_index": index}
            if gold:
                turn["system"] = str(record.get("system", ""))
                turn["user"] = str(record.get("user", ""))
                versions = {k: v for k, v in record.items() if k.startswith("gold_state")}
                if not versions:
                    found = next((k for k in _GOLD_KEYS if k in record), None)
                    if found is None:
                        raise InputError("expected 'gold_state' (or state / belief_state)",
                                         path=source.path, line=line, field="gold_state")
                    versions = {context.gold_key(): record[found]}
                for name, value in versions.items():
                    turn[name] = flat_state(value, name, source.path)
            else:
                found = next((k for k in _PRED_KEYS if k in record), None)
                if found is None:
                    raise InputError("expected 'pred_state' (or state / belief_state)",
                                     path=source.path, line=line, field="pred_state")
                target = "pred_turn_state" if found == "pred_turn_state" else "pred_state"
                turn[target] = flat_state(record[found], found, source.path, keep_absent=(
                    target == "pred_turn_state"))
                if "pred_turn_state" in record and target == "pred_state":
                    turn["pred_turn_state"] = flat_state(record["pred_turn_state"],
                                                         "pred_turn_state", source.path,
                                                         keep_absent=True)
            turns.append(turn)
        record_out: Record = {"dialogue_id": dialogue_id, "turns": turns}
        if not gold and context.system_name:
            record_out["system_name"] = context.system_name
        yield f"line {rows[0][1]}", record_out


def write_turns(records: list[Record], context: Context, *, gold: bool) -> list[dict[str, Any]]:
    out = []
    for record in records:
        for turn in record["turns"]:
            row: dict[str, Any] = {"dialogue_id": record["dialogue_id"],
                                   "turn_index": turn["turn_index"]}
            if gold:
                row.update({k: v for k, v in turn.items() if k in ("system", "user")
                            or (k.startswith("gold_state"))})
            else:
                row["pred_state"] = turn.get("pred_state") or {}
                if turn.get("pred_turn_state") is not None:
                    row["pred_turn_state"] = turn["pred_turn_state"]
            out.append(row)
    return out
