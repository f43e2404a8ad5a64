"""Edges of tokens that the mutation run (bench/mutation.py, group ``service-auth``) showed no
test held: the spending cap's bounds (the HTTP model checks them too, but ``serve token
create --spend-cap`` and the Python API reach ``create_token`` directly), the parsing of a
scope list, what each scope allows, the forms of the ``Authorization`` header, what a token
record shows and keeps back, revoking within a project, and how often ``last_used_at`` is
written."""

from __future__ import annotations

import hashlib
import json
import math
import re

import pytest
import sqlalchemy as sa

from judge._errors import OptionError, ServiceError
from judge.cli import main
from judge.service import Database, create_token, list_tokens, revoke_token
from judge.service.auth import _auth
from judge.service.auth._auth import Principal, TokenBook
from judge.service.db._db import projects, tokens
from tests.service.conftest import count_rows

CAP_REFUSED = "spend cap must be a number from 0 to 1,000,000,000 USD"


# --- the spending cap ----------------------------------------------------------------------------

@pytest.mark.parametrize("cap", [0, 0.0, 0.0001, 12.5, 1_000_000_000, 1e9])
def test_a_spending_cap_from_0_to_a_billion_usd_is_kept(db, cap):
    """Every cap in the documented range is accepted, both ends included (0: the token may
    not spend at all), and the token carries it."""
    token, record = create_token(db, "lab", "submit", name="capped", spend_cap_usd=cap)
    assert record["spend_cap_usd"] == cap
    assert TokenBook(db).resolve_token(token).spend_cap_usd == cap
    assert [t["spend_cap_usd"] for t in list_tokens(db, "lab")] == [cap]


@pytest.mark.parametrize("cap", [-1e-9, -0.01, -1, math.nextafter(1e9, math.inf), 1e9 + 1,
                                 1e12, math.nan, math.inf, -math.inf],
                         ids=["tiny-negative", "-0.01", "-1", "just-above-1e9", "1e9+1", "1e12",
                              "nan", "inf", "-inf"])
def test_a_spending_cap_outside_0_to_a_billion_is_refused(db, cap):
    """A negative, too large or non-finite cap is an option error with the range in its
    message, and no token (nor project) is made."""
    with pytest.raises(OptionError) as refused:
        create_token(db, "new-project", "submit", name="capped", spend_cap_usd=cap)
    assert str(refused.value) == CAP_REFUSED
    assert (count_rows(db, tokens), count_rows(db, projects)) == (0, 0)


def test_no_spending_cap_means_none(db):
    """A token made without a cap has none (not a cap of 0)."""
    token, record = create_token(db, "lab", "submit", name="free")
    assert record["spend_cap_usd"] is None
    assert TokenBook(db).resolve_token(token).spend_cap_usd is None


def test_the_command_line_refuses_a_cap_out_of_range_and_keeps_a_cap_of_0(tmp_path, capsys):
    """``serve token create --spend-cap`` answers a bad cap with exit code 2 and the range,
    never a traceback; a cap of 0 is made."""
    data = ["--data-dir", str(tmp_path), "--init"]
    for cap in ("-1", "1e10", "nan", "inf"):
        assert main(["serve", "token", "create", "--project", "lab", f"--spend-cap={cap}",
                     "--name", f"n{cap}", *data]) == 2, cap
        err = capsys.readouterr().err
        assert CAP_REFUSED in err and "Traceback" not in err, cap
    assert main(["serve", "token", "create", "--project", "lab", "--spend-cap=0", "--json",
                 "--name", "zero", *data]) == 0
    assert json.loads(capsys.readouterr().out)["spend_cap_usd"] == 0


# --- scopes --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "kept"), [
    ("read", ["read"]),
    ("read, review", ["read", "review"]),
    (" submit ,read ", ["submit", "read"]),
    ("review,read,review", ["review", "read"]),
    (",read,,admin,", ["read", "admin"]),
    (["admin"], ["admin"]),
    (["read", " submit", "read"], ["read", "submit"]),
])
def test_a_scope_list_is_trimmed_and_each_scope_kept_once(db, given, kept):
    """``--scopes "read, review"`` (spaces, a trailing comma, a repeat) means those scopes, in
    the order given, each once."""
    token, record = create_token(db, "lab", given, name="t")
    assert record["scopes"] == kept
    assert list(TokenBook(db).resolve_token(token).scopes) == kept


