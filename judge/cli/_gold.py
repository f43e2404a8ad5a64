"""``--corrections``: the corrected gold that every command taking ``--gold`` can score
against, applied on the fly and named with a digest of what was applied. The applying is
:mod:`judge.data`'s (and :func:`judge.pipeline.corrected_rows` for a run's rows); here are the
options, the run's recorded files and the notes on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._errors import OptionError
from .._io import plural, printable

if TYPE_CHECKING:
    from ..data import CorrectedGold, DialogueSet, Located, Schema

if TYPE_CHECKING:
    from ..pipeline import Run


def add_corrections_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                           decided: bool = False) -> None:
    parser.add_argument(
        "--corrections", action="extend", nargs="+", default=[], metavar="FILE",
        help="corrections of the gold annotation (JSON Lines; see 'dst-judge validate "
        "corrections --print-schema'), applied on the fly to the version they correct; the "
        "corrected version is named VERSION+corr:DIGEST in every output (repeatable)"
        + ("; candidates they already decide (rejected ones too) are left out"
           if decided else ""))


def read_all(paths: Sequence[str]) -> list[Located]:
    """Every correction of the files; a file without any is an error (not an empty fix)."""
    from ..data import read_corrections
    return read_corrections(paths, each_nonempty=True)


def _note(result: CorrectedGold, paths: Sequence[str]) -> None:
    print(printable(
        f"dst-judge: gold {result.name} = {result.base} with "
        f"{plural(result.applied, 'correction')} from {', '.join(paths)} "
        f"({plural(result.changed_turns, 'turn')}, {plural(result.changed_slots, 'slot')} "
        "changed)"), file=sys.stderr)


def corrected_gold(dialogues: DialogueSet, schema: Schema | None, paths: Sequence[str],
                   gold: str | None) -> tuple[DialogueSet, str | None, CorrectedGold | None]:
    """For a command that scores one version: the dialogues with the corrected version added,
    and the version to score (``gold`` corrected; without ``gold``, the one version the
    corrections name)."""
    from ..data import apply_each, only_version
    if not paths:
        return dialogues, gold, None
    located = read_all(paths)
    if gold is None:
        gold = only_version(located, option="--gold")
    dialogues, (result,) = apply_each(dialogues, located, versions=[gold], schema=schema)
    _note(result, paths)
    return dialogues, result.name, result


def corrected_versions(dialogues: DialogueSet, schema: Schema | None, paths: Sequence[str],
                       versions: Sequence[str] | None
                       ) -> tuple[DialogueSet, list[str] | None, list[CorrectedGold]]:
    """For a command that scores several versions side by side: each version the corrections
    name (among ``versions``, default all) followed by its corrected version."""
    from ..data import apply_each
    if not paths:
        return dialogues, list(versions) if versions else None, []
    located = read_all(paths)
    wanted = [dialogues.resolve_version(v) for v in versions] if versions else list(
        dialogues.versions)
    named = {dialogues.resolve_version(c.correction.gold) for c in located
             if _carried(dialogues, c.correction.gold)}
    missing = sorted({c.correction.gold for c in located
                      if not _carried(dialogues, c.correction.gold)})
    if missing:
        raise OptionError(f"{dialogues.path} has no annotation version {', '.join(missing)} "
                          f"(the corrections correct it); the file has: "
                          f"{', '.join(dialogues.versions)}")
    if not named & set(wanted):
        raise OptionError(f"the corrections correct {', '.join(sorted(named))}, which is not "
                          f"among the versions asked for ({', '.join(wanted)})")
    dialogues, results = apply_each(dialogues, located, schema=schema,
                                    versions=[v for v in wanted if v in named])
    names = {result.base: result.name for result in results}
    ordered: list[str] = []
    for version in wanted:
        ordered.append(version)
        if version in names:
            ordered.append(names[version])
    for result in results:
        _note(result, paths)
    return dialogues, ordered, results


def _carried(dialogues: DialogueSet, version: str) -> bool:
    try:
        dialogues.resolve_version(version)
    except OptionError:
        return False
    return True


def add_run_corrections_options(parser: argparse.ArgumentParser, *, drawing: bool) -> None:
    """``--corrections`` for a command that reads a judge run's RULE verdicts (with the run's
    data files, by default the ones it recorded)."""
    parser.add_argument(
        "--corrections", action="extend", nargs="+", default=[], metavar="FILE",
        help=("corrections of the gold: adds the RULE verdicts of the corrected version "
              "(VERSION+corr:DIGEST) to the run, computed from its judged turns, so --gold can "
              "name it" if drawing else
              "the corrections a sample's corrected gold was drawn with (see 'labels sample "
              "--corrections'): its RULE verdicts are added to the run again"))
    parser.add_argument("--run-dialogues", metavar="FILE",
                        help="with --corrections: the run's dialogues file (default: the one "
                        "it recorded)")
    parser.add_argument("--run-schema", metavar="FILE",
                        help="with --corrections: the run's schema (default: the one it "
                        "recorded)")


def run_rows_corrected(run: Run, paths: Sequence[str], *, dialogues: str | None = None,
                       schema: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """A judge run's rows with the RULE verdicts and gold turn states of each corrected
    version added (no model call), and the corrected versions' names."""
    if not paths:
        return [dict(row) for row in run.rows], []
    from ..analysis import recorded_input
    from ..data import load_dialogues, load_schema
    from ..pipeline import corrected_rows

    located = read_all(paths)
    dialogues_path = dialogues or recorded_input(run, "dialogues")
    schema_path = schema or recorded_input(run, "schema")
    if dialogues_path is None or schema_path is None:
        missing = "dialogues" if dialogues_path is None else "schema"
        raise OptionError(f"--corrections needs the run's {missing} file, and the one run "
                          f"{run.path} recorded is not found from here: pass --run-{missing}")
    loaded_schema = load_schema(schema_path)
    loaded = load_dialogues(dialogues_path, schema=loaded_schema)
    rows, results = corrected_rows(run.rows, loaded, loaded_schema,
                                   run.summary.get("rule_match"), located)
    for result in results:
        _note(result, paths)
    return rows, [result.name for result in results]
