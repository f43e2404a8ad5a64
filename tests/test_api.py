"""The public surface is curated: exactly what ``__all__`` lists, all importable and private
modules kept behind it."""

from __future__ import annotations

import judge

EXPECTED = {
    "DSTJudgeError", "DataMismatchError", "Dialogue", "DialogueSet", "DomainSpec", "InputError",
    "IntegrationIssue", "MatchPolicy", "MetricOptions", "MetricsReport", "OptionError",
    "PredDialogue", "PredTurn", "PredictionSet", "Schema", "SlotSpec", "State", "SystemMetrics",
    "Turn", "__version__", "apply_turn_state", "check_integration", "compute_metrics",
    "cumulative_states", "load_dialogues", "load_predictions", "load_schema", "normalize_value",
    "parse_policy", "read_id_list", "turn_state", "turn_states",
    "CassetteMiss", "EvaluationResult", "JudgeConfig", "ModelError", "collect", "evaluate",
    "evaluate_async", "load_config",
}


def test_all_is_the_curated_surface():
    assert set(judge.__all__) == EXPECTED
    for name in judge.__all__:
        assert hasattr(judge, name), name


def test_public_names_do_not_leak_private_modules():
    public = {n for n in dir(judge) if not n.startswith("_")}
    assert public <= set(judge.__all__)


def test_exception_tree():
    assert issubclass(judge.InputError, judge.DSTJudgeError)
    assert issubclass(judge.DataMismatchError, judge.InputError)
    assert issubclass(judge.OptionError, judge.DSTJudgeError)
    assert issubclass(judge.ModelError, judge.DSTJudgeError)
    assert issubclass(judge.CassetteMiss, judge.ModelError)
    err = judge.InputError("bad", path="f.jsonl", line=3, field="turns[0].user")
    assert str(err) == "f.jsonl:3: field 'turns[0].user': bad"