@pytest.mark.parametrize("given", ["", " , ", ",", "write", "read,write", "Read", "READ",
                                   "read;submit", "all", [], ["read", "owner"]])
def test_an_empty_or_unknown_scope_is_refused(db, given):
    """No scope, or one the service does not know (also in another case), is an option error
    that lists the valid scopes and repeats what was given; nothing is written."""
    with pytest.raises(OptionError) as refused:
        create_token(db, "lab", given, name="t")
    assert str(refused.value) == (f"scopes must be some of read, submit, review, admin "
                                  f"(got {given!r})")
    assert count_rows(db, tokens) == 0


ALLOWED = {
    "read": {"read"},
    "submit": {"read", "submit"},
    "review": {"read", "review"},
    "admin": {"read", "submit", "review", "admin"},
}


@pytest.mark.parametrize("scope", list(ALLOWED))
def test_each_scope_allows_what_the_docs_say_and_no_more(scope):
    """The scope table of docs/SERVICE.md: ``submit`` and ``review`` include ``read``;
    ``admin`` includes everything; nothing else is implied. A missing scope is a 403 that
    names it."""
    principal = Principal("tok_1", "t", "prj_1", "lab", (scope,))
    for wanted in ("read", "submit", "review", "admin"):
        assert principal.allows(wanted) is (wanted in ALLOWED[scope]), wanted
        if wanted in ALLOWED[scope]:
            principal.require(wanted)
        else:
            with pytest.raises(ServiceError) as refused:
                principal.require(wanted)
            assert refused.value.status == 403
            assert str(refused.value) == f"this token lacks the '{wanted}' scope"


def test_scopes_add_up():
    """A token with ``read,review`` plus ``submit`` may do what either allows."""
    principal = Principal("tok_1", "t", "prj_1", "lab", ("review", "submit"))
    assert all(principal.allows(s) for s in ("read", "submit", "review"))
    assert not principal.allows("admin")


# --- the Authorization header --------------------------------------------------------------------

@pytest.mark.parametrize("header", ["Bearer {t}", "bearer {t}", "BEARER {t}", "Bearer  {t} ",
                                    "Bearer {t}\t"])
def test_a_bearer_token_is_read_in_any_case_and_with_stray_spaces(db, header):
    """``Authorization: bearer <token>`` (the scheme is case-insensitive, as HTTP says) and
    spaces around the token resolve to the token's project and name."""
    token, record = create_token(db, "lab", "read", name="reader")
    principal = TokenBook(db).resolve(header.format(t=token))
    assert (principal.token_id, principal.token_name, principal.project_name) == (
        record["id"], "reader", "lab")


@pytest.mark.parametrize(("header", "message"), [
    (None, "missing bearer token (Authorization: Bearer <token>)"),
    ("", "missing bearer token (Authorization: Bearer <token>)"),
    ("Bearer", "expected 'Authorization: Bearer <token>'"),
    ("Bearer ", "expected 'Authorization: Bearer <token>'"),
    ("Bearer    ", "expected 'Authorization: Bearer <token>'"),
    ("Basic {t}", "expected 'Authorization: Bearer <token>'"),
    ("Token {t}", "expected 'Authorization: Bearer <token>'"),
    ("{t}", "expected 'Authorization: Bearer <token>'"),
    ("Bearer dsj_not-a-token", "invalid or revoked token"),
    ("Bearer {t}x", "invalid or revoked token"),
])
def test_a_missing_or_malformed_authorization_is_401(db, header, message):
    """Anything but ``Bearer <a live token>`` is a 401 saying what was expected."""
    token, _ = create_token(db, "lab", "read", name="reader")
    with pytest.raises(ServiceError) as refused:
        TokenBook(db).resolve(None if header is None else header.format(t=token))
    assert refused.value.status == 401 and str(refused.value) == message


