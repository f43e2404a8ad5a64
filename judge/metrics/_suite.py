"""The exact-match suite: prepares dialogues once per policy and runs every metric family."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import write_text
from ..data import (
    Dialogue,
    DialogueSet,
    InStep,
    NotInStep,
    PredDialogue,
    PredictionSet,
    Schema,
    dialogue_integration,
    judged_turn_states,
    out_of_schema_slots,
)
from . import _dstc
from ._fga import flexible_goal_accuracy
from ._gca import granular_change_accuracy
from ._joint import (
    average_goal_accuracy,
    final_turn_jga,
    joint_goal_accuracy,
    relative_slot_accuracy,
    slot_accuracy,
    slot_prf,
    turn_update_accuracy,
)
from ._matching import MatchPolicy, parse_policy
from ._options import MetricOptions
from ._rule import rule_policy, rule_verdicts
from ._types import HypDialogue, Prepared, f1, ratio

_ISSUES_SHOWN = 5


@dataclass
class SystemMetrics:
    """All figures for one predictions file."""

    name: str
    path: str
    metrics: dict[str, Any]
    inputs: dict[str, Any]
    per_domain: dict[str, dict[str, Any]] | None = None
    per_slot: dict[str, dict[str, Any]] | None = None
    per_dialogue: dict[str, dict[str, Any]] | None = None
    profiles: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """Scoring profiles' figures, in the order a paper table asks for them (not in JSON)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "path": self.path, "metrics": self.metrics,
                               "inputs": self.inputs}
        for key in ("per_domain", "per_slot", "per_dialogue"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass
class MetricsReport:
    """The result of :func:`compute_metrics`: every figure plus every option that shaped it."""

    options: dict[str, Any]
    data: dict[str, Any]
    systems: list[SystemMetrics] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"options": self.options, "data": self.data,
                "systems": [s.to_dict() for s in self.systems]}

    def write_json(self, path: str | Path) -> None:
        write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")


def _core(
    prepared: Sequence[Prepared],
    options: MetricOptions,
    num_slots: int,
    domain_of: Callable[[str], str],
    keep_none: Sequence[Prepared] | None = None,
) -> dict[str, Any]:
    """The turn-level families on prepared dialogues (shared by totals and breakdowns)."""
    fga, turn_match = flexible_goal_accuracy(prepared, options.fga_lambdas)
    gca_input = keep_none if keep_none is not None else prepared
    none = options.none_values[0] if options.none_values else "none"
    prf = slot_prf(prepared)
    return {
        "jga": joint_goal_accuracy(prepared),
        "final_turn_jga": final_turn_jga(prepared),
        "sa": slot_accuracy(prepared, num_slots),
        "aga": average_goal_accuracy(prepared, options.aga_unit, domain_of),
        "rsa": relative_slot_accuracy(prepared, options.rsa_empty_turn),
        "fga": fga,
        "turn_match": turn_match,
        "turn_update_accuracy": turn_update_accuracy(
            prepared, include_removals=options.update_include_removals),
        "gca": granular_change_accuracy(gca_input, alpha=options.alpha,
                                        dedupe=options.gca_dedupe,
                                        undefined=options.undefined, none=none),
        "slot_precision": prf["precision"],
        "slot_recall": prf["recall"],
        "slot_f1": prf["f1"],
    }


def _restrict(prepared: Sequence[Prepared], keep: Callable[[str], bool]) -> list[Prepared]:
    """Dialogues restricted to the slots ``keep`` accepts; dialogues never using one dropped."""
    out = []
    for d in prepared:
        gold = [{s: v for s, v in g.items() if keep(s)} for g in d.gold]
        pred = [{s: v for s, v in p.items() if keep(s)} for p in d.pred]
        if any(gold) or any(pred):
            out.append(Prepared(d.dialogue_id, gold, pred))
    return out


