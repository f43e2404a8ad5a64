"""Terminal rendering of results (rich tables); JSON lives with the result objects.

Everything shown that comes from data (system names, slot names and values, refusals, error
texts, paths) is untrusted: it reaches rich only as :class:`~rich.text.Text` (never parsed as
markup, so ``[/x]`` or ``[bold`` in a system name print as written) and with control
characters removed (:func:`judge._io.printable`: no ANSI escapes, bells or carriage returns
from a data file or a server reach the terminal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from .._io import plural, printable
from ._layout import Field, cell_text, fit_table

if TYPE_CHECKING:
    from ..analysis import AgreementReport, AltTest, MethodTable, SystemTable
    from ..analysis.reports import Figure, MethodRow
    from ..metrics import MetricsReport
    from ..pipeline import DryRun


def text(value: Any, style: str = "") -> Text:
    """A value as inert text: printable characters only, never read as markup."""
    return Text(cell_text(value), style=style)


def line(*parts: Any) -> Text:
    """One message from pieces: ``(text, style)`` pairs keep our styling, anything else is
    data and passes through :func:`text`."""
    out = Text()
    for part in parts:
        out.append_text(Text(part[0], style=part[1]) if isinstance(part, tuple)
                        else text(part))
    return out


def say(console: Console, message: Any, *, soft_wrap: bool = False) -> None:
    """Print one plain message (paths, ids, counts from data) safely."""
    console.print(text(message), highlight=False, soft_wrap=soft_wrap)


def _table(title: Any) -> Table:
    return Table(title=text(title), title_justify="left")


def _add(table: Table, *cells: Any) -> None:
    table.add_row(*[text(cell) for cell in cells])


def _rows(report: MetricsReport) -> list[tuple[str, list[Any]]]:
    systems = [s.metrics for s in report.systems]
    rows: list[tuple[str, list[Any]]] = [
        ("JGA", [m["jga"] for m in systems]),
        ("Final-turn JGA", [m.get("final_turn_jga") for m in systems]),
        ("Slot accuracy (SA)", [m["sa"] for m in systems]),
        ("Average goal accuracy (AGA)", [m["aga"] for m in systems]),
        ("Relative slot accuracy (RSA)", [m["rsa"] for m in systems]),
    ]
    for lam in systems[0]["fga"]:
        rows.append((f"FGA λ={lam}", [m["fga"][lam] for m in systems]))
    rows += [
        ("TurnMatch", [m["turn_match"] for m in systems]),
        ("Turn update accuracy", [m["turn_update_accuracy"] for m in systems]),
        ("GCA", [m["gca"]["gca"] for m in systems]),
        ("  GCA value P / R", [_pair(m["gca"]["vp"], m["gca"]["vr"]) for m in systems]),
        ("  GCA label P / R", [_pair(m["gca"]["lp"], m["gca"]["lr"]) for m in systems]),
        ("  GCA counts C/W/O/M", ["/".join(str(v) for v in m["gca"]["counts"].values())
                                 for m in systems]),
        ("Slot precision", [m["slot_precision"] for m in systems]),
        ("Slot recall", [m["slot_recall"] for m in systems]),
        ("Slot F1", [m["slot_f1"] for m in systems]),
    ]
    for version in systems[0]["rule_tsa"]:
        rows.append((f"RULE TSA vs {version}", [m["rule_tsa"][version] for m in systems]))
    if any(m.get("dstc") for m in systems):
        for key, label in (("accuracy", "DSTC slot accuracy (sched. 1)"),
                           ("l2", "DSTC slot L2 (sched. 1)"), ("mrr", "DSTC slot MRR (sched. 1)")):
            rows.append((label, [(m["dstc"] or {}).get("schedule1", {}).get("slot_mean", {})
                                 .get(key) for m in systems]))
    return rows


def _pair(a: float | None, b: float | None) -> str:
    return f"{cell_text(a)} / {cell_text(b)}"


def print_metrics(report: MetricsReport, console: Console | None = None) -> None:
    """A readable table, one column per predictions file, then notes on the inputs."""
    console = console or Console()
    opts = report.options
    title = (f"Exact-match metrics vs gold {opts['gold']} · match={opts['match']} · "
             f"{report.data['num_dialogues']} dialogues, {report.data['num_turns']} turns")
    fields = [Field("metric (%)", whole=False),  # figures and system names never cut
              *(Field(system.name, "right") for system in report.systems)]
    console.print(fit_table(fields, ([label, *values] for label, values in _rows(report)),
                            title=title))
    for system in report.systems:
        inputs = system.inputs
        oos = inputs["out_of_schema_slots"]
        if oos:
            hints = inputs.get("out_of_schema_suggestions") or {}
            names = ", ".join(
                name + (f": closest schema slot {hints[name]}" if hints.get(name) else "")
                for name in list(oos)[:5]) + (" ..." if len(oos) > 5 else "")
            console.print(line((printable(system.name), "yellow"),
                               f": {plural(len(oos), 'predicted slot name')} outside the schema "
                               f"in {plural(inputs['turns_with_out_of_schema_slots'], 'turn')} "
                               f"({names}); "
                               "they count as errors."))
        if inputs.get("renamed_slots"):
            count = sum(inputs["renamed_slots"].values())
            console.print(line((printable(system.name), "cyan"),
                               f": {plural(count, 'predicted slot name')} read as the schema's "
                               f"({', '.join(list(inputs['renamed_slots'])[:3])})."))
        if inputs["integration_mismatches"]:
            console.print(line((printable(system.name), "yellow"),
                               f": {plural(inputs['integration_mismatches'], 'turn')} whose "
                               "pred_turn_state does not integrate into pred_state, e.g. "
                               f"{inputs['integration_examples'][0]}"))


def print_evaluation(summary: dict[str, Any], console: Console | None = None) -> None:
    """The judge run at a glance: TSA, judge JGA, RULE agreement, calls and errors."""
    console = console or Console()
    table = _table(f"LLM judge · method={summary['method']} · "
                   f"semantics={summary['semantics']} · {summary['data']['system']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    _add(table, "turns scored / with errors",
                  f"{summary['scored_turns']} / {summary['error_turns']}")
    _add(table, "Turn state accuracy (TSA, %)", cell_text(summary["tsa"]))
    _add(table, "Judge JGA (%)", cell_text(summary["judge_jga"]))
    for version, figures in summary["rule"].items():
        _add(table, f"RULE TSA vs {version} (%, {summary['rule_match']})",
                      cell_text(figures["tsa"]))
        _add(table, f"agreement judge ~ RULE-{version} (%)", cell_text(figures["agreement"]))
    calls = summary["calls"]
    _add(table, "calls planned / skipped (empty state)",
                  f"{calls['planned']} / {calls['skipped']}")
    if "sent" in calls:
        _add(table, "requests sent / cache hits / retries",
                      f"{calls['sent']} / {calls['cache_hits']} / {calls['retries']}")
    _add(table, "re-asks / failed calls", f"{calls['reasks']} / {calls['failed']}")
    tokens = summary["tokens"]
    _add(table, "tokens prompt / completion / cached prompt",
                  f"{tokens['prompt_tokens']} / {tokens['completion_tokens']} / "
                  f"{tokens['cached_prompt_tokens']}")
    check = summary.get("token_check") or {}
    if check.get("requests") and check["prompt_tokens"]["reported"]:
        prompt, cached = check["prompt_tokens"], check["cached_prompt_tokens"]
        table.add_row(f"prompt tokens counted ({check['tokenizer']}) / reported",
                      f"{prompt['counted']} / {prompt['reported']} ({prompt['error']:+.2%}); "
                      f"cached: estimated {cached['estimated']} / reported {cached['reported']}")
    share = summary.get("static_prompt_share")
    _add(table, "static share of prompt text", "—" if share is None else f"{100 * share:.1f} %")
    console.print(table)
    if summary.get("judge_jga") is not None:
        from .._glossary import JUDGE_JGA_SHORT

        console.print(JUDGE_JGA_SHORT + " (dst-judge evaluate --help defines it)",
                      style="dim", highlight=False)
    for example in summary["errors"]["examples"]:
        console.print(line(("error row", "yellow"), " ", example), highlight=False)


def _simple_table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]],
                  console: Console, *, labels: bool = False) -> None:
    """Names or labels in the first column, figures in the others; nothing cut or split at
    any width (:mod:`._layout`). ``labels``: the first column is prose and may wrap."""
    fields = [Field(name, "left" if n == 0 else "right", whole=not (labels and n == 0))
              for n, name in enumerate(header)]
    console.print(fit_table(fields, rows, title=title))


def print_agreement(report: AgreementReport, console: Console | None = None) -> None:
    """Pairwise agreement and chance-corrected coefficients; with human labels the reviewers'
    agreement and the re-evaluation figure with its caveat; with a sample, population
    estimates."""
    from ..analysis.tables import (
        AGREEMENT_HEADER,
        COEFFICIENT_HEADER,
        LABELS_ONLY_NOTE,
        NOT_TIED,
        POPULATION_HEADER,
        REEVALUATION_HEADER,
        REEVALUATION_NOTE,
        REVIEWER_HEADER,
        format_agreement,
        format_coefficients,
        format_estimates,
        format_population,
        format_reevaluation,
        format_reviewers,
        sample_words,
    )

    console = console or Console()
    population = report.get("population")
    if population:  # the estimate asked for first, before the agreement tables
        print_estimates(population, console)
    boot = report["bootstrap"]
    level = f"{100 * boot['confidence']:g} %"
    tie: Mapping[str, Any] = report.get("labels_tie") or {}
    untied = f" — human figures rest on {NOT_TIED}" if tie.get("warning") else ""
    if untied:
        console.print(text(f"Warning: {tie['warning']}.", style="yellow"))
    _simple_table(f"Agreement ({report['judged_turns']} judged turns, {report['dialogues']} "
                  f"dialogues; {level} bootstrap intervals over dialogues, {boot['n_boot']} "
                  f"replicates){untied}", AGREEMENT_HEADER, format_agreement(report), console)
    _simple_table("Chance-corrected agreement (same pairs and intervals)", COEFFICIENT_HEADER,
                  format_coefficients(report), console)
    rows = format_reviewers(report)
    if rows:
        _simple_table("Agreement between the human reviewers (all their labels)",
                      REVIEWER_HEADER, rows, console)
    print_alt_test(report.get("alt_test"), level, console)
    rows = format_reevaluation(report)
    if rows:
        _simple_table("Accuracy after human re-evaluation (the paper's figure)",
                      REEVALUATION_HEADER, rows, console)
        console.print(REEVALUATION_NOTE, highlight=False)
    if population:
        labelled, drawn = population["labelled_turns"], population["sampled_turns"]
        _simple_table(f"Population agreement from the {sample_words(population)} ({labelled} "
                      f"of {drawn} drawn turns labelled, population "
                      f"{population['population_turns']} turns; {level} bootstrap "
                      f"intervals){untied}",
                      POPULATION_HEADER, format_population(report), console)
        if population["uncovered_turns"]:
            console.print(text(f"{population['uncovered_turns']} turns belong to strata with "
                               "no labelled turn; the estimates leave them out", style="yellow"))
        if format_estimates(population):
            console.print(text(LABELS_ONLY_NOTE))
    human = report.get("human")
    if human and human["unknown"]["count"]:
        console.print(text(f"{plural(human['unknown']['count'], 'human label')} "
                           f"{'refers' if human['unknown']['count'] == 1 else 'refer'} to turns "
                           "this run does not contain", style="yellow"))
    if human and human.get("unsure"):
        console.print(text(f"{plural(human['unsure'], 'label')} marked unsure "
                           f"{'is' if human['unsure'] == 1 else 'are'} left out of every figure"))
    undecided = (human.get("undecided") if human else None) or {}
    _print_undecided(console, undecided,
                     lambda n: f"{plural(n, 'turn')} without a label because")
    if undecided.get("adjudicated"):
        console.print(text(f"{plural(undecided['adjudicated'], 'turn')} decided by the "
                           "adjudicator where the other reviewers split"))
    if report.get("population_note"):
        console.print(text(report["population_note"], style="yellow"))
    if untied:  # said again below the figures, where a reader of the estimates looks
        console.print(text(f"Warning: these figures rest on {NOT_TIED} (see the warning "
                           "above).", style="yellow"))


def _turn_list(block: dict[str, Any]) -> str:
    """``D1 turn 2, D4 turn 0 (and 3 more)``: the examples a count carries."""
    shown = ", ".join(f"{e['dialogue_id']} turn {e['turn_index']}" for e in block["examples"])
    more = block["count"] - len(block["examples"])
    return shown + (f" (and {more} more)" if more > 0 else "")


def print_alt_test(block: AltTest | None, level: str, console: Console) -> None:
    """The judge against the reviewers' own agreement: per reviewer, how often the judge and
    the reviewer agree with the other reviewers, and the alternative-annotator test."""
    from ..analysis.tables import ALT_TEST_HEADER, format_alt_test

    if not block:
        return
    _simple_table(f"Judge vs reviewers: alternative-annotator test (ε = {block['epsilon']:g}, "
                  f"{block['correction']} at q = {block['q']:g}; {level} intervals over "
                  "dialogues)", ALT_TEST_HEADER, format_alt_test(block), console)
    if block["enough_overlap"]:
        say(console, f"winning rate ω = {block['winning_rate']:.2f}; average ρ judge = "
                     f"{block['average_advantage']:.2f} (the share of turns the judge aligns "
                     "with the others at least as well as the reviewer; ties, "
                     f"{100 * block['tie_share']:.0f} % of turns, count as wins): "
                     f"{block['verdict']}")
    else:
        console.print(text(block["verdict"], style="yellow"))


def print_estimates(block: Mapping[str, Any], console: Console) -> None:
    """The judge, labels-only and prediction-powered estimates side by side, with what was
    left out of them."""
    from ..analysis.tables import ESTIMATE_HEADER, NOT_TIED, format_estimates

    rows = format_estimates(block)
    if not rows:
        return
    estimation = block.get("estimation") or block
    design = estimation["design"]
    level = f"{100 * estimation['confidence']:g} %"
    what = f"difference {estimation['difference']}, " if estimation.get("difference") else ""
    untied = f" — on {NOT_TIED}" if block.get("labels_tied") is False else ""
    fields = [Field(name, "left" if name in ("metric", "estimate", "note") else "right",
                    whole=name != "note") for name in ESTIMATE_HEADER]
    console.print(fit_table(fields, rows, title=(
        f"Estimates ({what}{design['design']} design by {design['unit']}, {level} t "
        f"intervals){untied}")))
    names = {"tsa": "TSA", "jga": "JGA", "success": "success"}
    methods = dict.fromkeys(figure["method"] for figures in block["estimates"].values()
                            for figure in figures.values() if figure.get("method"))
    freedom = ", ".join(f"{names.get(metric, metric)} {figures['labels']['df']:.1f}"
                        for metric, figures in block["estimates"].items()
                        if figures["labels"].get("df") is not None)
    for method in methods:
        console.print(text(f"Intervals: {method}" + (f"; degrees of freedom {freedom}"
                                                      if freedom else "")))
    for warning in dict.fromkeys(figure["warning"] for figures in block["estimates"].values()
                                 for figure in figures.values() if figure.get("warning")):
        console.print(text(f"Warning: {warning}", style="yellow"))
    left_out = estimation["left_out"]["count"]
    if left_out:
        console.print(text(f"{left_out} labelled turn(s) are not in the sample file: they count "
                           "for agreement but are left out of these estimates", style="yellow"))
    unlabelled = estimation["unlabelled_sampled_turns"]["count"]
    if unlabelled:
        console.print(text(f"{unlabelled} sampled turn(s) have no label yet; the estimates "
                           "treat them as missing at random within their stratum",
                           style="yellow"))
    undecided = estimation.get("undecided_sampled_turns") or {}
    _print_undecided(console, undecided,
                     lambda n: f"{n} sampled turn(s) without a label because")
    if undecided.get("count"):
        console.print(text(undecided["treatment"]))
        for metric, bounds in (undecided.get("bounds") or {}).items():
            cells = []
            for side in ("lower", "upper"):
                ppi = bounds[side]["ppi"]
                value = "n/a" if ppi["value"] is None else f"{ppi['value']:.1f}"
                ci = ppi.get("ci")
                cells.append(value + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else ""))
            console.print(text(f"{metric.upper()} ppi bounds: lower {cells[0]}, upper "
                               f"{cells[1]} ({undecided['bounds_meaning']})"))
    if block.get("sample_check"):
        console.print(text(f"sample checked: {block['sample_check']}", style="dim"))


def _kappa_cell(figure: Figure | None) -> str:
    """``0.41 [0.22, 0.58]``: kappa with its interval, in 17 characters at most."""
    if not figure or figure.get("value") is None:
        return "—"
    ci = figure.get("ci")
    return f"{figure['value']:.2f}" + (f" [{ci[0]:.2f},{ci[1]:.2f}]" if ci else "")


def print_methods(table: MethodTable, console: Console | None = None) -> None:
    """Judge methods side by side, laid out to fit 80 columns without cutting a name: one
    block of rows per method (its name on a line of its own), one row per reference rater."""
    console = console or Console()
    methods = table["methods"]
    untied = " (human figures rest on labels not tied to these runs)" \
        if table.get("labels_tied") is False else ""
    out = Table(title=text(f"Judge methods on the same {table['turns']} turns{untied}"),
                title_justify="left", box=None, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("method / vs", "left"), ("agree %", "right"), ("kappa [95% CI]", "right"),
        ("TSA %", "right"), ("JGA %", "right"), ("err", "right"))
    for name, justify in columns:  # a long label folds onto a second line, never cut
        out.add_column(name, justify=justify, no_wrap=name != "method / vs",
                       overflow="fold")
    labels = method_labels(methods)
    for m, label in zip(methods, labels, strict=True):
        out.add_row(text(label, style="bold"), "", "", text(m["tsa"]),
                    text(m["judge_jga"]), text(m["errors"]))
        for version, value in m["agreement"].items():
            rater = version if version == "human" else f"RULE-{version}"
            out.add_row(text(f"  {rater}"), text(value),
                        text(_kappa_cell((m.get("kappa") or {}).get(version))), "", "", "")
    console.print(out)
    for m, label in zip(methods, labels, strict=True):  # what each row judged
        console.print(text(f"{label}: {_run_names(m)} ({m['run']})"))
    console.print(text("calls / tokens: " + "; ".join(
        f"{label} {m['calls']} / {m['tokens']}" for m, label in zip(methods, labels,
                                                                    strict=True))),
                  soft_wrap=False)
    if table.get("warning"):
        console.print(text(f"warning: {table['warning']}", style="yellow"))


def method_labels(methods: Sequence[MethodRow]) -> list[str]:
    """One label per compared run, all different: the method's name, and where two runs share
    it (two systems under one method) the method with its run folder's name, then with the
    system, then with the whole run path, then numbered."""
    labels = [str(m["method"]) for m in methods]
    for extra in (lambda m: Path(str(m["run"])).name, lambda m: m.get("system") or "?",
                  lambda m: str(m["run"])):
        if len(set(labels)) == len(labels):
            return labels
        shared = {label for label in labels if labels.count(label) > 1}
        tried = [f"{label} · {extra(m)}" if label in shared else label
                 for label, m in zip(labels, methods, strict=True)]
        if len(set(tried)) > len(set(labels)):
            labels = tried
    if len(set(labels)) < len(labels):
        labels = [f"{label} #{n}" for n, label in enumerate(labels, 1)]
    return labels


def _run_names(method: MethodRow) -> str:
    """Under a method's name: the system, the predictions file and the model of its run."""
    parts = [f"system {method.get('system') or '?'}", method.get("predictions_file") or "?"]
    if method.get("model"):
        parts.append(f"model {method['model']}")
    return " · ".join(str(p) for p in parts)


