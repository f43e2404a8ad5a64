"""Options shared by several commands, generated from :class:`~judge.JudgeConfig` so that every
judge option has one name, one help text and one default across CLI, environment, config file
and the service (and none is listed twice by hand)."""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError
from rich.console import Console

from .._config import JudgeConfig, load_config
from .._errors import OptionError
from .._io import write_text
from .._validation import first_problem
from ._convert import load_dialogues_noted, load_schema_noted
from ._report import say

if TYPE_CHECKING:
    from ..data import DialogueSet, PredictionSet, Schema
    from ..metrics import MetricOptions

ENDPOINT = ("model", "base_url")
GENERATION = ("temperature", "top_p", "seed", "max_tokens", "response_format")
METHOD = ("method", "prompt_variant", "semantics", "rule_match", "reasks")
TRANSPORT = ("timeout", "max_retries", "concurrency", "http_backend", "rpm", "tpm",
             "prompt_cache_key", "stop_grace")
COST = ("budget", "prices")
CACHE = ("cache_dir",)
REPLIES = ("max_reply_bytes", "max_reply_depth", "max_reply_chars")
ALL = ENDPOINT + GENERATION + METHOD + TRANSPORT + REPLIES + COST + CACHE
"""Every config field the command line offers (the key and OpenAI headers come from the
environment only, so they never land in a shell history)."""

_METAVARS = {"budget": "USD", "prices": "FILE", "cache_dir": "DIR", "base_url": "URL",
             "stop_grace": "SECONDS"}


def _choices(annotation: Any) -> list[Any] | None:
    """The values of a ``Literal`` (possibly ``| None``) annotation."""
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _choices(arg)
            if found:
                return found
    return None


def _scalar(annotation: Any) -> type:
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kind = args[0]
    return kind if kind in (int, float) else str


def _default_text(name: str) -> str:
    field = JudgeConfig.model_fields[name]
    if field.default_factory is not None:
        return "user cache directory" if name == "cache_dir" else "computed"
    default = field.default
    if default is None:
        return {"base_url": "the OpenAI API", "rule_match": "per method",
                "prices": "packaged table"}.get(name, "unset")
    return str(default).lower() if isinstance(default, bool) else str(default)


def add_config_options(parser: argparse.ArgumentParser, names: Iterable[str], *,
                       title: str = "judge options (CLI > DST_JUDGE_* environment > --config)",
                       config_file: bool = True) -> None:
    """Add ``--<name>`` for the given config fields, with help and default from the config."""
    group = parser.add_argument_group(title)
    if config_file:
        group.add_argument("--config", metavar="FILE",
                           help="JSON or TOML file with any judge option (underscored names)")
    for name in names:
        field = JudgeConfig.model_fields[name]
        flag = "--" + name.replace("_", "-")
        text = (field.description or name.replace("_", " ")).rstrip(".")
        text += f" (default: {_default_text(name)})"
        text = text.replace("%", "%%")
        if field.annotation is bool:
            group.add_argument(flag, action="store_true", default=None, help=text)
            continue
        choices = _choices(field.annotation)
        if choices:
            group.add_argument(flag, choices=choices, help=text)
        else:
            group.add_argument(flag, type=_scalar(field.annotation), help=text,
                               metavar=_METAVARS.get(name, name.split("_")[-1].upper()))
    if "cache_dir" in names:
        group.add_argument("--no-cache", action="store_true",
                           help="neither read nor write the reply cache")


def add_local_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", action="store_true",
                        help="use the server of 'dst-judge local serve' (few-shot prompts "
                        "unless --prompt-variant says otherwise)")


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", metavar="FILE",
                        help="rule file of the judge's filters (default: the packaged one for "
                        "the schema)")


def config_from_args(args: argparse.Namespace, **overrides: Any) -> JudgeConfig:
    """The one config: CLI values where given, then environment, config file, defaults."""
    values = {name: getattr(args, name) for name in JudgeConfig.model_fields
              if getattr(args, name, None) is not None}
    if getattr(args, "no_cache", False):
        values["use_cache"] = False
    if getattr(args, "local", False):
        from ..model.local import local_config_values

        for name, value in local_config_values().items():
            values.setdefault(name, value)
    values.update(overrides)
    return load_config(values, getattr(args, "config", None))


