"""Reviewers' decisions on a judge run's label-error candidates (the web's candidates queue):
accept the suggested value, give another, or reject ("the annotation is right"); an
adjudicator's decision where reviewers disagree. One decision per reviewer per candidate (and
one adjudication per candidate), with the reviewer (the token's name) and the time.

Decisions become a corrections file (:func:`corrections_records`, the format of
``judge/data/formats/corrections.schema.json``): an accept or an edit is a correction to the
decided value, a reject a correction whose value is the annotation's own, an adjudication a
correction with ``adjudicated: true``; each names its candidate and the value it replaces
(``was``), so a file applied to an annotation that changed since is refused as stale.

Who adjudicates: a token with the ``admin`` scope, or a ``review`` token named
``adjudicator`` (:func:`may_adjudicate`)."""

from __future__ import annotations

import builtins
import itertools
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from ..._errors import ServiceError
from ...analysis import candidate_id as candidate_id  # the one id (re-exported: its old home)
from ...analysis import cohen_kappa
from ..auth import Principal
from ..db import Database, correction_decisions, now

ACTIONS = ("accept", "edit", "reject")
ADJUDICATOR = "adjudicator"
"""The token name that may adjudicate without the admin scope."""


def may_adjudicate(principal: Principal) -> bool:
    return principal.allows("admin") or (principal.token_name == ADJUDICATOR
                                         and principal.allows("review"))


class DecisionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, principal: Principal, job_id: str, values: dict[str, Any], *,
            adjudicated: bool = False) -> dict[str, Any]:
        """Record (or replace) this reviewer's decision on one candidate of a run."""
        if adjudicated and not may_adjudicate(principal):
            raise ServiceError("only an admin token or the reviewer named 'adjudicator' may "
                               "adjudicate", status=403)
        if values.get("action") not in ACTIONS:
            raise ServiceError(f"action must be one of {', '.join(ACTIONS)}", status=422,
                               field="action")
        key = {"project_id": principal.project_id, "job_id": job_id,
               "candidate": values["candidate"], "reviewer": principal.token_name,
               "adjudicated": adjudicated}
        moment = now()
        data = {**key, **{k: values.get(k) for k in ("dialogue_id", "turn_index", "slot",
                                                     "gold", "action", "value", "was",
                                                     "note")},
                "token_id": principal.token_id, "updated_at": moment}
        try:
            return self._upsert(key, data, moment)
        except sa.exc.IntegrityError:
            # the same reviewer's first decision on the candidate, saved at the same moment on
            # another replica (Postgres): the row exists now, so this one updates it
            return self._upsert(key, data, moment)

    def _upsert(self, key: dict[str, Any], data: dict[str, Any], moment: float
                ) -> dict[str, Any]:
        with self.db.write() as conn:
            found = conn.execute(sa.select(correction_decisions.c.id).where(
                *(correction_decisions.c[k] == v for k, v in key.items()))).first()
            if found is None:
                conn.execute(correction_decisions.insert().values(**data, created_at=moment))
            else:
                conn.execute(correction_decisions.update()
                             .where(correction_decisions.c.id == found.id).values(**data))
            row = conn.execute(sa.select(correction_decisions).where(
                *(correction_decisions.c[k] == v for k, v in key.items()))).one()
        return _public(row)

    def list(self, project_id: str, job_id: str) -> builtins.list[dict[str, Any]]:
        query = (sa.select(correction_decisions)
                 .where(correction_decisions.c.project_id == project_id,
                        correction_decisions.c.job_id == job_id)
                 .order_by(correction_decisions.c.id))
        with self.db.read() as conn:
            return [_public(row) for row in conn.execute(query)]


def _public(row: sa.Row[Any]) -> dict[str, Any]:
    data = dict(row._mapping)
    data.pop("project_id", None)
    data.pop("token_id", None)
    return data


def outcomes(decisions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per candidate: each reviewer's decided value, the adjudication, and its state
    (``agreed``, ``disputed``: reviewers gave different values and nobody adjudicated,
    ``adjudicated``), with the value it ends at (None while disputed)."""
    found: dict[str, dict[str, Any]] = {}
    for d in decisions:
        entry = found.setdefault(d["candidate"], {"reviews": {}, "adjudication": None,
                                                  "was": d["was"]})
        if d["adjudicated"]:
            entry["adjudication"] = d
        else:
            entry["reviews"][d["reviewer"]] = d
    for entry in found.values():
        values = {r["value"] for r in entry["reviews"].values()}
        if entry["adjudication"] is not None:
            entry["state"], entry["value"] = "adjudicated", entry["adjudication"]["value"]
        elif len(values) > 1:
            entry["state"], entry["value"] = "disputed", None
        else:
            entry["state"], entry["value"] = "agreed", next(iter(values), None)
        entry["changes"] = entry["state"] != "disputed" and entry["value"] != entry["was"]
    return found


def progress(decisions: list[dict[str, Any]], total: int) -> dict[str, int]:
    """A queue's progress: candidates in it, reviewed (by anyone), accepted (ending at a
    value other than the annotation's), rejected, in dispute, adjudicated."""
    found = outcomes(decisions)
    settled = [e for e in found.values() if e["state"] != "disputed"]
    return {"candidates": total, "reviewed": len(found),
            "accepted": sum(e["changes"] for e in settled),
            "rejected": sum(not e["changes"] for e in settled),
            "disputed": sum(e["state"] == "disputed" for e in found.values()),
            "adjudicated": sum(e["state"] == "adjudicated" for e in found.values())}


def reviewer_agreement(decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """How often reviewers who decided the same candidate decided it the same way: the share
    of such (candidate, pair of reviewers) with the same value, and Cohen's kappa on whether
    they changed the annotation (accept or edit) or not (reject), pooled over pairs."""
    pairs: list[tuple[bool, bool, bool]] = []  # (first changes, second changes, same value)
    for entry in outcomes(decisions).values():
        reviews = sorted(entry["reviews"].items())
        for (_, a), (_, b) in itertools.combinations(reviews, 2):
            pairs.append((a["value"] != a["was"], b["value"] != b["was"],
                          a["value"] == b["value"]))
    shared = {d["candidate"] for d in decisions if not d["adjudicated"]}
    both = sum(len(e["reviews"]) > 1 for e in outcomes(decisions).values())
    if not pairs:
        return {"candidates_shared": both, "pairs": 0, "same": None, "kappa": None,
                "candidates_reviewed": len(shared)}
    n = len(pairs)
    kappa = cohen_kappa([a for a, _, _ in pairs], [b for _, b, _ in pairs], (False, True))
    return {"candidates_shared": both, "pairs": n,
            "same": sum(same for _, _, same in pairs) / n, "kappa": kappa,
            "candidates_reviewed": len(shared)}


def _time(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).replace(microsecond=0).isoformat()


def corrections_records(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions as corrections-file records (every reviewer's, then the adjudication),
    in the order they were first given."""
    out = []
    for d in decisions:
        record: dict[str, Any] = {
            "dialogue_id": d["dialogue_id"], "turn_index": d["turn_index"], "slot": d["slot"],
            "value": d["was"] if d["action"] == "reject" else d["value"], "gold": d["gold"],
            "reviewer": d["reviewer"], "time": _time(d["updated_at"]), "was": d["was"],
            "candidate": d["candidate"]}
        if d["note"]:
            record["note"] = d["note"]
        if d["adjudicated"]:
            record["adjudicated"] = True
        out.append(record)
    return out
