"""MultiWOZ 2.0–2.4 ``data.json``: one object per dialogue id with an alternating ``log``.

In the release files the log alternates user (even positions) and system (odd positions)
utterances; the belief state after a user utterance sits in the ``metadata`` of the system
utterance that follows it, per domain in a ``semi`` half (informable slots) and a ``book`` half
(booking slots, plus the ``booked`` results, which are not state). Empty strings and
``not mentioned`` mean no value. The test and validation splits are separate id lists
(``testListFile.json``, ``valListFile.json``: one id per line), given with ``--dialogue-ids``.

Slot names become the data's usual spelling: ``train-leaveat``, ``hotel-book day``. Values are
kept as written, except that "no value" spellings are dropped and ``dont care`` variants become
``dontcare``. The version label comes from ``--version`` or the path (``MultiWOZ_2.4``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..._errors import InputError
from .._states import State
from ._common import Check, Context, Fit, Located, Record, Source, clean_value, join

TITLE = "MultiWOZ 2.0-2.4 data.json"


def fit(document: Any) -> Fit:
    check = Check()
    check.need(isinstance(document, dict) and bool(document), "(top level)",
               "expected an object keyed by dialogue id")
    if check.failed:
        return check.result()
    key = next(iter(document))
    dialogue = document[key]
    check.need(isinstance(dialogue, dict), key, "expected a dialogue object")
    check.need(isinstance(dialogue.get("log") if isinstance(dialogue, dict) else None, list),
               join(key, "log"), "expected a 'log' list of utterances")
    if check.failed:
        return check.result()
    log = dialogue["log"]
    check.need(bool(log) and isinstance(log[0], dict) and "text" in log[0],
               join(join(key, "log"), 0), "expected utterances with 'text'")
    return check.result()


def _state(metadata: Any, where: str, source: Source) -> State:
    state: State = {}
    if not isinstance(metadata, dict):
        raise InputError("expected a 'metadata' object", path=source.path, field=where)
    for domain, halves in metadata.items():
        if not isinstance(halves, dict):
            raise InputError("expected {'semi': ..., 'book': ...}", path=source.path,
                             field=join(where, domain))
        for half in ("semi", "book"):
            slots = halves.get(half) or {}
            if not isinstance(slots, dict):
                raise InputError("expected an object of slots", path=source.path,
                                 field=join(join(where, domain), half))
            for slot, raw in slots.items():
                if slot == "booked" or isinstance(raw, (list, dict)):
                    continue
                value = clean_value(raw)
                if value is None:
                    continue
                name = slot.lower() if half == "semi" else f"book {slot.lower()}"
                state[f"{domain.lower()}-{name}"] = value
    return state


def read_dialogues(source: Source, context: Context) -> Iterator[Located]:
    gold_key = context.gold_key(source.path)
    for dialogue_id, dialogue in source.document.items():
        where = str(dialogue_id)
        log = dialogue.get("log") if isinstance(dialogue, dict) else None
        if not isinstance(log, list) or not log:
            raise InputError("expected a non-empty 'log' list", path=source.path,
                             field=join(where, "log"))
        turns = []
        system = ""
        for position in range(0, len(log), 2):
            user_entry = log[position]
            field = join(join(where, "log"), position)
            if not isinstance(user_entry, dict) or not isinstance(user_entry.get("text"), str):
                raise InputError("expected an utterance with 'text'", path=source.path,
                                 field=field)
            reply = log[position + 1] if position + 1 < len(log) else None
            if reply is None:
                raise InputError("the log ends with a user utterance: its state is missing",
                                 path=source.path, field=field)
            state = _state(reply.get("metadata"), join(join(join(where, "log"), position + 1),
                                                       "metadata"), source)
            turns.append({"turn_index": position // 2, "system": system,
                          "user": user_entry["text"], gold_key: state})
            system = reply.get("text", "")
        record: Record = {"dialogue_id": dialogue_id, "turns": turns}
        if system:
            record["final_system"] = system
        yield where, record


_SEMI_ONLY = ("book day", "book people", "book stay", "book time")


def write_dialogues(records: list[Record], context: Context) -> Any:
    """Native dialogues → ``data.json`` (one annotation version: the one named or the first)."""
    out: dict[str, Any] = {}
    for record in records:
        key = _gold_key(record, context)
        log = []
        turns = record["turns"]
        for position, turn in enumerate(turns):
            log.append({"text": turn.get("user", ""), "metadata": {}})
            following = (turns[position + 1].get("system", "") if position + 1 < len(turns)
                         else record.get("final_system", ""))
            log.append({"text": following, "metadata": _metadata(turn.get(key) or {})})
        out[record["dialogue_id"]] = {"goal": {}, "log": log}
    return out


def _gold_key(record: Record, context: Context) -> str:
    turn = record["turns"][0]
    if context.version:
        wanted = context.gold_key()
        if wanted in turn:
            return wanted
    keys = [k for k in turn if k.startswith("gold_state") and not k.startswith("gold_turn")]
    return keys[0] if keys else "gold_state"


def _metadata(state: State) -> dict[str, Any]:
    meta: dict[str, dict[str, dict[str, Any]]] = {}
    for name, value in state.items():
        domain, _, slot = name.partition("-")
        halves = meta.setdefault(domain, {"book": {"booked": []}, "semi": {}})
        if slot.startswith("book "):
            halves["book"][slot[len("book "):]] = value
        else:
            halves["semi"][slot] = value
    return meta
