"""Annotation audit: the turns where the judge and the gold annotation disagree, as one page.

A judge is only as trustworthy as its agreement with people, and the gold annotation it is
compared against has known flaws. The audit lists every turn where the judge's verdict differs
from the RULE (exact-match) verdict under some annotation version, broken down per slot with a
*kind* that guesses why, so an annotator can decide who is right. The page exports those
decisions; :func:`import_decisions` (``_audit_decisions``) turns them into human labels (one
per turn). When the page is given ranked label-error candidates (``_candidates``), it shows
that ranking too.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from .._io import write_text
from .._resources import package_dir
from ..pipeline import load_run
from ._candidates import Candidate
from ._labels import write_labels as write_labels  # re-exported: its old home
from ._review import ORDER_TRADEOFF
from ._values import ALTERNATIVE_SEPARATOR as ALTERNATIVE_SEPARATOR  # re-exported
from ._values import DONTCARE, NONE_VALUE, alternatives, mentioned, rule_equal, surface_form

MISSED_DONTCARE = "missed dontcare"
SURFACE_VARIANT = "surface variant"
STALE_CARRY_OVER = "stale carry-over"
ACCEPTED_RECOMMENDATION = "accepted recommendation"
VERSION_DISAGREEMENT = "annotation version disagreement"
VALUE_ERROR = "value error"
JUDGE_FLAG = "judge flag"

#: Every kind, in the order the rules are tried (the first that applies wins). A judge flag is
#: not a rule's guess: it is a slot the judge named although prediction and gold agree on it.
KINDS = (MISSED_DONTCARE, SURFACE_VARIANT, STALE_CARRY_OVER, ACCEPTED_RECOMMENDATION,
         VERSION_DISAGREEMENT, VALUE_ERROR, JUDGE_FLAG)

Value = str | None


@dataclass(frozen=True)
class AuditItem:
    """One (turn, slot) where judge and annotation disagree, with all the page shows of it."""

    dialogue_id: str
    turn_index: int
    slot: str
    kind: str
    predicted: Value
    gold: dict[str, Value]
    history: list[tuple[str, str]]
    system: str
    user: str
    pred_turn_state: dict[str, str]
    gold_turn_state: dict[str, dict[str, str]]
    verdict: bool
    rule: dict[str, bool]
    explanations: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    incorrect: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    cause: str = ""
    """Why the item is listed, when the values alone do not show it (judge flags, whole
    turns)."""

    @property
    def turn_key(self) -> str:
        """The turn an item belongs to; decisions are made per turn."""
        return f"{self.dialogue_id}::{self.turn_index}"

    @property
    def item_id(self) -> str:
        return f"{self.turn_key}::{self.slot}"

    @property
    def disagreeing_versions(self) -> list[str]:
        """Annotation versions whose RULE verdict differs from the judge's."""
        return [v for v, ok in self.rule.items() if ok != self.verdict]


# --- classification --------------------------------------------------------------------------


def _surface_equal(predicted: str, gold: str) -> bool:
    form = surface_form(predicted)
    return any(form == surface_form(option) for option in alternatives(gold))


def _is_dontcare(value: Value) -> bool:
    return value is not None and value.strip().lower() == DONTCARE


def classify(slot: str, predicted: Value, gold: dict[str, Value], system: str,
             earlier: set[tuple[str, str]]) -> str:
    """The kind of one slot-level difference; the rules are tried in the order of KINDS.

    ``gold`` maps each version to its gold turn-state value (None: no change this turn) and
    ``earlier`` holds the (slot, surface form) pairs the dialogue had before this turn.
    """
    values = list(gold.values())
    if any(_is_dontcare(g) for g in values) and not _is_dontcare(predicted):
        return MISSED_DONTCARE
    if predicted is not None and values and all(
            g is not None and _surface_equal(predicted, g) for g in values):
        return SURFACE_VARIANT
    if (predicted is not None and all(g is None for g in values)
            and (slot, surface_form(predicted)) in earlier):
        return STALE_CARRY_OVER
    if any(mentioned(option, system, loose=False) for g in values if g is not None
           for option in alternatives(g) if option.strip().lower() not in (NONE_VALUE, "")):
        return ACCEPTED_RECOMMENDATION
    if len(set(values)) > 1:
        return VERSION_DISAGREEMENT
    return VALUE_ERROR


