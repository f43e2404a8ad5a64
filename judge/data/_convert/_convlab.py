"""ConvLab-3's unified data format: dialogues, DST prediction samples and the ontology.

Dialogues (``dialogues.json``, or a dict of splits as ``load_dataset`` returns) are a list of
objects with ``dataset``, ``data_split``, ``dialogue_id`` (``multiwoz21-test-0``), often an
``original_id`` (``PMUL4398.json``), and ``turns`` alternating ``speaker`` ``user`` and
``system`` with ``utterance`` and ``utt_idx``. User turns carry the full ``state``
``{domain: {slot: value}}`` where ``""`` means no value and ``|`` separates alternatives.
Slot names are ConvLab's (``price range``, ``book day``, ``arrive by``); loading with a schema
maps them to its names (counted and reported).

DST predictions (what ConvLab's ``merge_predict_res`` writes and ``evaluate_unified_datasets``
reads) are a list of user-turn samples with the gold ``state``, ``utt_idx`` and
``predictions: {"state": ...}``; they name no dialogue, so a sample with ``utt_idx`` 0 starts the
next dialogue of the dialogues file (in its order), unless samples carry a ``dialogue_id``.

The ontology (``ontology.json``) has ``domains: {domain: {description, slots: {slot:
{description, is_categorical, possible_values}}}}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..._errors import DataMismatchError, InputError
from .._states import State
from ._common import (
    Check,
    Context,
    Fit,
    Located,
    Record,
    Source,
    flat_state,
    gold_key,
    join,
    paired_turns,
)

TITLE_DIALOGUES = "ConvLab-3 unified dialogues.json"
TITLE_PREDICTIONS = "ConvLab-3 DST predictions (merge_predict_res output)"
TITLE_ONTOLOGY = "ConvLab-3 unified ontology.json"
_SPLITS = ("test", "validation", "train")


def _dialogue_list(document: Any) -> Any:
    if isinstance(document, dict) and any(k in document for k in _SPLITS):
        joined: list[Any] = []
        for split in _SPLITS:
            joined.extend(document.get(split) or [])
        return joined
    return document


def fit_dialogues(document: Any) -> Fit:
    check = Check()
    dialogues = _dialogue_list(document)
    check.need(isinstance(dialogues, list) and bool(dialogues), "(top level)",
               "expected a list of dialogues (or a dict of splits)")
    if check.failed:
        return check.result()
    first = dialogues[0]
    check.need(isinstance(first, dict) and isinstance(first.get("turns"), list)
               and bool(first["turns"]), "[0].turns", "expected a 'turns' list")
    if check.failed:
        return check.result()
    turn = first["turns"][0]
    check.need(isinstance(turn, dict) and "utt_idx" in turn, "[0].turns[0].utt_idx",
               "expected 'utt_idx'")
    check.need(isinstance(turn, dict) and turn.get("speaker") in ("user", "system"),
               "[0].turns[0].speaker", "expected 'user' or 'system'")
    return check.result()


def fit_predictions(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, list) and bool(document), "(top level)",
               "expected a list of user-turn samples")
    if check.failed:
        return check.result()
    first = document[0]
    check.need(isinstance(first, dict) and "utt_idx" in first, "[0].utt_idx",
               "expected 'utt_idx'")
    if check.failed:
        return check.result()
    check.need(isinstance(first.get("predictions"), dict)
               and isinstance(first["predictions"].get("state"), dict),
               "[0].predictions.state", "expected 'predictions': {'state': ...}")
    return check.result()


def fit_ontology(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, dict) and isinstance(document.get("domains"), dict),
               "domains", "expected 'domains' as an object of domains")
    if check.failed:
        return check.result()
    name = next(iter(document["domains"]), None)
    domain = document["domains"].get(name) if name is not None else None
    check.need(isinstance(domain, dict) and isinstance(domain.get("slots"), dict),
               f"domains.{name}.slots", "expected 'slots' as an object of slots")
    return check.result()


def read_dialogues(source: Source, context: Context) -> Iterator[Located]:
    gold_key = context.gold_key()
    for position, dialogue in enumerate(_dialogue_list(source.document)):
        where = f"[{position}]"
        if not isinstance(dialogue, dict) or not isinstance(dialogue.get("turns"), list):
            raise InputError("expected a dialogue with a 'turns' list", path=source.path,
                             field=where)
        dialogue_id = dialogue.get("original_id") or dialogue.get("dialogue_id")
        if not isinstance(dialogue_id, str) or not dialogue_id:
            raise InputError("expected a 'dialogue_id' (or 'original_id')",
                             path=source.path, field=join(where, "dialogue_id"))
        turns: list[Record] = []
        system = ""
        for index, turn in enumerate(dialogue["turns"]):
            field = join(join(where, "turns"), index)
            if not isinstance(turn, dict):
                raise InputError("expected a turn object", path=source.path, field=field)
            if turn.get("speaker") == "system":
                system = turn.get("utterance", "")
                continue
            if turn.get("speaker") != "user":
                raise InputError(f"speaker {turn.get('speaker')!r} is neither user nor system",
                                 path=source.path, field=join(field, "speaker"))
            state = flat_state(turn.get("state") or {}, join(field, "state"), source.path)
            turns.append({"turn_index": len(turns), "system": system,
                          "user": turn.get("utterance", ""), gold_key: state})
            system = ""
        if not turns:
            raise InputError("a dialogue without user turns", path=source.path,
                             field=join(where, "turns"))
        record: Record = {"dialogue_id": dialogue_id, "turns": turns}
        for extra in ("dataset", "data_split"):
            if extra in dialogue:
                record[extra] = dialogue[extra]
        if dialogue.get("original_id") and dialogue.get("dialogue_id"):
            record["convlab_id"] = dialogue["dialogue_id"]
        if system:
            record["final_system"] = system
        yield where, record


def read_predictions(source: Source, context: Context) -> Iterator[Located]:
    groups: list[tuple[str | None, list[tuple[str, State]]]] = []
    for position, sample in enumerate(source.document):
        where = f"[{position}]"
        if not isinstance(sample, dict) or not isinstance(sample.get("predictions"), dict):
            raise InputError("expected a sample with 'predictions'", path=source.path,
                             field=where)
        state = flat_state(sample["predictions"].get("state") or {},
                           join(join(where, "predictions"), "state"), source.path)
        named = sample.get("original_id") or sample.get("dialogue_id")
        starts = (not groups or sample.get("utt_idx") == 0
                  or (named is not None and named != groups[-1][0]))
        if starts:
            groups.append((named, []))
        groups[-1][1].append((where, state))
    if any(name is None for name, _ in groups):
        order = context.dialogue_order
        if order is None:
            raise InputError("ConvLab-3 prediction samples name no dialogue: load them with "
                             "the dialogues file they follow", path=source.path)
        if len(order) != len(groups):
            raise DataMismatchError(
                f"{len(groups)} dialogues of samples (utt_idx 0 starts one) but the "
                f"dialogues file has {len(order)}; the samples must follow it in order",
                path=source.path)
        groups = [(dialogue_id, samples) for (dialogue_id, _), (_, samples)
                  in zip(order, groups, strict=True)]
    for dialogue_id, samples in groups:
        record: Record = {"dialogue_id": dialogue_id, "turns": [
            {"turn_index": index, "pred_state": state}
            for index, (_, state) in enumerate(samples)]}
        if context.system_name:
            record["system_name"] = context.system_name
        yield samples[0][0], record


def read_schema(source: Source, context: Context) -> Record:
    domains = []
    for name, domain in source.document["domains"].items():
        where = f"domains.{name}"
        if not isinstance(domain, dict) or not isinstance(domain.get("slots"), dict):
            raise InputError("expected 'slots' as an object", path=source.path, field=where)
        slots = []
        for slot, spec in domain["slots"].items():
            spec = spec if isinstance(spec, dict) else {}
            item: Record = {"name": f"{name}-{slot}", "domain": name, "slot": slot,
                            "description": spec.get("description", ""),
                            "is_categorical": bool(spec.get("is_categorical", False))}
            if spec.get("is_categorical") and spec.get("possible_values"):
                item["possible_values"] = [str(v) for v in spec["possible_values"]]
            slots.append(item)
        if slots:
            domains.append({"domain": name, "description": domain.get("description", ""),
                            "slots": slots})
    return {"name": f"converted from {source.path.name}", "multi_value_separator": "|",
            "domains": domains}


# --- writing --------------------------------------------------------------------------------


def _full_state(state: State, slots: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """ConvLab writes every slot of the ontology, ``""`` where there is no value."""
    out = {domain: dict.fromkeys(names, "") for domain, names in slots.items()}
    for name, value in state.items():
        domain, _, slot = name.partition("-")
        out.setdefault(domain, {})[slot] = value
    return out


def _ontology_slots(context: Context) -> dict[str, list[str]]:
    if context.schema is None:
        return {}
    return {d.domain: [s.name.partition("-")[2] for s in d.slots] for d in context.schema.domains}


def write_dialogues(records: list[Record], context: Context) -> list[dict[str, Any]]:
    slots = _ontology_slots(context)
    out = []
    for number, record in enumerate(records):
        key = gold_key(record)
        turns: list[dict[str, Any]] = []
        for position, turn in enumerate(record["turns"]):
            if position > 0:
                turns.append({"speaker": "system", "utterance": turn.get("system", ""),
                              "utt_idx": len(turns), "dialogue_acts": {}, "db_results": {}})
            turns.append({"speaker": "user", "utterance": turn.get("user", ""),
                          "utt_idx": len(turns), "dialogue_acts": {},
                          "state": _full_state(turn.get(key) or {}, slots)})
        if record.get("final_system"):
            turns.append({"speaker": "system", "utterance": record["final_system"],
                          "utt_idx": len(turns), "dialogue_acts": {}, "db_results": {}})
        out.append({"dataset": record.get("dataset", "converted"),
                    "data_split": record.get("data_split", "test"),
                    "dialogue_id": record.get("convlab_id", f"converted-test-{number}"),
                    "original_id": record["dialogue_id"],
                    "domains": sorted({n.partition("-")[0] for t in record["turns"]
                                       for n in t.get(key) or {}}),
                    "turns": turns})
    return out


def write_predictions(records: list[Record], context: Context,
                      gold: list[Record] | None = None) -> list[dict[str, Any]]:
    """Prediction samples as ``evaluate_unified_datasets`` reads them; the gold ``state`` of
    each sample comes from ``gold`` (native dialogues in the same order) when given."""
    slots = _ontology_slots(context)
    samples = []
    for record, position, turn, gold_state in paired_turns(records, gold):
        samples.append({"speaker": "user", "utt_idx": 2 * position,
                        "dialogue_id": record["dialogue_id"],
                        "state": _full_state(gold_state, slots),
                        "predictions": {"state": _full_state(turn.get("pred_state") or {},
                                                             slots)}})
    return samples


def write_schema(record: Record, context: Context) -> dict[str, Any]:
    domains = {}
    state = {}
    for domain in record["domains"]:
        slots = {}
        for slot in domain["slots"]:
            short = slot["name"].partition("-")[2]
            slots[short] = {"description": slot.get("description", ""),
                            "is_categorical": slot.get("is_categorical", False),
                            "possible_values": slot.get("possible_values", [])}
        domains[domain["domain"]] = {"description": domain.get("description", ""),
                                     "slots": slots}
        state[domain["domain"]] = dict.fromkeys(slots, "")
    return {"domains": domains, "intents": {}, "state": state,
            "dialogue_acts": {"categorical": [], "non-categorical": [], "binary": []}}
