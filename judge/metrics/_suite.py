"""The exact-match suite: prepares dialogues once per policy and runs every metric family."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import write_text
from ..data import (
    DialogueSet,
    PredictionSet,
    Schema,
    check_integration,
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
    """One system's dialogues prepared once for every family that reads them."""

    prepared: list[Prepared] = field(default_factory=list)
    keep_none: list[Prepared] | None = None  # explicit "none" values kept (GCA option)
    hyps: list[HypDialogue] = field(default_factory=list)
    rule: list[dict[str, list[bool]]] = field(default_factory=list)  # per dialogue: version → hits


def _prepare_views(
    dialogues: DialogueSet,
    predictions: PredictionSet,
    version: str,
    options: MetricOptions,
    policy: MatchPolicy,
    rule: MatchPolicy,
    ignore_none: bool,
) -> _Views:
    """Match-policy views of gold and predicted states, DSTC hypotheses and RULE verdicts."""
    nones = frozenset(options.none_values)
    views = _Views(keep_none=[] if options.keep_explicit_none else None)
    for dialogue in dialogues.dialogues:
        pred = predictions.for_dialogue(dialogue)
        gold_states = [t.gold_states[version] for t in dialogue.turns]
        pred_states = [t.pred_state or {} for t in pred.turns]
        gold, predicted = policy.prepare(gold_states, pred_states, none_values=nones)
        views.prepared.append(Prepared(dialogue.dialogue_id, gold, predicted))
        if views.keep_none is not None:
            g2, p2 = policy.prepare(gold_states, pred_states, none_values=nones, keep_none=True)
            views.keep_none.append(Prepared(dialogue.dialogue_id, g2, p2))
        views.hyps.append(HypDialogue(
            dialogue.dialogue_id,
            [{s: v for s, v in g.items() if v not in nones} for g in gold_states],
            [t.pred_hyps for t in pred.turns], [t.pred_joint_hyps for t in pred.turns]))
        outputs = judged_turn_states(pred_states, [t.pred_turn_state for t in pred.turns])
        views.rule.append({
            other: rule_verdicts([t.gold_states[other] for t in dialogue.turns], outputs, rule,
                                 ignore_none_pairs=ignore_none, none_values=nones)
            for other in dialogues.versions})
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


def _input_counts(prepared: Sequence[Prepared], predictions: PredictionSet, schema: Schema,
                  options: MetricOptions) -> dict[str, Any]:
    """What the figures were computed on, and what in the predictions looked wrong."""
    issues = check_integration(predictions, none_values=options.none_values)
    return {
        "dialogues": len(prepared),
        "turns": sum(len(d.gold) for d in prepared),
        "out_of_schema_slots": dict(predictions.out_of_schema.most_common()),
        "out_of_schema_suggestions": {
            slot.name: slot.suggestion
            for slot in out_of_schema_slots(predictions.out_of_schema, schema)},
        "renamed_slots": dict(predictions.renamed.most_common()),
        "turns_with_out_of_schema_slots": sum(  # in the state or the turn state, as counted
            1 for d in predictions.dialogues.values() for t in d.turns
            if any(s not in schema.slots for s in {*(t.pred_state or {}),
                                                   *(t.pred_turn_state or {})})),
        "integration_mismatches": len(issues),
        "integration_examples": [i.describe() for i in issues[:_ISSUES_SHOWN]],
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
    """Every figure of one system: totals, then the breakdowns the options ask for."""
    num_slots = options.num_slots or len(schema.slot_names)
    versions = dialogues.versions
    views = _prepare_views(dialogues, predictions, version, options, policy, rule, ignore_none)
    metrics = _core(views.prepared, options, num_slots, schema.domain_of, views.keep_none)
    metrics["rule_tsa"] = _rule_tsa(views.rule, versions)
    metrics["dstc"] = _dstc_figures(views.hyps, policy, schema)
    result = SystemMetrics(predictions.name, predictions.path, metrics,
                           _input_counts(views.prepared, predictions, schema, options))
    if options.breakdowns:
        result.per_domain = _per_domain(views, schema, options)
        result.per_slot = _per_slot(views.prepared, schema)
    if options.per_dialogue:
        result.per_dialogue = _per_dialogue(views, schema, options, num_slots, versions)
    return result


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
    policy = parse_policy(options.match, time_slots=schema.time_slots,
                          separator=schema.multi_value_separator)
    recorded = options.model_dump(mode="json")
    recorded["match"] = policy.name
    recorded["num_slots"] = options.num_slots or len(schema.slot_names)
    rule, ignore_none = rule_policy(options.rule_match or options.match, schema)
    recorded["rule_match"] = rule.name
    recorded["gold"] = version
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