def print_systems(table: SystemTable, console: Console | None = None) -> None:
    console = console or Console()
    systems = table["systems"]
    evaluators = list(systems[0]["tsa"])
    header = ("system", *[f"TSA {e}" for e in evaluators], *[f"JGA {e}" for e in evaluators])
    rows = [(s["system"], *[s["tsa"][e] for e in evaluators], *[s["jga"][e] for e in evaluators])
            for s in systems]
    _simple_table("DST systems under the judge and exact match (%)", header, rows, console)


def print_estimate(figures: DryRun, console: Console | None = None) -> None:
    """The dry run: what a run would send and cost, before any call."""
    console = console or Console()
    cost = figures["cost_usd"]

    def usd(value: float | None) -> str:
        return "no price for this model" if value is None else f"${value:,.2f}"

    rows: list[tuple[str, Any]] = [
        ("calls (planned / already cached / to send)",
         f"{figures['calls']} / {figures['already_cached']} / {figures['to_send']}"),
    ]
    systems = int(figures.get("systems", 1))
    if systems > 1:
        rows.append((f"requests shared by several systems ({plural(systems, 'system')}), "
                     "sent once", f"{figures['duplicates']:,}"))
    elif figures.get("duplicates"):
        rows.append(("identical requests, sent once", f"{figures['duplicates']:,}"))
    rows += [
        ("skipped (empty turn state)", figures["skipped"]),
        ("prompt tokens (static prefix)",
         f"{figures['prompt_tokens']:,} ({figures['static_prompt_tokens']:,})"),
        ("  of which response-format schema / chat format",
         f"{figures.get('response_format_tokens', 0):,} / "
         f"{figures.get('chat_overhead_tokens', 0):,}"),
        ("prompt tokens per call", f"{figures['prompt_tokens'] / max(1, figures['to_send']):,.0f}"),
        ("prompt tokens a prefix cache would serve", f"{figures['provider_cacheable_tokens']:,}"),
        ("completion tokens (assumed)", f"{figures['completion_tokens']:,}"),
        ("cost live", usd(cost["live"])),
        ("cost live with prompt caching", usd(cost["live_with_prompt_caching"])),
        ("cost through the Batch API", usd(cost["batch"])),
    ]
    _simple_table(f"Dry run · model {figures['model']} · nothing was sent", ("figure", "value"),
                  rows, console, labels=True)
    console.print(text(figures["note"]), highlight=False)


_UNDECIDED = (("tied", "the reviewers split evenly"), ("unsure", "every label is unsure"))


def _print_undecided(console: Console, undecided: dict[str, Any],
                     lead: Callable[[int], str]) -> None:
    """One warning line per kind of turn the reviewers left undecided (tied or all unsure)."""
    for kind, meaning in _UNDECIDED:
        block = undecided.get(kind) or {}
        if block.get("count"):
            console.print(text(f"{lead(block['count'])} {meaning}: {_turn_list(block)}",
                               style="yellow"))
