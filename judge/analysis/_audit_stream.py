"""The audit of predictions files read one dialogue at a time: a test set of any size in
bounded memory, with the candidates, ranks and sheets of the whole-file audit.

Candidates come per dialogue, and so do the review order's (system, turn) pairs; so the
dialogues and every predictions file are read in step (:class:`judge.data.InStep`, as
``metrics`` reads them), each dialogue's candidates found and its pairs counted there, and
only what the ranking and the review sheet need is kept: the candidates, the pairs, and of
each dialogue with a candidate its utterances and audited gold states (the sheet's context
and later turns). The predicted states, the other annotation versions and the dialogues
without a candidate are let go as the reading moves on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from .._errors import OptionError
from ..data import Dialogue, DialogueSet, InStep, Schema, Turn, dialogue_key
from ._audit_inputs import AuditSource, _unique_names
from ._candidates import Candidate, _dialogue_candidates, _Scorer
from ._decided import ORDERS
from ._review import count_pairs, covering_turns, error_chance, order_by_pairs


def _kept(dialogue: Dialogue, version: str) -> Dialogue:
    """What the review sheet reads of a dialogue: its utterances and the audited gold."""
    turns = [Turn.model_construct(turn_index=t.turn_index, system=t.system, user=t.user,
                                  gold_states={version: t.gold_states[version]},
                                  gold_turn_states={})
             for t in dialogue.turns]
    return Dialogue.model_construct(dialogue_id=dialogue.dialogue_id, domains=[], turns=turns)


def stream_candidates(dialogues_path: str | Path, paths: Sequence[str | Path], *,
                      schema: Schema | None = None, gold: str | None = None,
                      order: str = "review") -> tuple[list[Candidate], DialogueSet]:
    """:func:`open_candidates` of predictions files (no corrections) read in step with the
    dialogues: the same candidates in the same order, and a dialogue set holding what
    :func:`write_candidates` reads (the dialogues with a candidate, their utterances and the
    audited gold). Raises :class:`judge.data.NotInStep` when the files cannot be read in step
    (the caller then loads them whole)."""
    from ..data import NotInStep

    if order not in ORDERS:
        raise OptionError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    if not paths:
        raise OptionError("the audit needs at least one run directory or predictions file")
    files = InStep(dialogues_path, paths, schema)
    sources: list[AuditSource] = []
    version = ""
    others: list[str] = []
    versions: tuple[str, ...] = ()
    separator = schema.multi_value_separator if schema is not None else "|"
    scorer = _Scorer(schema, separator)
    found: list[Candidate] = []
    kept: list[Dialogue] = []
    # per dialogue with candidates: its candidates in their evidence order and its pairs,
    # keyed by candidate identity until the global positions are known
    pairs_by_dialogue: list[dict[frozenset[int], int]] = []
    number: dict[int, int] = {}  # id(candidate) -> its dialogue's position in the file
    for position, (dialogue, preds) in enumerate(files):
        if not versions:
            versions = dialogue.versions
            version = DialogueSet(str(dialogues_path), [], versions, {}).resolve_version(gold)
            others = [v for v in versions if v != version]
            sources = [AuditSource(scan.name, {}, None, scan.path) for scan in files.scans]
            _unique_names(sources)
        key = dialogue_key(dialogue.dialogue_id)
        here = [AuditSource(source.name, {key: [dict(t.pred_state or {}) for t in pred.turns]},
                            None, source.path) for source, pred in zip(sources, preds,
                                                                       strict=True)]
        local = _dialogue_candidates(dialogue, key, here, version, others, schema,
                                     separator, scorer)
        if not local:
            continue
        local.sort(key=lambda c: (-c.logit, c.turn_index, c.slot))  # the global order's
        chance = [error_chance(c) for c in local]
        covering = covering_turns(local, version, {dialogue.dialogue_id: dialogue}.get)
        pairs: dict[frozenset[int], int] = defaultdict(int)
        count_pairs(key, [t.gold_states[version] for t in dialogue.turns],
                    [s.states[key] for s in here], covering, chance, pairs)
        pairs_by_dialogue.append({frozenset(id(local[p]) for p in members): count
                                  for members, count in pairs.items()})
        for candidate in local:
            number[id(candidate)] = position
        found.extend(local)
        kept.append(_kept(dialogue, version))
    if not versions:
        raise NotInStep("no dialogues in the file")
    found.sort(key=lambda c: (-c.logit, number[id(c)], c.turn_index, c.slot))
    dialogues = DialogueSet(str(dialogues_path), kept, versions,
                            {dialogue_key(d.dialogue_id): i for i, d in enumerate(kept)})
    if order == "evidence":
        for rank, candidate in enumerate(found, start=1):
            candidate.rank = rank
        return found, dialogues
    at = {id(c): p for p, c in enumerate(found)}
    every: dict[frozenset[int], int] = {}
    for counted in pairs_by_dialogue:
        for members, count in counted.items():
            every[frozenset(at[m] for m in members)] = count
    return order_by_pairs(found, [error_chance(c) for c in found], every), dialogues