def _per_slot(prepared: Sequence[Prepared], schema: Schema) -> dict[str, dict[str, Any]]:
    turns = sum(len(d.gold) for d in prepared)
    stats: dict[str, list[int]] = {s: [0, 0, 0, 0] for s in schema.slot_names}
    for d in prepared:
        for g, p in zip(d.gold, d.pred, strict=True):
            for slot in g.keys() | p.keys():
                row = stats.setdefault(slot, [0, 0, 0, 0])  # gold, pred, tp, mismatch
                gv, pv = g.get(slot), p.get(slot)
                row[0] += gv is not None
                row[1] += pv is not None
                row[2] += gv is not None and gv == pv
                row[3] += gv != pv
    out = {}
    for slot, (n_gold, n_pred, tp, wrong) in stats.items():
        precision, recall = ratio(tp, n_pred), ratio(tp, n_gold)
        out[slot] = {"in_schema": slot in schema.slots, "gold_turns": n_gold,
                     "pred_turns": n_pred, "accuracy": ratio(turns - wrong, turns),
                     "precision": precision, "recall": recall, "f1": f1(precision, recall)}
    return out


@dataclass
class _Views:
    """One system's dialogues prepared once for every family that reads them, a dialogue at
    a time (:meth:`add`): what the families need, never the dialogues or predictions files
    themselves, so a reader in step (:func:`stream_metrics`) holds no more than this."""

    version: str
    versions: Sequence[str]
    options: MetricOptions
    policy: MatchPolicy
    rule_policy: MatchPolicy
    ignore_none: bool
    prepared: list[Prepared] = field(default_factory=list)
    keep_none: list[Prepared] | None = None  # explicit "none" values kept (GCA option)
    hyps: list[HypDialogue] = field(default_factory=list)
    rule: list[dict[str, list[bool]]] = field(default_factory=list)  # per dialogue: version → hits

    def __post_init__(self) -> None:
        self.nones = frozenset(self.options.none_values)
        if self.options.keep_explicit_none:
            self.keep_none = []

    def add(self, dialogue: Dialogue, pred: PredDialogue) -> None:
        """Match-policy views of one dialogue's gold and predicted states, its DSTC
        hypotheses and its RULE verdicts against every version."""
        nones, policy = self.nones, self.policy
        gold_states = [t.gold_states[self.version] for t in dialogue.turns]
        pred_states = [t.pred_state or {} for t in pred.turns]
        gold, predicted = policy.prepare(gold_states, pred_states, none_values=nones)
        self.prepared.append(Prepared(dialogue.dialogue_id, gold, predicted))
        if self.keep_none is not None:
            g2, p2 = policy.prepare(gold_states, pred_states, none_values=nones, keep_none=True)
            self.keep_none.append(Prepared(dialogue.dialogue_id, g2, p2))
        self.hyps.append(HypDialogue(
            dialogue.dialogue_id,
            [g if not nones.intersection(g.values())  # the same state when nothing to drop
             else {s: v for s, v in g.items() if v not in nones} for g in gold_states],
            [t.pred_hyps for t in pred.turns], [t.pred_joint_hyps for t in pred.turns]))
        outputs = judged_turn_states(pred_states, [t.pred_turn_state for t in pred.turns])
        self.rule.append({
            other: rule_verdicts([t.gold_states[other] for t in dialogue.turns], outputs,
                                 self.rule_policy, ignore_none_pairs=self.ignore_none,
                                 none_values=nones)
            for other in self.versions})


def _prepare_views(
    dialogues: DialogueSet,
    predictions: PredictionSet,
    version: str,
    options: MetricOptions,
    policy: MatchPolicy,
    rule: MatchPolicy,
    ignore_none: bool,
) -> _Views:
    """Every dialogue's views, from files loaded whole."""
    views = _Views(version, dialogues.versions, options, policy, rule, ignore_none)
    for dialogue in dialogues.dialogues:
        views.add(dialogue, predictions.for_dialogue(dialogue))
    return views


def _rule_tsa(verdicts: Sequence[dict[str, list[bool]]],
              versions: Sequence[str]) -> dict[str, float | None]:
    """RULE TSA against every gold version, pooled over the turns of ``verdicts``."""
    pooled = {v: [hit for by_version in verdicts for hit in by_version[v]] for v in versions}
    return {v: ratio(sum(hits), len(hits)) for v, hits in pooled.items()}


def _dstc_figures(hyps: Sequence[HypDialogue], policy: MatchPolicy,
                  schema: Schema) -> dict[str, Any] | None:
    """The DSTC2-style scores over the schema's slots plus any other slot the data uses (None
    when the predictions carry no hypothesis lists)."""
    seen = {s for d in hyps for g in d.gold for s in g}
    seen.update(s for d in hyps for lists in d.slot_hyps if lists for s in lists)
    extra_slots = sorted(seen - set(schema.slot_names))
    return _dstc.scored_hypothesis_metrics(hyps, policy, [*schema.slot_names, *extra_slots])


