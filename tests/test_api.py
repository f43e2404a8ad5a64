"""The public surface is curated: exactly what ``__all__`` lists, all importable and private
modules kept behind it."""

from __future__ import annotations

import importlib
import importlib.util

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
    # what the CLI does, callable from Python too
    "BudgetReached", "HumanLabels", "Run", "agreement_report", "audit_items", "dry_run",
    "import_decisions", "load_labels", "load_run", "method_table", "plan_evaluation",
    "plot_systems", "system_table", "validate_file", "write_audit", "write_labels",
    "write_requests",
    # error types: a file the command could not write, a reply that is not a completion
    "OutputError", "ReplyError",
    # exit statuses and the errors behind them (the service reports the same meanings)
    "ExitStatus", "exit_status_for", "RunInterrupted", "RunDirectoryError", "RunLocked",
    "RunConflict", "StoreError",
    # several systems judged together, each distinct request sent (or written) once
    "evaluate_systems", "evaluate_systems_async", "collect_systems",
    # the service's Python client and its error
    "Client", "ServiceError",
    # bring your own data (issue 14)
    "FormatError", "convert", "paper_tables", "score_profile",
    # agreement on a sample, ranked label-error candidates
    "draw_sample", "find_candidates", "load_audit_inputs", "load_sample", "write_candidates",
    "write_sample",
    # a corrected gold: reviewed corrections of an annotation, applied as a new version
    "CorrectionConflicts", "apply_corrections", "read_corrections",
}
STAGES = ("data", "metrics", "method", "model", "store", "pipeline", "analysis", "cli",
          "client", "service", "web")


def test_all_is_the_curated_surface():
    assert set(judge.__all__) == EXPECTED
    for name in judge.__all__:
        assert hasattr(judge, name), name


def test_public_names_do_not_leak_private_modules():
    public = {n for n in dir(judge) if not n.startswith("_")}
    assert public <= set(judge.__all__) | set(STAGES)


def test_every_stage_declares_its_face():
    for stage in (*STAGES, "model.local"):
        module = importlib.import_module(f"judge.{stage}")
        assert module.__all__, stage
        for name in module.__all__:
            assert hasattr(module, name), f"judge.{stage}.{name}"
        public = {n for n in dir(module) if not n.startswith("_")}
        # public subpackages, which appear on their parent once anything imported them
        subpackages = {"model": {"local"}, "service": {"queue"}}.get(stage, set())
        assert public <= set(module.__all__) | subpackages, stage


def test_every_exception_class_lives_in_one_module():
    import judge._errors as errors

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for stage in (*STAGES, "model.local"):
        importlib.import_module(f"judge.{stage}")
    for cls in subclasses(judge.DSTJudgeError):
        assert cls.__module__ == errors.__name__, cls


def test_exception_tree():
    assert issubclass(judge.InputError, judge.DSTJudgeError)
    assert issubclass(judge.DataMismatchError, judge.InputError)
    assert issubclass(judge.OptionError, judge.DSTJudgeError)
    assert issubclass(judge.ModelError, judge.DSTJudgeError)
    assert issubclass(judge.CassetteMiss, judge.ModelError)
    assert issubclass(judge.RunLocked, judge.RunDirectoryError)
    assert issubclass(judge.RunConflict, judge.RunDirectoryError)
    assert judge.exit_status_for(judge.RunLocked("x")) == judge.ExitStatus.RUN_DIRECTORY == 6
    assert judge.exit_status_for(judge.ModelError("x", fatal=True, status=401)) == 5
    assert judge.exit_status_for(judge.CassetteMiss("x")) == 2
    assert judge.exit_status_for(judge.BudgetReached("x")) == 3
    assert judge.exit_status_for(judge.RunInterrupted("x", signal_number=15)) == 143
    err = judge.InputError("bad", path="f.jsonl", line=3, field="turns[0].user")
    assert str(err) == "f.jsonl:3: field 'turns[0].user': bad"


def test_the_dry_run_is_named_for_cost_and_answers_to_its_old_name():
    """One name per idea: "estimate" is the statistical estimate (judge.analysis); the calls,
    tokens and cost before a run are the dry run (judge/pipeline/_cost.py). The old name
    still works for code written before the rename."""
    import judge.pipeline

    assert judge.dry_run is judge.pipeline.dry_run is judge.estimate
    assert judge.dry_run.__module__ == "judge.pipeline._cost"
    assert "estimate" not in judge.__all__
    assert not importlib.util.find_spec("judge.pipeline._estimate")