# --- what a token record shows -------------------------------------------------------------------

def test_a_token_is_shown_once_and_stored_only_as_its_hash(db):
    """The clear token starts with ``dsj_`` and is 256 random bits; the record (and the list)
    shows a short prefix to recognise it by, never the token or its hash; the database holds
    the sha256 alone."""
    token, record = create_token(db, "lab", "read", name="reader")
    assert token.startswith("dsj_") and len(token) >= len("dsj_") + 43  # 32 bytes, base64
    assert record["prefix"] == token[:10] and len(record["prefix"]) < len(token) // 4
    listed = list_tokens(db)
    assert "hash" not in record and all("hash" not in item for item in listed)
    assert token not in json.dumps(record) + json.dumps(listed)
    with db.read() as conn:
        stored = conn.execute(sa.select(tokens.c.hash)).scalar()
    assert stored == hashlib.sha256(token.encode("utf-8")).hexdigest()
    other, _ = create_token(db, "lab", "read", name="second")
    assert other != token and other[:10] != token[:10]  # 36 random bits in the prefix


def test_a_token_is_revoked_only_within_its_own_project(db):
    """An admin of one project cannot revoke another project's token by its id; the owner
    project's admin can, once."""
    token, record = create_token(db, "lab", "read", name="reader")
    create_token(db, "other", "admin", name="boss")
    with db.read() as conn:
        other_id = conn.execute(sa.select(projects.c.id).where(projects.c.name == "other")
                                ).scalar()
        lab_id = conn.execute(sa.select(projects.c.id).where(projects.c.name == "lab")).scalar()
    assert revoke_token(db, record["id"], project_id=other_id) is False
    assert TokenBook(db).resolve_token(token).token_id == record["id"]
    assert revoke_token(db, record["id"], project_id=lab_id) is True
    assert revoke_token(db, record["id"], project_id=lab_id) is False  # already revoked
    with pytest.raises(ServiceError) as refused:
        TokenBook(db).resolve_token(token)
    assert refused.value.status == 401


def _last_used(db: Database, token_id: str) -> float | None:
    with db.read() as conn:
        return conn.execute(sa.select(tokens.c.last_used_at)
                            .where(tokens.c.id == token_id)).scalar()


def test_last_used_is_recorded_and_refreshed_at_most_once_a_minute(db, monkeypatch):
    """The token list shows when a token was last used: the first use is written at once,
    uses within the next minute write nothing (reads stay reads), a use over a minute later
    is written."""
    token, record = create_token(db, "lab", "read", name="reader")
    assert _last_used(db, record["id"]) is None
    clock = [1_800_000_000.0]
    monkeypatch.setattr(_auth, "now", lambda: clock[0])
    book = TokenBook(db)
    book.resolve_token(token)
    assert _last_used(db, record["id"]) == 1_800_000_000.0
    for later in (1.0, 30.0, 59.9):
        clock[0] = 1_800_000_000.0 + later
        book.resolve_token(token)
        assert _last_used(db, record["id"]) == 1_800_000_000.0, later
    clock[0] = 1_800_000_061.0
    book.resolve_token(token)
    assert _last_used(db, record["id"]) == 1_800_000_061.0


# --- names, rotation and the token list ----------------------------------------------------------

def test_a_taken_name_is_refused_with_the_name_and_the_way_out(db):
    """The 409 for a second live token of a name says which name and what to do instead, on
    the check before the insert and on the database's own unique index alike."""
    create_token(db, "lab", "review", name="ana")
    with pytest.raises(ServiceError) as refused:
        create_token(db, "lab", "read", name="ana")
    assert (refused.value.status, refused.value.field) == (409, "name")
    assert refused.value.reason == (
        "a live token of this project is already called 'ana'; a name is one reviewer "
        "(rotate that token for a new secret, or choose another name)")


