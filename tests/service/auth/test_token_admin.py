"""A project's admin manages the project's tokens and only those (docs/SERVICE.md, Auth; found
untested by bench/mutation.py): the list holds exactly the project's tokens in the order they
were made, named with their project; a revoked token is refused at once and revoking it again
is 404; scopes may be given as a list."""

from __future__ import annotations

import pytest

from judge.errors import OptionError
from judge.service import SCOPES, create_token


def test_the_token_list_holds_exactly_the_projects_tokens_in_order(service_env):
    api, tokens = service_env["api"], service_env["tokens"]
    db = service_env["service"].db
    made = create_token(db, "lab", ["read", "review"], name="carol")[1]
    assert made["scopes"] == ["read", "review"]
    listed = api.get("/v1/tokens", token=tokens["admin"]).json()["tokens"]
    names = [t["name"] for t in listed]
    assert names == ["alice", "reader", "bob", "root", "carol"], names
    assert {t["project"] for t in listed} == {"lab"}
    assert "eve" not in names and all("hash" not in t for t in listed)


def test_a_revoked_token_is_refused_at_once_and_cannot_be_revoked_twice(service_env):
    api, tokens = service_env["api"], service_env["tokens"]
    created = api.post("/v1/tokens", token=tokens["admin"],
                       json={"name": "temp", "scopes": ["read"]})
    assert created.status_code == 201, created.text
    token, token_id = created.json()["token"], created.json()["id"]
    assert api.get("/v1/me", token=token).status_code == 200
    assert api.delete(f"/v1/tokens/{token_id}", token=tokens["admin"]).status_code == 204
    assert api.get("/v1/me", token=token).status_code == 401
    again = api.delete(f"/v1/tokens/{token_id}", token=tokens["admin"])
    assert again.status_code == 404, again.text
    assert api.get("/v1/me", token=tokens["submit"]).status_code == 200  # the others work


def test_unknown_or_no_scopes_are_refused_naming_the_known_ones(service_env):
    db = service_env["service"].db
    for scopes in ("read,root", "", ["read", "everything"]):
        with pytest.raises(OptionError, match="scopes must be some of " + ", ".join(SCOPES)):
            create_token(db, "lab", scopes)