@dataclass
class _InputTally:
    """What looked wrong in one system's predictions, counted a dialogue at a time."""

    schema: Schema
    none_values: Sequence[str]
    out_of_schema_turns: int = 0  # turns with a slot outside the schema (state or turn state)
    issues: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, pred: PredDialogue) -> None:
        slots = self.schema.slots
        self.out_of_schema_turns += sum(
            1 for t in pred.turns
            if any(s not in slots for s in {*(t.pred_state or {}), *(t.pred_turn_state or {})}))
        found = dialogue_integration(pred, none_values=self.none_values)
        self.issues += len(found)
        room = _ISSUES_SHOWN - len(self.examples)
        self.examples.extend(i.describe() for i in found[:max(room, 0)])


def _input_counts(prepared: Sequence[Prepared], tally: _InputTally,
                  out_of_schema: Counter[str], renamed: Counter[str]) -> dict[str, Any]:
    """What the figures were computed on, and what in the predictions looked wrong."""
    return {
        "dialogues": len(prepared),
        "turns": sum(len(d.gold) for d in prepared),
        "out_of_schema_slots": dict(out_of_schema.most_common()),
        "out_of_schema_suggestions": {
            slot.name: slot.suggestion
            for slot in out_of_schema_slots(out_of_schema, tally.schema)},
        "renamed_slots": dict(renamed.most_common()),
        "turns_with_out_of_schema_slots": tally.out_of_schema_turns,
        "integration_mismatches": tally.issues,
        "integration_examples": tally.examples,
    }


def _per_domain(views: _Views, schema: Schema,
                options: MetricOptions) -> dict[str, dict[str, Any]]:
    """The core families restricted to each domain's slots."""
    out = {}
    for domain in schema.domains:
        def keep(slot: str, name: str = domain.domain) -> bool:
            return schema.domain_of(slot) == name

        subset = _restrict(views.prepared, keep)
        sub_none = _restrict(views.keep_none, keep) if views.keep_none is not None else None
        figures = _core(subset, options, len(domain.slots), schema.domain_of, sub_none)
        figures["dialogues"] = len(subset)
        figures["turns"] = sum(len(d.gold) for d in subset)
        out[domain.domain] = figures
    return out


