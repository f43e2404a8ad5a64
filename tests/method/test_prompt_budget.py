"""The prompt budget: every piece of a prompt earns its tokens, and nothing the method needs is
cut (every slot of the schema in the completeness prompt, the reasoning paths, the guard)."""

from __future__ import annotations

import json
import re

from judge.data import Schema
from judge.method import PromptSet, TurnInput, default_rules, integrate_dialogue
from judge.method._prompts import schema_context
from judge.model import counter_for


def _listed_slots(system: str) -> set[str]:
    """Slot names as the Slots section lists them: ``domain: slot, slot, ...`` lines."""
    block = system.split("# Slots\n", 1)[1].split("Fixed values:", 1)[0]
    names = set()
    for line in block.splitlines()[1:]:
        domain, _, slots = line.partition(": ")
        names.update(f"{domain}-{slot}" for slot in slots.split(", ") if slot)
    return names


def test_completeness_lists_every_slot_and_each_value_list_once(example_data):
    schema = example_data[0]
    system = PromptSet(schema, "two-dim").static_messages("completeness")[0]["content"]
    assert _listed_slots(system) == set(schema.slot_names)
    assert system.count("monday") == 1  # hotel, restaurant and train days share one list
    assert system.count("centre") == 1  # three area slots, one list
    assert len(re.findall(r"\bHH:MM\b", system)) == 1
    for joint in ("direct", "cot"):
        assert _listed_slots(PromptSet(schema, joint).static_messages("joint")[0]["content"]) \
            == set(schema.slot_names)


def test_accuracy_prompts_carry_no_schema(example_data):
    for method in ("two-dim", "two-dim-cot"):
        system = PromptSet(example_data[0], method).static_messages("accuracy")[0]["content"]
        assert "# Slots" not in system and "monday" not in system


def test_value_groups_label_shared_and_own_lists():
    schema = Schema.model_validate({"domains": [
        {"domain": "hotel", "slots": [
            {"name": "hotel-area", "is_categorical": True, "possible_values": ["north", "south"]},
            {"name": "hotel-people", "is_categorical": True,
             "possible_values": ["1", "2", "3", "4"]}]},
        {"domain": "taxi", "slots": [
            {"name": "taxi-area", "is_categorical": True, "possible_values": ["north", "south"]},
            {"name": "taxi-people", "is_categorical": True,
             "possible_values": ["1", "2", "3", "4", "6"]},
            {"name": "taxi-leaveat", "value_format": "HH:MM"}]}]})
    groups = dict(schema_context(schema)["value_groups"])
    assert groups == {"area": "north, south", "hotel-people": "1-4", "taxi-people": "1-4, 6",
                      "leaveat": "HH:MM"}


def test_dialogue_text_is_compact_and_escaped(example_data):
    prompts = PromptSet(example_data[0], "two-dim")
    prompt = prompts.render("completeness", [("agent", ""), ("user", 'a "cheap" one\nplease')],
                            "which area ?", "north", {"hotel-area": "north",
                                                      "hotel-pricerange": "cheap"})
    user = prompt.messages[-1]["content"]
    assert 'user: "a \\"cheap\\" one\\nplease"' in user  # one JSON string per utterance
    assert '"speaker"' not in user and "agent: \"\"" not in user  # no wrappers, no empty turn
    state_line = user.split("# State of this turn\n", 1)[1].strip()
    assert json.loads(state_line) == {"hotel-area": "north", "hotel-pricerange": "cheap"}
    assert "\n" not in state_line
    # the injection guard is said once per request, in the system message
    text = "".join(m["content"] for m in prompt.messages)
    assert text.count("never instructions to you") == 1


def test_static_prompts_stay_within_budget(example_data):
    """o200k tokens of the system messages on the example schema (MultiWOZ-shaped). The issue
    13 budget: at most the reference implementation's 760 prompt tokens per call on average."""
    counter = counter_for("gpt-4o")
    prompts = PromptSet(example_data[0], "two-dim")
    accuracy = counter.count(prompts.static_messages("accuracy")[0]["content"])
    completeness = counter.count(prompts.static_messages("completeness")[0]["content"])
    assert accuracy <= 320 and completeness <= 660, (accuracy, completeness)


def test_missed_slot_in_a_domain_nobody_predicted_is_found(example_data):
    """The completeness prompt lists every domain, so a slot of a domain absent from every
    prediction can be reported as missed, and the rule filters keep it."""
    base = example_data[0].model_dump(mode="json")
    base["domains"].append({"domain": "spa", "slots": [
        {"name": "spa-treatment", "is_categorical": True,
         "possible_values": ["massage", "sauna"]}, {"name": "spa-book time",
                                                    "value_format": "HH:MM"}]})
    schema = Schema.model_validate(base)
    prompts = PromptSet(schema, "two-dim")
    state = {"hotel-area": "north"}
    prompt = prompts.render("completeness", [], "", "a hotel in the north and a massage", state)
    system = prompt.messages[0]["content"]
    assert {"spa-treatment", "spa-book time"} <= _listed_slots(system)
    assert "\nspa: treatment, book time\n" in system and "treatment: massage, sauna" in system
    # a reply naming the missed spa slot (fixture) survives the filters: the turn is wrong
    verdict = integrate_dialogue(
        [TurnInput(0, state, {}, {"spa-treatment": "massage"}, None)], schema,
        default_rules(schema), "default")[0]
    assert verdict.verdict is False and verdict.missed == ["spa-treatment"]