def _explanations(calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"dimension": c.get("dimension"), "explanation": c.get("explanation"),
             "results": c.get("results"), "error": c.get("error"),
             "attempts": len(c.get("attempts") or [])} for c in calls]


def _row_pairs(row: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """Every (slot, surface form) a row's prediction or any gold version sets."""
    for slot, value in (row.get("pred_turn_state") or {}).items():
        if isinstance(value, str):
            yield slot, surface_form(value)
    for state in (row.get("gold_turn_state") or {}).values():
        for slot, value in (state or {}).items():
            if isinstance(value, str):
                for option in alternatives(value):
                    yield slot, surface_form(option)


def audit_items(rows: list[dict[str, Any]], *, ignore_none_pairs: bool = False
                ) -> list[AuditItem]:
    """Items of every turn whose judge verdict differs from a RULE verdict (error rows skipped).

    ``ignore_none_pairs`` drops the prediction's ``none`` deletions before comparing, as RULE
    does under the ``nospace`` policy.
    """
    history: dict[str, list[tuple[str, str]]] = {}
    earlier: dict[str, set[tuple[str, str]]] = {}
    items: list[AuditItem] = []
    for row in rows:
        dialogue_id = str(row["dialogue_id"])
        said = history.setdefault(dialogue_id, [])
        seen = earlier.setdefault(dialogue_id, set())
        verdict, rule = row.get("verdict"), row.get("rule") or {}
        if verdict is not None and any(ok != verdict for ok in rule.values()):
            items.extend(_turn_items(row, list(said), seen, ignore_none_pairs))
        if row.get("system"):
            said.append(("system", str(row["system"])))
        said.append(("user", str(row.get("user") or "")))
        seen.update(_row_pairs(row))
    return items


def _turn_items(row: dict[str, Any], history: list[tuple[str, str]],
                earlier: set[tuple[str, str]], ignore_none_pairs: bool) -> list[AuditItem]:
    pred = dict(row.get("pred_turn_state") or {})
    if ignore_none_pairs:
        pred = {s: v for s, v in pred.items() if v != NONE_VALUE}
    gold_states = {v: dict(s or {}) for v, s in (row.get("gold_turn_state") or {}).items()}
    slots = list(dict.fromkeys([*pred, *(s for g in gold_states.values() for s in g)]))
    system = str(row.get("system") or "")
    # the whole turn, with no slot named: the item listed when no slot disagrees, and what
    # every slot's item shares
    turn = AuditItem(
        dialogue_id=str(row["dialogue_id"]), turn_index=int(row["turn_index"]), slot="",
        kind=VALUE_ERROR, predicted=None, gold=dict.fromkeys(gold_states),
        history=history, system=system, user=str(row.get("user") or ""),
        pred_turn_state=dict(row.get("pred_turn_state") or {}),
        gold_turn_state=gold_states, verdict=bool(row["verdict"]),
        rule=dict(row.get("rule") or {}),
        explanations=_explanations(row.get("calls") or []),
        trace=list(row.get("trace") or []),
        incorrect=list(row.get("incorrect") or []), missed=list(row.get("missed") or []))
    items = []
    for slot in slots:
        gold = {v: g.get(slot) for v, g in gold_states.items()}
        predicted = pred.get(slot)
        if all(rule_equal(predicted, g) for g in gold.values()):
            continue
        kind = classify(slot, predicted, gold, system, earlier)
        items.append(replace(turn, slot=slot, kind=kind, predicted=predicted, gold=gold))
    listed = {item.slot for item in items}
    for slot, cause in _judge_flags(row, pred, gold_states).items():
        if slot not in listed:
            gold = {v: g.get(slot) for v, g in gold_states.items()}
            items.append(replace(turn, slot=slot, kind=JUDGE_FLAG, predicted=pred.get(slot),
                                 gold=gold, cause=cause))
    if not items:
        items.append(replace(turn, cause=_whole_turn_cause(row, ignore_none_pairs)))
    return items


def _show(value: Value) -> str:
    return "absent" if value is None else repr(value)


def _judge_flags(row: dict[str, Any], pred: dict[str, str],
                 gold_states: dict[str, dict[str, str]]) -> dict[str, str]:
    """The slots the judge flagged (incorrect or missed), each with a sentence saying so and
    what the prediction and the annotation hold for it."""
    named: dict[str, Any] = {}
    for step in row.get("trace") or []:
        if step.get("step") == "completeness" and step.get("slot"):
            named[str(step["slot"])] = step.get("value")
    flags: dict[str, str] = {}
    for slot in row.get("incorrect") or []:
        flags[str(slot)] = (f"the judge flags {slot} = {_show(pred.get(slot))} as incorrect")
    for slot in row.get("missed") or []:
        value = named.get(str(slot))
        said = f" = {value!r}" if value is not None else ""
        flags.setdefault(str(slot), f"the judge says the prediction missed {slot}{said}")
    for slot, text in flags.items():
        gold = {v: g.get(slot) for v, g in gold_states.items()}
        if all(g is None for g in gold.values()):
            text += "; no annotation version sets it in this turn"
        else:
            text += "; " + ", ".join(f"{v} has {_show(g)}" for v, g in gold.items())
        flags[slot] = text
    return flags


def _whole_turn_cause(row: dict[str, Any], ignore_none_pairs: bool) -> str:
    """Why a turn is listed although no slot differs and the judge named no slot."""
    verdict = row.get("verdict")
    rule = row.get("rule") or {}
    if verdict is False:
        return ("the judge rejects the turn without naming a slot, while every slot agrees "
                "with the annotation")
    against = ", ".join(f"RULE-{v}" for v, ok in rule.items() if ok is False) or "RULE"
    text = (f"{against} rejects the turn although every slot agrees with the annotation when "
            "a gold alternative (a|b) counts")
    nones = [s for s, v in (row.get("pred_turn_state") or {}).items() if v == NONE_VALUE]
    if ignore_none_pairs and nones:
        text += ("; the prediction's deletions (" + ", ".join(nones) + " = 'none') are left "
                 "out here, as nospace matching does")
    return text


# --- reading a run and writing the page ------------------------------------------------------


def load_run_dir(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``summary.json`` and the rows of ``judgments.jsonl`` (see ``judge.pipeline.load_run``)."""
    run = load_run(run_dir)
    return run.summary, run.rows


def _percent(value: Any) -> str:
    return f"{value:.1f} %" if isinstance(value, int | float) else "—"


def _header(summary: dict[str, Any], rows: list[dict[str, Any]],
            items: list[AuditItem]) -> dict[str, Any]:
    """What the page's header shows, formatted here so the template stays plain."""
    data = summary.get("data") or {}
    options = summary.get("options") or {}
    counts = Counter(i.kind for i in items)
    rule = summary.get("rule") or {}
    match = str(summary.get("rule_match") or "exact")
    return {
        "system": data.get("system") or "",
        "model": options.get("model") or "",
        "rule_heading": f"RULE ({match} match)",
        "facts": [
            ("Method", str(summary.get("method") or "—")),
            ("Semantics", str(summary.get("semantics") or "—")),
            ("TSA", _percent(summary.get("tsa"))),
            ("Judge JGA", _percent(summary.get("judge_jga"))),
            ("RULE match", str(summary.get("rule_match") or "—")),
            ("Turns", str(summary.get("turns", len(rows)))),
            ("Error turns", str(summary.get("error_turns",
                                            sum(r.get("verdict") is None for r in rows)))),
            ("Disagreeing turns", str(len({i.turn_key for i in items}))),
            ("Items", str(len(items))),
        ],
        "rule": [(v, _percent((r or {}).get("tsa")), _percent((r or {}).get("agreement")))
                 for v, r in rule.items()],
        "kinds": [(k, counts.get(k, 0)) for k in KINDS],
    }


def _item_record(item: AuditItem) -> dict[str, Any]:
    return {"id": item.item_id, "turn": item.turn_key, "dialogue_id": item.dialogue_id,
            "turn_index": item.turn_index, "slot": item.slot, "kind": item.kind,
            "predicted": item.predicted, "gold": item.gold, "verdict": item.verdict,
            "rule": item.rule, "disagree": item.disagreeing_versions, "cause": item.cause}


def _turn_record(item: AuditItem) -> dict[str, Any]:
    details = asdict(item)
    for name in ("slot", "kind", "predicted", "gold", "dialogue_id", "turn_index", "cause"):
        details.pop(name)
    details["history"] = [list(pair) for pair in item.history]
    return details


def embed_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` can end it early."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def _candidate_rows(candidates: Sequence[Candidate]) -> list[dict[str, Any]]:
    """What the page's ranking table shows of each candidate (the candidates file's fields)."""
    return [{"id": c.id, "rank": c.rank, "score": f"{c.score:.3f}",
             "dialogue_id": c.dialogue_id,
             "turn_index": c.turn_index, "slot": c.slot, "gold_version": c.gold_version,
             "gold_value": c.gold_value, "predicted": c.predicted,
             "systems": ", ".join(c.systems),
             "others": [(v, value) for v, value in c.other_versions.items()],
             "evidence": [(e.detail, e.weight) for e in c.evidence if e.code != "prior"]}
            for c in candidates]


def render_audit(summary: dict[str, Any], rows: list[dict[str, Any]],
                 items: list[AuditItem], candidates: Sequence[Candidate] | None = None,
                 order: str | None = None, *, pages: dict[str, Any] | None = None) -> str:
    """The self-contained HTML page (inline CSS and JS, data embedded as JSON).

    With ``candidates`` it also shows the ranked label-error candidates, in their rank order
    (``order``, ``review`` or ``evidence``, says which, with what each order costs and gains);
    without any judge ``rows`` it shows only them. ``pages`` (from :func:`write_audit`) says
    which page of a longer ranking ``candidates`` is, and links the others.
    """
    versions = list((summary.get("data") or {}).get("versions") or [])
    for row in rows:
        versions.extend(v for v in (row.get("rule") or {}) if v not in versions)
    turns: dict[str, dict[str, Any]] = {}
    for item in items:
        turns.setdefault(item.turn_key, _turn_record(item))
    data = {"versions": versions, "kinds": list(KINDS),
            "items": [_item_record(i) for i in items], "turns": turns}
    payload = embed_json(data)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(package_dir("analysis/templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    template = env.get_template("audit.html.j2")
    ranking = _candidate_rows(candidates) if candidates is not None else None
    audited = candidates[0].gold_version if candidates else None
    return template.render(header=_header(summary, rows, items), versions=versions,
                           kinds=KINDS, data_json=payload, has_run=bool(rows),
                           candidates=ranking, audited=audited, order=order,
                           order_tradeoff=ORDER_TRADEOFF.sentence(), pages=pages,
                           total=pages["total"] if pages else len(ranking or ()),
                           report_id=hashlib.sha256(payload.encode()).hexdigest()[:16])


CANDIDATES_PER_PAGE = 2000
"""Ranked candidates shown per page: a longer ranking continues on further pages beside the
first (``audit-candidates-2.html``, ...), each small enough for a browser to open at once (a
test set replicated ten times gives some 40,000 candidates, a 22 MB page in one piece)."""


def candidate_page_name(out_html: str | Path, number: int) -> str:
    """The file name of page ``number`` (1-based) of the ranking whose first page is
    ``out_html``."""
    path = Path(out_html)
    return path.name if number == 1 else f"{path.stem}-candidates-{number}{path.suffix}"


def write_audit(run_dir: str | Path | None, out_html: str | Path, *,
                candidates: Sequence[Candidate] | None = None, order: str | None = None,
                per_page: int = CANDIDATES_PER_PAGE) -> int:
    """Write the audit page of a run directory (and of ranked candidates, when given; with no
    run directory, of the candidates alone); returns the number of judge/RULE items listed.
    A ranking longer than ``per_page`` continues on further pages beside ``out_html``, linked
    from each other (:func:`candidate_page_name`)."""
    if run_dir is not None:
        summary, rows = load_run_dir(run_dir)
    else:
        summary, rows = {}, []
    ignore_none = "nospace" in str(summary.get("rule_match") or "")
    items = audit_items(rows, ignore_none_pairs=ignore_none)
    if candidates is None or len(candidates) <= per_page:
        write_text(out_html, render_audit(summary, rows, items, candidates, order))
        return len(items)
    count = -(-len(candidates) // per_page)
    names = [candidate_page_name(out_html, n) for n in range(1, count + 1)]
    hrefs = [quote(name) for name in names]  # relative links, whatever the file is called
    for number in range(1, count + 1):
        part = candidates[(number - 1) * per_page: number * per_page]
        pages = {"number": number, "count": count, "total": len(candidates),
                 "first_rank": part[0].rank, "last_rank": part[-1].rank,
                 "links": list(enumerate(hrefs, start=1)),
                 "previous": hrefs[number - 2] if number > 1 else None,
                 "next": hrefs[number] if number < count else None}
        if number == 1:
            text = render_audit(summary, rows, items, part, order, pages=pages)
        else:  # the further pages carry the ranking only
            text = render_audit({}, [], [], part, order, pages=pages)
        write_text(Path(out_html).with_name(names[number - 1]), text)
    return len(items)
