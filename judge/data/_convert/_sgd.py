"""Schema-guided files: SGD and MultiWOZ 2.2 dialogues, and their schemas (lists of services).

Both releases write a list of dialogues whose ``turns`` alternate ``USER`` and ``SYSTEM``
utterances. Every user turn has one frame per service with the state of that service:
``state.slot_values`` maps a slot to a *list* of equivalent values, ``state.active_intent``
names the intent. Frames also carry span annotations (``slots``: ``start`` and
``exclusive_end`` character offsets into the utterance; MultiWOZ 2.2 adds the ``value``, and a
``copy_from`` slot instead of offsets when a value is copied from another slot).

SGD names slots without their service (``city`` in ``Restaurants_1``); MultiWOZ 2.2 prefixes
them (``hotel-bookday``). Native names are ``<domain>-<slot>``, the domain being the service
without its ``_N`` suffix, lower-cased, unless the schema in use names the service itself
(``service_name``). Gold alternatives join with ``|``; a prediction keeps its first value. The
spans are kept per turn (``spans``: speaker, slot, start, end, value), checked against the
utterance. A service frame missing from a user turn keeps that service's last state (SGD
annotates only the services a turn is about).

A schema file is a list of services: ``service_name``, ``description``, ``slots`` (``name``,
``description``, ``is_categorical``, ``possible_values``) and ``intents``, which are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..._errors import InputError
from .._states import State
from ._common import (
    Check,
    Context,
    Fit,
    Located,
    Record,
    Source,
    clean_value,
    join,
    service_domain,
)

TITLE_SGD = "SGD dialogues (list, or a folder of dialogues_*.json)"
TITLE_22 = "MultiWOZ 2.2 dialogues (list, or a folder of dialogues_*.json)"
TITLE_SCHEMA = "SGD / MultiWOZ 2.2 schema.json (a list of services)"
_NUMBERED = re.compile(r"_\d+$")


def _dialogue_fit(document: Any) -> Check:
    check = Check()
    check.need(isinstance(document, list) and bool(document), "(top level)",
               "expected a list of dialogues")
    if check.failed:
        return check
    first = document[0]
    check.need(isinstance(first, dict), "[0]", "expected a dialogue object")
    check.need(isinstance(first.get("turns") if isinstance(first, dict) else None, list)
               and bool(first["turns"]), "[0].turns", "expected a 'turns' list")
    if check.failed:
        return check
    turn = first["turns"][0]
    check.need(isinstance(turn, dict) and isinstance(turn.get("frames"), list),
               "[0].turns[0].frames", "expected a 'frames' list")
    check.need(isinstance(turn, dict) and turn.get("speaker") in ("USER", "SYSTEM"),
               "[0].turns[0].speaker", "expected 'USER' or 'SYSTEM'")
    return check


def _is_sgd(document: list[Any]) -> bool:
    services = document[0].get("services") or [
        f.get("service", "") for t in document[0]["turns"] for f in t.get("frames", [])]
    return any(_NUMBERED.search(str(s)) for s in services)


def fit_sgd(document: Any) -> Fit:
    check = _dialogue_fit(document)
    if not check.failed:
        check.need(_is_sgd(document), "[0].services",
                   "SGD services end in _N (e.g. Restaurants_1)")
    return check.result()


def fit_22(document: Any) -> Fit:
    check = _dialogue_fit(document)
    if not check.failed:
        check.need(not _is_sgd(document), "[0].services",
                   "MultiWOZ 2.2 services are domain names (e.g. hotel)")
    return check.result()


def fit_schema(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, list) and bool(document), "(top level)",
               "expected a list of services")
    if check.failed:
        return check.result()
    first = document[0]
    check.need(isinstance(first, dict) and isinstance(first.get("service_name"), str),
               "[0].service_name", "expected a service with 'service_name'")
    check.need(isinstance(first.get("slots"), list), "[0].slots", "expected a 'slots' list")
    return check.result()


# --- names ----------------------------------------------------------------------------------


def _slot_name(service: str, slot: str, context: Context) -> str:
    if "-" in slot:  # MultiWOZ 2.2 already prefixes the domain
        return slot
    return f"{service_domain(service, context.schema)}-{slot}"


# --- reading --------------------------------------------------------------------------------


def _frame_state(frame: dict[str, Any], where: str, source: Source, context: Context,
                 *, predicted: bool) -> State:
    state = frame.get("state")
    if not isinstance(state, dict):
        raise InputError("a user frame needs a 'state' object", path=source.path,
                         field=join(where, "state"))
    values = state.get("slot_values") or {}
    if not isinstance(values, dict):
        raise InputError("expected an object of slot value lists", path=source.path,
                         field=join(join(where, "state"), "slot_values"))
    out: State = {}
    service = str(frame.get("service", ""))
    for slot, raw in values.items():
        options = raw if isinstance(raw, list) else [raw]
        cleaned = [v for v in (clean_value(o) for o in options) if v is not None]
        if not cleaned:
            continue
        text = cleaned[0] if predicted else context.separator.join(dict.fromkeys(cleaned))
        out[_slot_name(service, str(slot), context)] = text
    return out


def _spans(frame: dict[str, Any], speaker: str, utterance: str, where: str, source: Source,
           context: Context) -> list[dict[str, Any]]:
    spans = []
    service = str(frame.get("service", ""))
    for position, span in enumerate(frame.get("slots") or []):
        field = join(join(where, "slots"), position)
        if not isinstance(span, dict) or "slot" not in span:
            raise InputError("expected a span with 'slot'", path=source.path, field=field)
        item: dict[str, Any] = {"speaker": speaker,
                                "slot": _slot_name(service, str(span["slot"]), context)}
        if "start" in span or "exclusive_end" in span:
            start, end = span.get("start"), span.get("exclusive_end")
            if not (isinstance(start, int) and isinstance(end, int)
                    and 0 <= start <= end <= len(utterance)):
                raise InputError(f"span [{start}, {end}) is outside the utterance "
                                 f"({len(utterance)} characters)", path=source.path,
                                 field=field)
            item.update(start=start, end=end, value=span.get("value", utterance[start:end]))
        else:
            item["value"] = span.get("value")
            if "copy_from" in span:
                item["copy_from"] = span["copy_from"]
        spans.append(item)
    return spans


def _dialogues(source: Source, context: Context, *, predicted: bool) -> Iterator[Located]:
    state_key = "pred_state" if predicted else context.gold_key()
    for position, dialogue in enumerate(source.document):
        where = f"[{position}]"
        if not isinstance(dialogue, dict) or not isinstance(dialogue.get("turns"), list):
            raise InputError("expected a dialogue with a 'turns' list", path=source.path,
                             field=where)
        dialogue_id = dialogue.get("dialogue_id")
        if not isinstance(dialogue_id, str) or not dialogue_id:
            raise InputError("expected a 'dialogue_id'", path=source.path,
                             field=join(where, "dialogue_id"))
        turns: list[Record] = []
        services: dict[str, State] = {}
        system, system_spans = "", []
        framed = {f.get("service") for t in dialogue["turns"] if isinstance(t, dict)
                  for f in t.get("frames") or [] if isinstance(f, dict) and "state" in f}
        for index, turn in enumerate(dialogue["turns"]):
            field = join(join(where, "turns"), index)
            if not isinstance(turn, dict):
                raise InputError("expected a turn object", path=source.path, field=field)
            speaker = turn.get("speaker")
            utterance = turn.get("utterance", "")
            frames = turn.get("frames") or []
            if speaker == "SYSTEM":
                system = utterance
                system_spans = [s for f_i, frame in enumerate(frames) for s in _spans(
                    frame, "system", utterance, join(join(field, "frames"), f_i), source,
                    context)]
                continue
            if speaker != "USER":
                raise InputError(f"speaker {speaker!r} is neither USER nor SYSTEM",
                                 path=source.path, field=join(field, "speaker"))
            intents: dict[str, str] = {}
            spans = list(system_spans)
            for f_i, frame in enumerate(frames):
                frame_where = join(join(field, "frames"), f_i)
                service = str(frame.get("service", ""))
                services[service] = _frame_state(frame, frame_where, source, context,
                                                 predicted=predicted)
                intent = (frame.get("state") or {}).get("active_intent")
                if intent and intent != "NONE":
                    intents[service_domain(service, context.schema)] = intent
                spans += _spans(frame, "user", utterance, frame_where, source, context)
            state: State = {}
            for part in services.values():
                state.update(part)
            record: Record = {"turn_index": len(turns), "system": system, "user": utterance}
            record[state_key] = state
            if not predicted:
                if spans:
                    record["spans"] = spans
                if intents:  # one service: its intent; several: intent per domain
                    record["active_intent"] = (next(iter(intents.values()))
                                               if len(framed) == 1 else intents)
            turns.append(record)
            system, system_spans = "", []
        if not turns:
            raise InputError("a dialogue without user turns", path=source.path,
                             field=join(where, "turns"))
        out: Record = {"dialogue_id": dialogue_id, "turns": turns}
        if dialogue.get("services"):
            out["services"] = dialogue["services"]
        if system and not predicted:
            out["final_system"] = system
        if predicted and context.system_name:
            out["system_name"] = context.system_name
        yield where, out


def read_dialogues(source: Source, context: Context) -> Iterator[Located]:
    yield from _dialogues(source, context, predicted=False)


def read_predictions(source: Source, context: Context) -> Iterator[Located]:
    for where, record in _dialogues(source, context, predicted=True):
        for turn in record["turns"]:
            turn.pop("system", None)
            turn.pop("user", None)
        yield where, record


def read_schema(source: Source, context: Context) -> Record:
    domains = []
    names = [str(s.get("service_name", "")) for s in source.document]
    plain = [_NUMBERED.sub("", n).lower() for n in names]
    for position, service in enumerate(source.document):
        where = f"[{position}]"
        if not isinstance(service, dict) or not isinstance(service.get("slots"), list):
            raise InputError("expected a service with a 'slots' list", path=source.path,
                             field=where)
        name = names[position]
        domain = plain[position] if plain.count(plain[position]) == 1 else name.lower()
        slots = []
        for s_i, slot in enumerate(service["slots"]):
            if not isinstance(slot, dict) or not isinstance(slot.get("name"), str):
                raise InputError("expected a slot with a 'name'", path=source.path,
                                 field=join(join(where, "slots"), s_i))
            short = slot["name"]
            full = short if "-" in short else f"{domain}-{short}"
            spec: Record = {"name": full, "domain": domain,
                            "slot": full.split("-", 1)[1],
                            "description": slot.get("description", ""),
                            "is_categorical": bool(slot.get("is_categorical", False))}
            if slot.get("possible_values"):
                spec["possible_values"] = [str(v) for v in slot["possible_values"]]
            slots.append(spec)
        entry: Record = {"domain": domain, "service_name": name,
                         "description": service.get("description", ""), "slots": slots}
        if service.get("intents"):
            entry["intents"] = service["intents"]
        domains.append(entry)
    return {"name": f"converted from {source.path.name}", "multi_value_separator": "|",
            "domains": domains}


# --- writing --------------------------------------------------------------------------------


def _service_of(domain: str, context: Context, services: list[str] | None) -> str:
    if context.schema is not None:
        for spec in context.schema.domains:
            # an SGD schema's own field, kept as an extra of the domain
            service_name = getattr(spec, "service_name", None)
            if spec.domain == domain and service_name:
                return str(service_name)
    for service in services or []:
        if _NUMBERED.search(service) and _NUMBERED.sub("", service).lower() == domain:
            return service
    return f"{domain[:1].upper()}{domain[1:]}_1"  # SGD's naming: Payment_1


def _frames(state: State, context: Context, services: list[str] | None, *, sgd: bool,
            intents: Any = None, spans: list[dict[str, Any]] | None = None,
            speaker: str = "user", seen: list[str] | None = None) -> list[dict[str, Any]]:
    by_domain: dict[str, dict[str, list[str]]] = {domain: {} for domain in seen or []}
    for name, value in state.items():
        domain, _, short = name.partition("-")
        by_domain.setdefault(domain, {})[short if sgd else name] = value.split(context.separator)
    for span in spans or []:
        by_domain.setdefault(span["slot"].partition("-")[0], {})
    frames = []
    for domain, values in by_domain.items():
        intent = intents.get(domain) if isinstance(intents, dict) else intents
        frame: dict[str, Any] = {
            "service": _service_of(domain, context, services) if sgd else domain,
            "slots": [_span_out(s, sgd) for s in spans or []
                      if s["slot"].partition("-")[0] == domain and s["speaker"] == speaker],
            "state": {"active_intent": intent or "NONE", "requested_slots": [],
                      "slot_values": values}}
        frames.append(frame)
    return frames


def _span_out(span: dict[str, Any], sgd: bool) -> dict[str, Any]:
    slot = span["slot"].partition("-")[2] if sgd else span["slot"]
    out: dict[str, Any] = {"slot": slot}
    if "start" in span:
        out.update(start=span["start"], exclusive_end=span["end"])
        if not sgd:
            out["value"] = span["value"]
    else:
        out["value"] = span.get("value")
        if "copy_from" in span:
            out["copy_from"] = span["copy_from"]
    return out


def write_dialogues(records: list[Record], context: Context, *, sgd: bool = True,
                    predicted: bool = False) -> list[dict[str, Any]]:
    out = []
    for record in records:
        services = record.get("services")
        turns: list[dict[str, Any]] = []
        dialogue_turns = record["turns"]
        seen: list[str] = []  # every service framed so far keeps a frame (its state may empty)
        for position, turn in enumerate(dialogue_turns):
            key = "pred_state" if predicted else _gold_key(turn, context)
            for name in turn.get(key) or {}:
                if name.partition("-")[0] not in seen:
                    seen.append(name.partition("-")[0])
            if position > 0 or turn.get("system"):
                system_spans = [s for s in turn.get("spans", []) if s["speaker"] == "system"]
                turns.append({"speaker": "SYSTEM", "utterance": turn.get("system", ""),
                              "frames": _system_frames(system_spans, context, services, sgd)})
            turns.append({"speaker": "USER", "utterance": turn.get("user", ""),
                          "frames": _frames(turn.get(key) or {}, context, services, sgd=sgd,
                                            intents=turn.get("active_intent"),
                                            spans=turn.get("spans"), seen=seen)})
        if record.get("final_system"):
            turns.append({"speaker": "SYSTEM", "utterance": record["final_system"],
                          "frames": []})
        for number, turn in enumerate(turns):
            if not sgd:
                turn["turn_id"] = str(number)
        named = list(dict.fromkeys(f["service"] for t in turns for f in t["frames"]))
        item: dict[str, Any] = {"dialogue_id": record["dialogue_id"],
                                "services": [s for s in services or [] if s in named] or named,
                                "turns": turns}
        out.append(item)
    return out


def _system_frames(spans: list[dict[str, Any]], context: Context, services: list[str] | None,
                   sgd: bool) -> list[dict[str, Any]]:
    frames: dict[str, dict[str, Any]] = {}
    for span in spans:
        domain = span["slot"].partition("-")[0]
        service = _service_of(domain, context, services) if sgd else domain
        frames.setdefault(service, {"service": service, "slots": []})["slots"].append(
            _span_out(span, sgd))
    return list(frames.values())


def _gold_key(turn: Record, context: Context) -> str:
    if context.version and context.gold_key() in turn:
        return context.gold_key()
    keys = [k for k in turn if k.startswith("gold_state") and not k.startswith("gold_turn")]
    return keys[0] if keys else "gold_state"


def write_schema(record: Record, context: Context, *, sgd: bool = True) -> list[dict[str, Any]]:
    services = []
    for domain in record["domains"]:
        slots = []
        for slot in domain["slots"]:
            name = slot["name"].partition("-")[2] if sgd else slot["name"]
            item: dict[str, Any] = {"name": name, "description": slot.get("description", ""),
                                    "is_categorical": slot.get("is_categorical", False),
                                    "possible_values": slot.get("possible_values", [])}
            slots.append(item)
        services.append({"service_name": domain.get("service_name") or domain["domain"],
                         "description": domain.get("description", ""), "slots": slots,
                         "intents": domain.get("intents", [])})
    return services
