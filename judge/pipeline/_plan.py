"""Plan a run: render every call (prompt, request body) before anything is sent.

A plan is pure data: the same plan feeds live calls, Batch API request files, the dry-run
estimate and the manifest that guards resumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._config import JudgeConfig
from ..data import (
    Dialogue,
    DialogueSet,
    PredDialogue,
    PredictionSet,
    Schema,
    State,
    judged_turn_states,
)
from ..method import Dimension, PromptSet, RenderedPrompt, RuleSet, build_body, default_rules
from ..model import custom_id


@dataclass
class PlannedCall:
    """One judge call for one turn and dimension (or a skipped one: nothing to judge)."""

    dialogue_id: str
    turn_index: int
    dimension: Dimension
    prompt: RenderedPrompt
    body: dict[str, Any]
    skipped: bool = False

    @property
    def custom_id(self) -> str:
        return custom_id(self.dialogue_id, self.turn_index, self.dimension)


@dataclass
class PlannedTurn:
    dialogue: Dialogue
    turn_index: int
    judged_state: State
    calls: list[PlannedCall]


@dataclass
class EvaluationPlan:
    """Everything decided before any model call."""

    config: JudgeConfig
    schema: Schema
    rules: RuleSet
    prompts: PromptSet
    dialogues: DialogueSet
    predictions: PredictionSet
    turns: list[PlannedTurn]

    @property
    def calls(self) -> list[PlannedCall]:
        return [c for t in self.turns for c in t.calls if not c.skipped]


def _history(dialogue: Dialogue, turn_index: int) -> list[tuple[str, str]]:
    history: list[tuple[str, str]] = []
    for turn in dialogue.turns[:turn_index]:
        if turn.system:
            history.append(("agent", turn.system))
        history.append(("user", turn.user))
    return history


def plan_evaluation(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                    predictions: PredictionSet, *, rules: RuleSet | None = None,
                    prompts: PromptSet | None = None) -> EvaluationPlan:
    """Render every call of a run (nothing is sent)."""
    prompts = prompts or PromptSet(schema, config.method, config.prompt_variant)
    rules = rules or default_rules(schema)
    turns: list[PlannedTurn] = []
    for dialogue in dialogues.dialogues:
        pred: PredDialogue = predictions.for_dialogue(dialogue)
        # Paper semantics judge the slot names as the file wrote them (the reference dropped
        # variants such as MultiWOZ 2.2 names); default semantics judge the schema's names.
        written = ([t.as_written() for t in pred.turns] if config.semantics == "paper"
                   else [(t.pred_state or {}, t.pred_turn_state) for t in pred.turns])
        judged = judged_turn_states([state for state, _ in written],
                                    [output for _, output in written])
        for index, turn in enumerate(dialogue.turns):
            history = _history(dialogue, index)
            calls = []
            for dimension in prompts.dimensions:
                rendered = prompts.render(dimension, history, turn.system, turn.user,
                                          judged[index])
                calls.append(PlannedCall(
                    dialogue.dialogue_id, index, dimension, rendered,
                    build_body(config, rendered.messages, dimension,
                               dialogue_id=dialogue.dialogue_id),
                    skipped=dimension == "accuracy" and not judged[index]))
            turns.append(PlannedTurn(dialogue, index, judged[index], calls))
    return EvaluationPlan(config, schema, rules, prompts, dialogues, predictions, turns)


def call_chains(plan: EvaluationPlan) -> list[list[tuple[int, int]]]:
    """The send order: for each dialogue, one chain per dimension holding that dimension's
    calls in turn order, as (turn position, call position) pairs. A chain's calls go out one
    after another, so each call finds the previous turn's prompt, which it extends, still in
    the server's prefix cache."""
    chains: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for t, turn in enumerate(plan.turns):
        for c, call in enumerate(turn.calls):
            chains.setdefault((call.dialogue_id, call.dimension), []).append((t, c))
    return list(chains.values())