def add_data_options(parser: argparse.ArgumentParser, *, many: bool = False,
                     predictions: bool = True, many_help: str = "one table column each") -> None:
    group = parser.add_argument_group("data")
    group.add_argument("--schema", required=True, help="schema JSON file")
    group.add_argument("--dialogues", required=True, help="dialogues JSON Lines file (.gz ok)")
    if predictions:
        group.add_argument("--predictions", required=True, nargs="+" if many else None,
                           metavar="P", help="predictions file" + (
                               f"s; {many_help}" if many else ""))
    group.add_argument("--dialogue-ids", metavar="FILE",
                       help="evaluate only the dialogues listed in FILE (one id per line)")
    group.add_argument("--limit", type=int, metavar="N",
                       help="evaluate only the first N dialogues (default: all)")


def prediction_paths(given: Sequence[str]) -> list[Path]:
    """Predictions files as given; a directory of ``*.jsonl(.gz)`` files stands for them (one
    system each), any other directory is one source (an SGD-style folder of dialogues)."""
    paths: list[Path] = []
    for name in given:
        path = Path(name)
        found = sorted(p for p in path.iterdir()
                       if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz"))
                       ) if path.is_dir() else []
        paths.extend(found or [path])
    return list(dict.fromkeys(paths))


def load_data(args: argparse.Namespace) -> tuple[Schema, DialogueSet]:
    """Schema and dialogues, narrowed by ``--dialogue-ids`` and ``--limit``."""
    from ..data import read_id_list
    # any known format loads (converted on the fly, noted on stderr): see _convert.py
    schema = load_schema_noted(args.schema)
    dialogues = load_dialogues_noted(args.dialogues, schema)
    if args.dialogue_ids:
        dialogues = dialogues.subset(read_id_list(args.dialogue_ids), source=args.dialogue_ids)
    if args.limit is not None:
        if args.limit < 1:
            raise OptionError("--limit must be at least 1")
        ids = [d.dialogue_id for d in dialogues.dialogues[: args.limit]]
        dialogues = dialogues.subset(ids)
    return schema, dialogues


def disambiguate(predictions: Sequence[PredictionSet]) -> None:
    """Give systems unique column names (file paths break ties)."""
    names = [p.name for p in predictions]
    for p in predictions:
        if names.count(p.name) > 1:
            p.name = p.path


def metric_options(**values: object) -> MetricOptions:
    """Metric options, with a validation error named by its CLI flag."""
    from ..metrics import MetricOptions
    try:
        return MetricOptions.model_validate(values)
    except ValidationError as exc:
        problem = first_problem(exc)
        flag = ("--" + str(problem.location[0]).replace("_", "-") if problem.location
                else "option")
        raise OptionError(f"{flag}: {problem.message}") from None


def write_json(path: str | None, data: Any, console: Console) -> None:
    """Write ``data`` as indented JSON to ``path`` when one was given."""
    if path:
        write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        say(console, f"wrote {path}")


def with_progress(progress: bool | None, console: Console, run: Any) -> Any:
    """Run with a live progress bar (calls, ETA, cache hits, errors, tokens, cost): when
    ``--progress`` says so, or by default when the terminal is interactive."""
    if not (console.is_terminal if progress is None else progress):
        return run(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("judging"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeRemainingColumn(), TextColumn("{task.fields[info]}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("judging", total=None, info="")

        def update(state: Any) -> None:
            spend = state.spend
            money = "" if spend is None or spend.price is None else f" · ${spend.usd:.4f}"
            tokens = 0 if spend is None else spend.prompt_tokens + spend.completion_tokens
            bar.update(task, total=state.total, completed=state.done,
                       info=f"cache hits {state.cache_hits} · errors {state.errors} · "
                            f"tokens {tokens}{money}")

        return run(update)


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar (default: when the terminal is interactive)")