def _per_dialogue(views: _Views, schema: Schema, options: MetricOptions, num_slots: int,
                  versions: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The core families and RULE TSA of every dialogue on its own."""
    out = {}
    for position, d in enumerate(views.prepared):
        single_none = [views.keep_none[position]] if views.keep_none is not None else None
        figures = _core([d], options, num_slots, schema.domain_of, single_none)
        figures["rule_tsa"] = _rule_tsa([views.rule[position]], versions)
        figures["turns"] = len(d.gold)
        out[d.dialogue_id] = figures
    return out


def _system(
    dialogues: DialogueSet,
    predictions: PredictionSet,
    schema: Schema,
    version: str,
    options: MetricOptions,
    policy: MatchPolicy,
    rule: MatchPolicy,
    ignore_none: bool,
) -> SystemMetrics:
    """Every figure of one system whose files were loaded whole."""
    views = _prepare_views(dialogues, predictions, version, options, policy, rule, ignore_none)
    tally = _InputTally(schema, options.none_values)
    for pred in predictions.dialogues.values():
        tally.add(pred)
    return _figures(views, tally, schema, predictions.name, predictions.path,
                    predictions.out_of_schema, predictions.renamed)


def _figures(views: _Views, tally: _InputTally, schema: Schema, name: str, path: str,
             out_of_schema: Counter[str], renamed: Counter[str]) -> SystemMetrics:
    """Every figure of one system from its views: totals, then the breakdowns the options
    ask for."""
    options = views.options
    num_slots = options.num_slots or len(schema.slot_names)
    versions = views.versions
    metrics = _core(views.prepared, options, num_slots, schema.domain_of, views.keep_none)
    metrics["rule_tsa"] = _rule_tsa(views.rule, versions)
    metrics["dstc"] = _dstc_figures(views.hyps, views.policy, schema)
    result = SystemMetrics(name, path, metrics,
                           _input_counts(views.prepared, tally, out_of_schema, renamed))
    if options.breakdowns:
        result.per_domain = _per_domain(views, schema, options)
        result.per_slot = _per_slot(views.prepared, schema)
    if options.per_dialogue:
        result.per_dialogue = _per_dialogue(views, schema, options, num_slots, versions)
    return result


def _setup(schema: Schema, options: MetricOptions, version: str
           ) -> tuple[MatchPolicy, MatchPolicy, bool, dict[str, Any]]:
    """The matching policies and the options as the report records them."""
    policy = parse_policy(options.match, time_slots=schema.time_slots,
                          separator=schema.multi_value_separator)
    recorded = options.model_dump(mode="json")
    recorded["match"] = policy.name
    recorded["num_slots"] = options.num_slots or len(schema.slot_names)
    rule, ignore_none = rule_policy(options.rule_match or options.match, schema)
    recorded["rule_match"] = rule.name
    recorded["gold"] = version
    return policy, rule, ignore_none, recorded


def compute_metrics(
    dialogues: DialogueSet,
    predictions: PredictionSet | Sequence[PredictionSet],
    schema: Schema,
    options: MetricOptions | None = None,
    *,
    gold: str | None = None,
) -> MetricsReport:
    """Score one or more systems' predictions against one annotation version.

    ``gold`` names the version (``2.1``, ``2.4``; default: the first in the file). RULE TSA
    is reported against every version present.
    """
    options = options or MetricOptions()
    systems = [predictions] if isinstance(predictions, PredictionSet) else list(predictions)
    version = dialogues.resolve_version(gold)
    policy, rule, ignore_none, recorded = _setup(schema, options, version)
    report = MetricsReport(
        options=recorded,
        data={"schema": schema.name, "dialogues": dialogues.path,
              "num_dialogues": len(dialogues), "num_turns": dialogues.num_turns,
              "versions": list(dialogues.versions), "scale": "percent"},
    )
    for system in systems:
        report.systems.append(_system(dialogues, system, schema, version, options, policy,
                                      rule, ignore_none))
    return report


def stream_metrics(
    dialogues_path: str | Path,
    paths: Sequence[str | Path],
    schema: Schema,
    options: MetricOptions | None = None,
    *,
    gold: str | None = None,
) -> tuple[MetricsReport, InStep]:
    """:func:`compute_metrics` reading the dialogues and every predictions file in step, one
    dialogue at a time (:class:`judge.data.InStep`, the leaderboard's reader): memory holds
    each system's matched states, never the files' dialogues with their utterances, turn
    states and other versions. The figures are the same, computed by the same families in
    the same order. Raises :class:`judge.data.NotInStep` when the files cannot be read in
    step (the caller then loads them whole, where every problem gets its full message).
    Returns the reader too: its scans name the systems and count renamed slots."""
    options = options or MetricOptions()
    files = InStep(dialogues_path, paths, schema)
    views: list[_Views] = []
    tallies = [_InputTally(schema, options.none_values) for _ in files.scans]
    version = ""
    recorded: dict[str, Any] = {}
    dialogues = 0
    for dialogue, preds in files:
        if not views:
            probe = DialogueSet(str(dialogues_path), [], dialogue.versions, {})
            version = probe.resolve_version(gold)
            policy, rule, ignore_none, recorded = _setup(schema, options, version)
            views = [_Views(version, probe.versions, options, policy, rule, ignore_none)
                     for _ in files.scans]
        dialogues += 1
        for pred, view, tally in zip(preds, views, tallies, strict=True):
            view.add(dialogue, pred)
            tally.add(pred)
    if not views:
        raise NotInStep("no dialogues in the file")
    report = MetricsReport(
        options=recorded,
        data={"schema": schema.name, "dialogues": str(dialogues_path),
              "num_dialogues": dialogues, "num_turns": files.num_turns,
              "versions": list(views[0].versions), "scale": "percent"},
    )
    views.reverse()  # popped in the files' order: each system's view is freed once reported
    for scan, tally in zip(files.scans, tallies, strict=True):
        report.systems.append(_figures(views.pop(), tally, schema, scan.name, scan.path,
                                       scan.out_of_schema, scan.renamed))
    return report, files