def test_a_name_is_checked_within_its_own_project_before_the_insert(db, monkeypatch):
    """The check before the insert looks for a live token of this project and name: with the
    unique index's answer taken away, the check alone still refuses the second one."""
    create_token(db, "lab", "review", name="ana")
    looked: list[tuple[str, str]] = []
    real = _auth._live_token

    def spy(conn, project_id, name):
        looked.append((project_id, name))
        return real(conn, project_id, name)

    monkeypatch.setattr(_auth, "_live_token", spy)
    with pytest.raises(ServiceError) as refused:
        create_token(db, "lab", "read", name="ana")
    assert refused.value.status == 409
    with db.read() as conn:
        lab_id = conn.execute(sa.select(projects.c.id).where(projects.c.name == "lab")).scalar()
    assert looked == [(lab_id, "ana")]


def test_ids_and_secrets_have_their_documented_shapes(db):
    """Ids are a kind prefix and 16 hex digits; the secret is ``dsj_`` and 43 url-safe base64
    characters (32 random bytes); a new project starts with no settings."""
    assert re.fullmatch(r"job_[0-9a-f]{16}", _auth.new_id("job"))
    token, record = create_token(db, "lab", "read", name="reader")
    assert re.fullmatch(r"dsj_[A-Za-z0-9_-]{43}", token)
    assert re.fullmatch(r"tok_[0-9a-f]{16}", record["id"])
    assert re.fullmatch(r"prj_[0-9a-f]{16}", record["project_id"])
    assert record["project"] == "lab" and record["prefix"] == token[:10]
    with db.read() as conn:
        assert conn.execute(sa.select(projects.c.settings)).scalar() == {}


def test_rotating_an_unknown_name_is_404_and_makes_nothing(db):
    """Rotating a name with no live token, or in a project that does not exist, is a 404 on
    the ``name`` field that names both, and creates neither a token nor a project."""
    create_token(db, "lab", "review", name="ana")
    before = (count_rows(db, tokens), count_rows(db, projects))
    for project, name in (("lab", "bob"), ("nowhere", "ana")):
        with pytest.raises(ServiceError) as refused:
            _auth.rotate_token(db, project, name)
        assert (refused.value.status, refused.value.field) == (404, "name")
        assert refused.value.reason == f"no live token called {name!r} in project {project!r}"
    assert (count_rows(db, tokens), count_rows(db, projects)) == before


def test_a_rotated_token_is_a_new_secret_of_the_same_shape(db):
    """Rotation returns a fresh ``dsj_`` secret and a record like a new token's: its own id,
    the secret's prefix, the project's name and the id it replaces, never the hash."""
    old_secret, old = create_token(db, "lab", "review", name="ana")
    secret, record = _auth.rotate_token(db, "lab", "ana")
    assert re.fullmatch(r"dsj_[A-Za-z0-9_-]{43}", secret) and secret != old_secret
    assert re.fullmatch(r"tok_[0-9a-f]{16}", record["id"]) and record["id"] != old["id"]
    assert record["prefix"] == secret[:10] and "hash" not in record
    assert (record["project"], record["replaces"], record["name"]) == ("lab", old["id"], "ana")
    assert TokenBook(db).resolve_token(secret).token_id == record["id"]


def test_the_token_list_covers_every_project_or_one_in_creation_order(db, monkeypatch):
    """``list_tokens()`` lists every project's tokens, each with its project's name, oldest
    first; ``list_tokens(project)`` only that project's."""
    clock = [0.0]
    monkeypatch.setattr(_auth, "now", lambda: clock[0])
    for moment, project, name in ((30.0, "lab", "late"), (10.0, "other", "early"),
                                  (20.0, "lab", "middle")):
        clock[0] = moment
        create_token(db, project, "read", name=name)
    every = list_tokens(db)
    assert [(t["project"], t["name"]) for t in every] == [
        ("other", "early"), ("lab", "middle"), ("lab", "late")]
    assert [t["name"] for t in list_tokens(db, "lab")] == ["middle", "late"]
    assert list_tokens(db, "nowhere") == []


def test_a_new_database_has_no_tokens_table_until_it_is_migrated(tmp_path):
    fresh = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert _auth.has_tokens_table(fresh) is False
        fresh.migrate()
        assert _auth.has_tokens_table(fresh) is True
    finally:
        fresh.dispose()
