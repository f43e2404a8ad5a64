"""Turn answered calls into results: rule filters and integration per dialogue, RULE verdicts per
gold version, one row per turn, and the run summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import DataMismatchError, ExitStatus
from ..data import (
    CorrectedGold,
    Dialogue,
    DialogueSet,
    Located,
    Schema,
    apply_each,
    dialogue_key,
    turn_states,
)
from ..method import TurnInput, TurnVerdict, agreement, integrate_dialogue, totals
from ..metrics import MatchPolicy, ratio, rule_policy, rule_verdicts
from ..model import PriceTable, load_prices, price_and_counter, usage_check, usage_cost
from ._answer import CallResult
from ._plan import EvaluationPlan, PlannedTurn, call_chains
from ._rundir import write_results


@dataclass(repr=False)
class EvaluationResult:
    """Per-turn judgments and the summary of a run."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]

    def __repr__(self) -> str:  # cheap: asyncio.run builds it (python/cpython#112559)
        return f"EvaluationResult(turns={len(self.rows)}, tsa={self.summary.get('tsa')})"

    @property
    def exit_status(self) -> ExitStatus:
        """OK when every turn was judged, ERROR_ROWS when some are error rows, NOTHING_JUDGED
        when none could be judged."""
        summary = self.summary
        if summary.get("error_turns"):
            return (ExitStatus.NOTHING_JUDGED if not summary.get("scored_turns")
                    else ExitStatus.ERROR_ROWS)
        return ExitStatus.OK

    @staticmethod
    def combined_status(results: Sequence[EvaluationResult]) -> ExitStatus:
        """The status of several systems judged together: OK when all are, NOTHING_JUDGED
        when none could be judged, else ERROR_ROWS."""
        statuses = {r.exit_status for r in results}
        if statuses <= {ExitStatus.OK}:
            return ExitStatus.OK
        if statuses == {ExitStatus.NOTHING_JUDGED}:
            return ExitStatus.NOTHING_JUDGED
        return ExitStatus.ERROR_ROWS

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``judgments.jsonl`` and ``summary.json`` into ``out_dir``."""
        return write_results(out_dir, self.rows, self.summary)


def _turn_input(turn: PlannedTurn, results: Sequence[CallResult]) -> TurnInput:
    errors = [f"{r.dimension}: {r.error}" for r in results if r.error]
    merged: dict[str, dict[str, Any]] = {}
    for r in results:
        merged.update(r.results or {})
    return TurnInput(turn.turn_index, turn.judged_state,
                     merged.get("incorrect_domain_slot"), merged.get("missed_domain_slot"),
                     "; ".join(errors) or None)


def _usage(results: Sequence[CallResult], *, batch: bool | None = None) -> dict[str, int]:
    totals_ = {"prompt_tokens": 0, "completion_tokens": 0, "cached_prompt_tokens": 0}
    for r in results:
        for usage in r.billed_usage(batch=batch):
            for key in totals_:
                totals_[key] += int(usage.get(key, 0))
    return totals_


def _cost(results: Sequence[CallResult], prices: PriceTable, model: str, *,
          batch: bool) -> float | None:
    """What the billed attempts cost: those sent through the Batch API at its discount, the
    rest at live prices (a live retry of a batch run holds both). ``batch``: the whole run
    went through the Batch API (logs written before attempts carried the mark)."""
    price = prices.price(model)
    if batch:
        return usage_cost(_usage(results), price, batch_discount=prices.batch_discount)
    live = usage_cost(_usage(results, batch=False), price)
    through_batch = _usage(results, batch=True)
    if live is None or not any(through_batch.values()):
        return live
    return live + (usage_cost(through_batch, price, batch_discount=prices.batch_discount)
                   or 0.0)


def per_turn(plan: EvaluationPlan, answers: Sequence[CallResult]) -> list[list[CallResult]]:
    """Regroup answers (in plan order) by turn."""
    remaining = iter(answers)
    return [[next(remaining) for _ in turn.calls] for turn in plan.turns]


@dataclass
class _RuleCheck:
    """How RULE verdicts are computed for a run (the policy and its 'none' handling)."""

    policy: MatchPolicy
    ignore_none: bool


def _rule_checks(dialogue: Dialogue, versions: Sequence[str], judged: list[dict[str, str]],
                 check: _RuleCheck) -> tuple[dict[str, list[bool]], dict[str, list[Any]]]:
    """RULE verdicts and gold turn states of one dialogue, per annotation version."""
    verdicts, gold_turns = {}, {}
    for version in versions:
        gold = [t.gold_states[version] for t in dialogue.turns]
        gold_turns[version] = turn_states(gold)
        verdicts[version] = rule_verdicts(gold, judged, check.policy,
                                          ignore_none_pairs=check.ignore_none)
    return verdicts, gold_turns


def with_gold_versions(rows: Sequence[Mapping[str, Any]], dialogues: DialogueSet,
                       schema: Schema, rule_match: str | None,
                       versions: Sequence[str]) -> list[dict[str, Any]]:
    """A run's rows with the RULE verdicts and gold turn states of more annotation versions
    (a corrected gold, say), computed as the run computed its own, from its judged turn
    states: no model is called. Rows of dialogues not in ``dialogues`` are an error."""
    check = _RuleCheck(*rule_policy(rule_match or "exact", schema))
    by_dialogue: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_dialogue.setdefault(dialogue_key(str(row["dialogue_id"])), []).append(dict(row))
    out: list[dict[str, Any]] = []
    for key, group in by_dialogue.items():
        dialogue = dialogues.get(key)
        if dialogue is None:
            raise DataMismatchError(f"the run holds dialogue {group[0]['dialogue_id']!r}, "
                                    f"which {dialogues.path} does not")
        group.sort(key=lambda r: int(r["turn_index"]))
        judged = [dict(r.get("pred_turn_state") or {}) for r in group]
        if len(judged) != len(dialogue.turns):
            raise DataMismatchError(f"the run holds {len(judged)} turns of dialogue "
                                    f"{dialogue.dialogue_id!r}, {dialogues.path} "
                                    f"{len(dialogue.turns)}")
        verdicts, gold_turns = _rule_checks(dialogue, versions, judged, check)
        for index, row in enumerate(group):
            row["rule"] = {**(row.get("rule") or {}),
                           **{v: verdicts[v][index] for v in versions}}
            row["gold_turn_state"] = {**(row.get("gold_turn_state") or {}),
                                      **{v: gold_turns[v][index] for v in versions}}
        out.extend(group)
    return out


def corrected_rows(rows: Sequence[Mapping[str, Any]], dialogues: DialogueSet, schema: Schema,
                   rule_match: str | None, corrections: Sequence[Located]
                   ) -> tuple[list[dict[str, Any]], list[CorrectedGold]]:
    """A run's rows with the RULE verdicts and gold turn states of each version the
    corrections correct, corrected (:func:`judge.data.apply_each` on the run's own dialogues
    and schema; no model call), and what each corrected version applied."""
    if not corrections:
        return [dict(row) for row in rows], []
    dialogues, corrected = apply_each(dialogues, corrections, schema=schema)
    return (with_gold_versions(rows, dialogues, schema, rule_match,
                               [c.name for c in corrected]), corrected)


def _row(dialogue: Dialogue, turn: PlannedTurn, results: Sequence[CallResult],
         turn_input: TurnInput, verdict: TurnVerdict, rules: dict[str, bool],
         gold: dict[str, Any]) -> dict[str, Any]:
    """The judgments.jsonl row of one turn: everything needed to audit its verdict."""
    source_turn = dialogue.turns[turn.turn_index]
    return {
        "dialogue_id": dialogue.dialogue_id, "turn_index": turn.turn_index,
        "system": source_turn.system, "user": source_turn.user,
        "pred_turn_state": turn.judged_state,
        "verdict": verdict.verdict, "jga": verdict.jga,
        "error": turn_input.error,
        "incorrect": verdict.incorrect, "missed": verdict.missed,
        "rule": rules,
        "gold_turn_state": gold,
        "calls": [dict(vars(r)) for r in results],  # shallow: results are not mutated
        "trace": verdict.trace,
        "state": {"incorrect": verdict.state_incorrect, "missed": verdict.state_missed,
                  "correct": verdict.state_correct},
    }


def build_result(plan: EvaluationPlan, answers: Sequence[CallResult], *,
                 batch: bool = False) -> EvaluationResult:
    """Filter and integrate every dialogue's answers, add RULE verdicts, and summarise."""
    config = plan.config
    check = _RuleCheck(*rule_policy(config.effective_rule_match, plan.schema))
    versions = plan.dialogues.versions
    grouped = per_turn(plan, answers)
    rows: list[dict[str, Any]] = []
    verdicts: list[TurnVerdict] = []
    rule_by_version: dict[str, list[bool]] = {v: [] for v in versions}
    position = 0
    for dialogue in plan.dialogues.dialogues:
        count = len(dialogue.turns)
        turns = plan.turns[position:position + count]
        results = grouped[position:position + count]
        inputs = [_turn_input(turn, res) for turn, res in zip(turns, results, strict=True)]
        dialogue_verdicts = integrate_dialogue(inputs, plan.schema, plan.rules, config.semantics)
        rules_here, gold_turns = _rule_checks(dialogue, versions,
                                              [t.judged_state for t in turns], check)
        for version in versions:
            rule_by_version[version].extend(rules_here[version])
        for i, (turn, res, verdict) in enumerate(
                zip(turns, results, dialogue_verdicts, strict=True)):
            rows.append(_row(dialogue, turn, res, inputs[i], verdict,
                             {v: rules_here[v][i] for v in versions},
                             {v: gold_turns[v][turn.turn_index] for v in versions}))
        verdicts.extend(dialogue_verdicts)
        position += count
    summary = _summary(plan, rows, verdicts, rule_by_version, answers, batch=batch)
    return EvaluationResult(rows, summary)


def _summary(plan: EvaluationPlan, rows: Sequence[dict[str, Any]], verdicts: list[TurnVerdict],
             rule_by_version: dict[str, list[bool]], answers: Sequence[CallResult], *,
             batch: bool) -> dict[str, Any]:
    """Run-level figures: TSA, judge JGA, RULE agreement per version, calls, tokens, cost."""
    config = plan.config
    run = totals(verdicts)
    judge_verdicts = [v.verdict for v in verdicts]
    made = [r for r in answers if not r.skipped]
    tokens = _usage(made)
    prices = load_prices(config.prices)
    static = sum(c.prompt.static_chars for c in plan.calls)
    total = sum(c.prompt.total_chars for c in plan.calls)
    errors = [row for row in rows if row["error"]]
    grouped = per_turn(plan, answers)
    sent = [(f"{call.dialogue_id}/{call.dimension}", call.dimension, call.body,
             result.attempts[0].get("usage") or {})
            for t, c in (pair for chain in call_chains(plan) for pair in chain)
            for call, result in [(plan.turns[t].calls[c], grouped[t][c])]
            if not call.skipped and result.attempts and not result.from_cache]
    return {
        "method": config.method, "semantics": config.semantics,
        "turns": run.turns, "scored_turns": run.scored, "error_turns": run.errors,
        "tsa": run.tsa, "judge_jga": run.judge_jga, "judge_jga_turns": run.jga_turns,
        "rule": {v: {"tsa": ratio(sum(h), len(h)),
                     "agreement": agreement(judge_verdicts, h)}
                 for v, h in rule_by_version.items()},
        "rule_match": config.effective_rule_match,
        "calls": {"planned": len(made), "skipped": sum(r.skipped for r in answers),
                  "answered_from_cache": sum(r.from_cache for r in made),
                  "reasks": sum(max(0, len(r.attempts) - 1) for r in made),
                  "failed": sum(1 for r in made if r.error)},
        "tokens": tokens,
        "token_check": usage_check(sent, price_and_counter(config.model, prices)[1]),
        "cost_usd": _cost(made, prices, config.model, batch=batch),
        "static_prompt_share": static / total if total else None,
        "templates": {d: plan.prompts.template_hash(d) for d in plan.prompts.dimensions},
        "prompt_variant": config.prompt_variant,
        "rules": plan.rules.source,
        "errors": {"count": len(errors),
                   "examples": [f"{r['dialogue_id']} turn {r['turn_index']}: {r['error']}"
                                for r in errors[:5]]},
        "data": {"dialogues": plan.dialogues.path, "predictions": plan.predictions.path,
                 "system": plan.predictions.name, "num_dialogues": len(plan.dialogues),
                 "versions": list(plan.dialogues.versions)},
        "options": config.public_dict(),
        "scale": "percent",
    }

