"""The web interface's pages in-process: login and the session cookie, CSRF, scopes, the
security headers, submitting with the CLI's checks, run detail filters and deep links,
review labels and their export."""

from __future__ import annotations

import json
import re
import time
from http.cookies import SimpleCookie
from typing import Any

import pytest

from judge.analysis import load_labels
from tests.conftest import predictions_with_slot_errors

from .conftest import draw_form, example_upload, import_run
from .synthetic import bundle, synthetic_rows

FINAL = ("succeeded", "failed", "cancelled", "stopped")


def _cookie(response: Any, name: str) -> Any:
    for header in response.headers.get_list("set-cookie"):
        jar: SimpleCookie = SimpleCookie()
        jar.load(header)
        if name in jar:
            return jar[name], header
    raise AssertionError(f"no {name} cookie set")


def _wait(service: Any, project_id: str, job_id: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = service.jobs.get(project_id, job_id)
        if job["status"] in FINAL:
            return job
        assert time.monotonic() < deadline, \
            f"job {job_id} still {job['status']} after {timeout} s (waited for a final status)"
        time.sleep(0.05)


# --- login, session, CSRF, headers ----------------------------------------------------------


def test_login_sets_an_httponly_samesite_cookie_that_does_not_hold_the_token(web):
    client = web["client"]()
    token = web["tokens"]["alice"]
    assert client.get("/ui/").headers["location"] == "/ui/login?next=%2Fui%2F"
    page = client.get("/ui/login?next=/ui/compare")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    done = client.post("/ui/login", data={"token": token, "csrf": nonce,
                                          "next": "/ui/compare"})
    assert done.status_code == 303 and done.headers["location"] == "/ui/compare"
    morsel, header = _cookie(done, "dsj_session")
    assert morsel["httponly"] and morsel["samesite"].lower() == "strict"
    assert morsel["path"] == "/ui" and int(morsel["max-age"]) == 12 * 3600
    assert token not in header and token[4:20] not in header
    page = client.get("/ui/")
    assert page.status_code == 200 and "alice" in page.text and "Log out" in page.text


def test_login_refuses_a_wrong_token_a_foreign_next_and_a_missing_form_token(web):
    client = web["client"]()
    page = client.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    wrong = client.post("/ui/login", data={"token": "dsj_nope", "csrf": nonce})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    assert "dsj_session" not in wrong.headers.get("set-cookie", "")
    nonce = re.search(r'name="csrf" value="([^"]+)"', wrong.text).group(1)
    forged = client.post("/ui/login", data={"token": web["tokens"]["alice"], "csrf": "x" + nonce})
    assert forged.status_code == 403 and "dsj_session" not in forged.headers.get("set-cookie", "")
    page = client.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    done = client.post("/ui/login", data={"token": web["tokens"]["alice"], "csrf": nonce,
                                          "next": "//evil.example/x"})
    assert done.headers["location"] == "/ui/"


def test_a_revoked_token_ends_its_sessions_and_an_old_cookie_expires(web):
    from judge.service import revoke_token

    client = web["client"]()
    client.login(web["tokens"]["reader"])
    assert client.get("/ui/").status_code == 200
    token_id = web["service"].tokens.resolve_token(web["tokens"]["reader"]).token_id
    revoke_token(web["service"].db, token_id)
    assert client.get("/ui/").status_code == 303
    sessions = web["app"].state.web.sessions
    old = sessions.fernet.encrypt_at_time(json.dumps({"v": 2, "s": "y"}).encode(),
                                          int(time.time()) - 13 * 3600).decode()
    assert sessions.open(old) is None
    alice = web["service"].tokens.resolve_token(web["tokens"]["alice"]).token_id
    assert sessions.open(sessions.issue(alice))
    assert sessions.open("garbage") is None


def test_pages_and_assets_carry_a_strict_csp_and_the_api_is_unchanged(web):
    client = web["client"]()
    client.login(web["tokens"]["alice"])
    for path in ("/ui/", "/ui/login", "/ui/static/app.js", "/ui/static/style.css",
                 "/ui/compare"):
        response = client.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
    api = client.get("/v1/me", headers={"Authorization": f"Bearer {web['tokens']['alice']}"})
    assert api.status_code == 200 and "content-security-policy" not in api.headers
    assert "/ui" not in client.get("/openapi.json").text
    home = client.get("/")
    assert home.status_code == 307 and home.headers["location"] == "/ui/"


def test_every_state_change_needs_the_sessions_csrf_token(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    refused = client.post("/ui/runs/new", data={"csrf": "forged"}, files=example_upload())
    assert refused.status_code == 403 and "security token" in refused.text
    label = {"dialogue_id": "SYN00001.json", "turn_index": 0, "label": "correct"}
    url = f"/ui/review/{synthetic_run}/labels"
    assert client.post(url, json=label).status_code == 403
    assert client.post(url, json=label, headers={"X-CSRF-Token": "nope"}).status_code == 403
    assert client.post(url, json=label, headers={"X-CSRF-Token": csrf}).status_code == 200
    assert client.post("/ui/logout", data={}).status_code == 403
    out = client.post("/ui/logout", data={"csrf": csrf})
    assert out.status_code == 303 and 'dsj_session=""' in out.headers["set-cookie"]


def test_scopes_read_browses_submit_runs_review_labels(web, synthetic_run):
    reader = web["client"]()
    csrf = reader.login(web["tokens"]["reader"])
    assert reader.get(f"/ui/runs/{synthetic_run}").status_code == 200
    assert reader.get("/ui/runs/new").status_code == 403
    assert "New evaluation" not in reader.get("/ui/").text
    label = {"dialogue_id": "SYN00001.json", "turn_index": 0, "label": "correct"}
    denied = reader.post(f"/ui/review/{synthetic_run}/labels", json=label,
                         headers={"X-CSRF-Token": csrf, "Accept": "application/json"})
    assert denied.status_code == 403 and "review" in denied.json()["error"]["message"]
    assert reader.get(f"/ui/review/{synthetic_run}/labels.jsonl").status_code == 200
    bob = web["client"]()
    csrf = bob.login(web["tokens"]["bob"])
    assert bob.post(f"/ui/review/{synthetic_run}/labels", json=label,
                    headers={"X-CSRF-Token": csrf}).status_code == 200
    assert bob.get("/ui/runs/new").status_code == 403
    eve = web["client"]()
    eve.login(web["tokens"]["eve"])
    assert eve.get(f"/ui/runs/{synthetic_run}").status_code == 404
    assert eve.get(f"/ui/review/{synthetic_run}/labels.jsonl").status_code == 404


# --- submitting -----------------------------------------------------------------------------


def test_submit_shows_the_clis_messages_at_the_field_then_runs(web):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    bad = example_upload()
    bad["dialogues_file"] = ("dialogues.jsonl", b'{"dialogue_id": "D1", "turns": "no"}\n')
    page = client.post("/ui/runs/new", data={"csrf": csrf}, files=bad)
    assert page.status_code == 422
    message = re.search(r'id="dialogues-error" role="alert">([^<]+)<', page.text).group(1)
    assert "dialogues.jsonl:1" in message and "turns" in message
    # files that passed are kept for the next try
    assert re.search(r'<option value="file_[0-9a-f]+" selected>schema.json', page.text)
    page = client.post("/ui/runs/new", data={"csrf": csrf, "top_p": "0", "temperature": "hot"},
                       files=example_upload())
    assert page.status_code == 422
    errors = dict(re.findall(r'id="([a-z_]+)-error" role="alert">([^<]+)<', page.text))
    assert set(errors) == {"temperature"} and "number" in errors["temperature"]
    page = client.post("/ui/runs/new", data={"csrf": csrf, "top_p": "0"},
                       files=example_upload())
    assert "greater than 0" in re.search(r'id="top_p-error" role="alert">([^<]+)<',
                                         page.text).group(1)
    done = client.post("/ui/runs/new", data={"csrf": csrf, "method": "two-dim",
                                             "concurrency": "2", "limit": "2"},
                       files=example_upload())
    assert done.status_code == 303
    job_id = done.headers["location"].rsplit("/", 1)[1]
    project = web["service"].tokens.resolve_token(web["tokens"]["alice"]).project_id
    job = _wait(web["service"], project, job_id)
    assert job["status"] == "succeeded" and job["options"]["concurrency"] == 2
    assert job["options"]["limit"] == 2 and job["headline"]["turns"] == 5  # 3 + 2 turns
    page = client.get(f"/ui/runs/{job_id}")
    assert "example-dst · two-dim" in page.text and 'id="match-count">5<' in page.text


def test_cancel_from_the_page(web):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    service = web["service"]
    service.worker.drain()  # keep the job queued
    done = client.post("/ui/runs/new", data={"csrf": csrf}, files=example_upload())
    job_id = done.headers["location"].rsplit("/", 1)[1]
    page = client.get("/ui/")
    assert f'data-watch="{job_id}"' in page.text and "Cancel" in page.text
    back = client.post(f"/ui/runs/{job_id}/cancel", data={"csrf": csrf, "back": "/ui/"})
    assert back.status_code == 303 and back.headers["location"] == "/ui/"
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    assert service.jobs.get(project, job_id)["status"] == "cancelled"


# --- run detail -----------------------------------------------------------------------------


def _count(html: str) -> int:
    return int(re.search(r'id="match-count">([\d,]+)<', html).group(1).replace(",", ""))


def test_run_detail_paginates_filters_and_searches(web, synthetic_run):
    rows = synthetic_rows(160, seed=3)
    client = web["client"]()
    client.login(web["tokens"]["reader"])
    first = client.get(f"/ui/runs/{synthetic_run}")
    assert _count(first.text) == 160 and "page 1 of 4" in first.text
    assert first.text.count('<tr id="t-') == 50
    last = client.get(f"/ui/runs/{synthetic_run}?page=4")
    assert last.text.count('<tr id="t-') == 10 and 'id="t-159"' in last.text
    cases = {
        "verdict=incorrect": sum(r["verdict"] is False for r in rows),
        "verdict=none": sum(r["verdict"] is None for r in rows),
        "error=yes": sum(bool(r["error"]) for r in rows),
        "disagree=judge-accepts&version=2.1": sum(
            r["verdict"] is True and r["rule"]["2.1"] is False for r in rows),
        "disagree=judge-rejects": sum(
            r["verdict"] is False and any(ok for ok in r["rule"].values()) for r in rows),
        "domain=taxi": sum(any(s.startswith("taxi-") for s in r["pred_turn_state"])
                           for r in rows),
        "slot=hotel-area": sum("hotel-area" in r["pred_turn_state"] for r in rows),
        "q=SYN00007": sum(r["dialogue_id"] == "SYN00007.json" for r in rows),
    }
    for query, expected in cases.items():
        assert expected > 0, query
        page = client.get(f"/ui/runs/{synthetic_run}?{query}")
        assert _count(page.text) == expected, query
    word = rows[5]["user"].split()[3]
    page = client.get(f"/ui/runs/{synthetic_run}", params={"q": word.upper()})
    assert _count(page.text) == sum(word in (r["user"] + " " + r["system"]).lower()
                                    for r in rows)
    facets = client.get(f"/ui/runs/{synthetic_run}/facets").json()
    assert "taxi" in facets["domains"] and "hotel-area" in facets["slots"]


def test_turn_deep_link_shows_dialogue_states_replies_trace_and_neighbours(web, synthetic_run):
    rows = synthetic_rows(160, seed=3)
    target = next(r for r in rows if r["verdict"] is False and r["turn_index"] > 1)
    client = web["client"]()
    client.login(web["tokens"]["reader"])
    client.get(f"/ui/runs/{synthetic_run}?verdict=incorrect")  # builds the index
    url = (f"/ui/runs/{synthetic_run}/turns/{target['dialogue_id']}/{target['turn_index']}"
           "?verdict=incorrect")
    page = client.get(url)
    assert page.status_code == 200
    html = page.text
    earlier = next(r for r in rows if r["dialogue_id"] == target["dialogue_id"]
                   and r["turn_index"] == 0)
    assert earlier["user"] in html and target["user"] in html
    for slot, value in target["pred_turn_state"].items():
        assert f"<code>{slot}</code>" in html and value in html
    assert "Gold 2.1" in html and "Gold 2.4" in html and 'class="differs"' in html
    reply = json.loads(target["calls"][0]["attempts"][0]["text"])
    assert reply["explanation"] in html
    assert "passes every check" in html and "Filter trace" in html
    wrong = [r for r in rows if r["verdict"] is False]
    position = wrong.index(target)
    assert f"<span>{position + 1} of {len(wrong)}</span>" in html
    assert client.get(f"/ui/runs/{synthetic_run}/turns/{target['dialogue_id']}/99"
                      ).status_code == 404
    assert client.get(f"/ui/runs/{synthetic_run}/turns/NOPE/0").status_code == 404


def test_downloads_give_results_judgments_and_a_bundle(web, synthetic_run):
    import io
    import tarfile

    client = web["client"]()
    client.login(web["tokens"]["reader"])
    base = f"/ui/runs/{synthetic_run}/download"
    results = client.get(f"{base}/results.json")
    assert results.json()["turns"] == 160 and "attachment" in results.headers[
        "content-disposition"]
    lines = client.get(f"{base}/judgments.jsonl").text.splitlines()
    assert len(lines) == 160 and json.loads(lines[0])["dialogue_id"] == "SYN00001.json"
    data = client.get(f"{base}/bundle.tar.gz").content
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert {"summary.json", "judgments.jsonl"} <= set(tar.getnames())


# --- review and labels ----------------------------------------------------------------------


def _label(client: Any, csrf: str, job_id: str, **body: Any) -> Any:
    return client.post(f"/ui/review/{job_id}/labels", json=body,
                       headers={"X-CSRF-Token": csrf, "Accept": "application/json"})


def test_queues_disagreements_first_where_the_judge_accepts_and_a_seeded_sample(web,
                                                                                synthetic_run):
    from judge.web._index import build_index
    from judge.web._queues import disagreement_queue, draw, sample_queue

    rows = synthetic_rows(160, seed=3)
    index = build_index("j", None, iter(rows), {"rule_match": "nospace"})
    queue = disagreement_queue(index)
    expected = [r for r in rows if r["verdict"] is not None
                and any(ok != r["verdict"] for ok in r["rule"].values())]
    assert len(queue) == len(expected)
    accepts = [q for q in queue if q[2].startswith("judge accepts")]
    assert queue[: len(accepts)] == accepts and 0 < len(accepts) < len(queue)
    by_turn = {(r["dialogue_id"], r["turn_index"]): r for r in rows}
    for dialogue_id, turn_index, why in queue:  # "judge accepts; RULE-2.1, RULE-2.4 rejects"
        row = by_turn[(dialogue_id, turn_index)]
        against = {v for v, ok in row["rule"].items() if ok is not None and ok != row["verdict"]}
        verb = "rejects" if row["verdict"] else "accepts"
        named, _, said = why.split("; ", 1)[1].rpartition(" ")
        assert said == verb and {n.removeprefix("RULE-") for n in named.split(", ")} == against
        assert all(n.startswith("RULE-") for n in named.split(", ")), why
    both = [dict(r, rule={v: not r["verdict"] for v in r["rule"]}) for r in rows
            if r["verdict"] is not None][:4]  # both versions against the judge
    whys = [why for _, _, why in disagreement_queue(
        build_index("k", None, iter(both), {"rule_match": "nospace"}))]
    assert len(whys) == 4 and all(why.split("; ")[1] in (
        "RULE-2.1, RULE-2.4 rejects", "RULE-2.1, RULE-2.4 accepts") for why in whys), whys
    sample = sample_queue(draw(index, 20, seed=1), seed=1)
    assert sample == sample_queue(draw(index, 20, seed=1), seed=1)
    assert sample != sample_queue(draw(index, 20, seed=2), seed=2)
    assert len(sample) == 20 and len(set(sample)) == 20
    strata = {why.split("(")[0] for _, _, why in sample}
    assert strata == {"sample: all turns "}  # a simple random sample: one stratum
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    page = client.get(f"/ui/review/{synthetic_run}?queue=disagreements")
    first = queue[0]
    assert f'data-dialogue="{first[0]}" data-turn="{first[1]}"' in page.text
    draw_form(client, csrf, synthetic_run, 20, 1)
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=20&seed=1&pos=3")
    assert f'data-dialogue="{sample[3][0]}" data-turn="{sample[3][1]}"' in page.text
    other = sample_queue(draw(index, 5, seed=1), seed=1)  # another size is its own queue
    assert other[0] != sample[0]
    draw_form(client, csrf, synthetic_run, 5, 1)
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=5&seed=1&pos=0")
    assert f'data-dialogue="{other[0][0]}" data-turn="{other[0][1]}"' in page.text


def test_the_review_opens_at_the_first_turn_this_reviewer_has_not_labelled(web, synthetic_run):
    """Labels of the turn (not of a slot) by this reviewer, in this project, move the start."""
    from judge.web._index import build_index
    from judge.web._queues import disagreement_queue

    queue = disagreement_queue(build_index("j", None, iter(synthetic_rows(160, seed=3)),
                                           {"rule_match": "nospace"}))
    alice, bob = web["client"](), web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    bob.login(web["tokens"]["bob"])

    def opens_at(client: Any) -> tuple[str, int]:
        text = client.get(f"/ui/review/{synthetic_run}?queue=disagreements").text
        found = re.search(r'data-dialogue="([^"]+)" data-turn="(\d+)"', text)
        assert found is not None
        return found.group(1), int(found.group(2))

    first, second = queue[0][:2], queue[1][:2]
    assert opens_at(alice) == first
    slot = _label(alice, csrf, synthetic_run, dialogue_id=first[0], turn_index=first[1],
                  slot="hotel-area", label="correct")
    assert slot.status_code in (200, 201), slot.text
    assert opens_at(alice) == first  # a slot's label leaves the turn open
    turn = _label(alice, csrf, synthetic_run, dialogue_id=first[0], turn_index=first[1],
                  label="correct")
    assert turn.status_code in (200, 201), turn.text
    assert opens_at(alice) == second
    assert opens_at(bob) == first  # another reviewer's labels are theirs


def test_labels_per_turn_and_slot_export_to_the_labels_format(web, synthetic_run):
    rows = synthetic_rows(160, seed=3)
    alice, bob = web["client"](), web["client"]()
    csrf_a = alice.login(web["tokens"]["alice"])
    csrf_b = bob.login(web["tokens"]["bob"])
    turns = [(r["dialogue_id"], r["turn_index"], r) for r in rows[:4]]
    for (dialogue_id, turn_index, _), label in zip(turns, ("correct", "incorrect", "unsure",
                                                           "correct"), strict=True):
        saved = _label(alice, csrf_a, synthetic_run, dialogue_id=dialogue_id,
                       turn_index=turn_index, label=label, note=f"why {turn_index}")
        assert saved.status_code == 200 and saved.json()["saved"]["reviewer"] == "alice"
    dialogue_id, turn_index, row = turns[1]
    slot = next(iter(row["pred_turn_state"]))
    assert _label(alice, csrf_a, synthetic_run, dialogue_id=dialogue_id, turn_index=turn_index,
                  slot=slot, label="incorrect", note="wrong value").status_code == 200
    # a correct turn cannot hold a wrong slot of the same reviewer
    conflict = _label(alice, csrf_a, synthetic_run, dialogue_id=turns[0][0], turn_index=0,
                      slot=slot, label="incorrect")
    assert conflict.status_code == 409 and "correct" in conflict.json()["error"]["message"]
    assert _label(alice, csrf_a, synthetic_run, dialogue_id="NOPE", turn_index=0,
                  label="correct").status_code == 404
    assert _label(alice, csrf_a, synthetic_run, dialogue_id=dialogue_id,
                  turn_index=turn_index, label="maybe").status_code == 422
    for (dialogue_id, turn_index, _), label in zip(turns, ("correct", "correct", "incorrect",
                                                           "correct"), strict=True):
        assert _label(bob, csrf_b, synthetic_run, dialogue_id=dialogue_id,
                      turn_index=turn_index, label=label).status_code == 200
    text = alice.get(f"/ui/review/{synthetic_run}/labels.jsonl").text
    records = [json.loads(line) for line in text.splitlines()]
    path = web["settings"].data_dir / "exported.jsonl"
    path.write_text(text, encoding="utf-8")
    labels = load_labels(path)
    assert set(labels.annotators) == {"alice", "bob"}
    assert len(records) == 8
    second = next(r for r in records if r["reviewer"] == "alice"
                  and r["turn_index"] == turns[1][1] and r["dialogue_id"] == turns[1][0])
    assert second["label"] == 0 and second["note"] == f"why {turns[1][1]}"
    assert second["slots"][slot] == {"label": 0, "value": row["pred_turn_state"][slot],
                                     "note": "wrong value"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", second["time"])
    unsure = next(r for r in records if r["reviewer"] == "alice" and r.get("unsure"))
    assert unsure["label"] is None and unsure["turn_index"] == turns[2][1]
    assert labels.unsure_turns == 1 and len(labels.per_slot()) == 1
    per_turn = labels.per_turn()
    assert len(per_turn) >= 2


def test_agreement_panel_grows_with_labels(web, synthetic_run):
    rows = synthetic_rows(160, seed=3)
    alice, bob = web["client"](), web["client"]()
    csrf_a = alice.login(web["tokens"]["alice"])
    csrf_b = bob.login(web["tokens"]["bob"])
    url = f"/ui/review/{synthetic_run}/agreement"
    assert "No labels yet" in alice.get(url).text
    for row in rows[:6]:
        label = "correct" if row["verdict"] else "incorrect"
        _label(alice, csrf_a, synthetic_run, dialogue_id=row["dialogue_id"],
               turn_index=row["turn_index"], label=label)
        _label(bob, csrf_b, synthetic_run, dialogue_id=row["dialogue_id"],
               turn_index=row["turn_index"], label="correct")
    deadline = time.monotonic() + 20
    while True:
        html = alice.get(url).text
        if 'data-updating="false"' in html and 'id="vs-human"' in html:
            break
        assert time.monotonic() < deadline, html
        time.sleep(0.1)
    pair = re.search(r"<th scope=\"row\">alice · bob</th><td class=\"num\">(\d+)</td>", html)
    assert pair and int(pair.group(1)) == 6
    judge_row = re.search(r"<td>judge vs human</td><td>(\d+)</td><td>([\d.]+)", html)
    assert judge_row and int(judge_row.group(1)) >= 1
    assert _counted(html, "labels") == (12, "labels") and _counted(html, "turns") == (6, "turns")
    assert _counted(html, "reviewers") == (2, "reviewers")
    # the compare page puts the judge beside the humans' majority of this run's labels
    compare = alice.get(f"/ui/compare?run={synthetic_run}").text
    majority = {}
    for row in rows[:6]:  # alice follows the judge, bob says correct: ties are left out
        if row["verdict"] is not None and row["verdict"]:
            majority[(row["dialogue_id"], row["turn_index"])] = 1
    turns = f"{len(majority)} turn{'' if len(majority) == 1 else 's'}"
    assert f"100.0 % <span class=\"muted small\">({turns})</span>" in compare


def _counted(html: str, field: str) -> tuple[int, str]:
    """A count of the agreement panel and its noun (``1 label``, ``3 labels``)."""
    found = re.search(rf'data-count="{field}"[^>]*><strong>([\d,]+)</strong> '
                      r'<span class="unit">([^<]+)</span>', html)
    assert found, html
    return int(found.group(1).replace(",", "")), found.group(2)


def test_labels_belong_to_the_predictions_not_to_the_run(web):
    rows = synthetic_rows(60, seed=4)
    job_a = import_run(web, bundle(rows, system="system-a", predictions_sha256="a" * 64))
    job_b = import_run(web, bundle(rows, system="system-b", predictions_sha256="b" * 64))
    job_a_direct = import_run(web, bundle(rows, system="system-a", method="direct",
                                          predictions_sha256="a" * 64))
    alice = web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    for row in rows[:3]:
        assert _label(alice, csrf, job_a, dialogue_id=row["dialogue_id"],
                      turn_index=row["turn_index"], label="correct").status_code == 200
    first = rows[0]
    assert _label(alice, csrf, job_b, dialogue_id=first["dialogue_id"],
                  turn_index=first["turn_index"], label="incorrect").status_code == 200
    service = web["service"]
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    stored = [(i["subject"], i["label"]) for i in service.labels.list(project)
              if i["dialogue_id"] == first["dialogue_id"]
              and i["turn_index"] == first["turn_index"]]
    assert sorted(stored) == [("a" * 64, "correct"), ("b" * 64, "incorrect")]
    board = web["app"].state.web.agreement
    counts = {}
    for job_id in (job_a, job_b, job_a_direct):
        deadline = time.monotonic() + 20
        while 'data-updating="false"' not in (html := alice.get(
                f"/ui/review/{job_id}/agreement").text):
            assert time.monotonic() < deadline, html
            time.sleep(0.1)
        counts[job_id] = (_counted(html, "labels"), board.results[job_id].human_turns)
    assert counts == {job_a: ((3, "labels"), 3), job_b: ((1, "label"), 1),
                      job_a_direct: ((3, "labels"), 3)}
    exported = {job_id: [json.loads(line) for line in alice.get(
        f"/ui/review/{job_id}/labels.jsonl").text.splitlines()]
        for job_id in (job_a_direct, job_b)}
    assert [(r["label"], r["predictions_sha256"]) for r in exported[job_b]] == [(0, "b" * 64)]
    assert [r["label"] for r in exported[job_a_direct]] == [1, 1, 1]
    path = web["settings"].data_dir / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in exported[job_a_direct]))
    assert load_labels(path).records[0].predictions_sha256 == "a" * 64
    from urllib.parse import quote

    turn = f"{quote(first['dialogue_id'], safe='')}/{first['turn_index']}"
    shown = {job_id: re.findall(r'<td class="lab-(\w+)">', alice.get(
        f"/ui/runs/{job_id}/turns/{turn}").text) for job_id in (job_a_direct, job_b)}
    assert shown == {job_a_direct: ["correct"], job_b: ["incorrect"]}


def test_hostile_values_are_escaped_in_every_page(web):
    from .synthetic import XSS, XSS_IMG, XSS_LINK

    job_id = import_run(web, bundle(synthetic_rows(30, seed=5, hostile=True), system=XSS))
    client = web["client"]()
    client.login(web["tokens"]["alice"])
    rows = synthetic_rows(30, seed=5, hostile=True)
    first = rows[0]
    from urllib.parse import quote

    turn = f"/ui/runs/{job_id}/turns/{quote(first['dialogue_id'], safe='')}/0"
    for path in ("/ui/", f"/ui/runs/{job_id}", turn, f"/ui/review/{job_id}",
                 f"/ui/compare?run={job_id}", "/ui/review"):
        html = client.get(path).text
        assert client.get(path).status_code == 200, path
        assert XSS not in html and XSS_IMG not in html, path
        assert "<script>window" not in html and "onerror=\"window" not in html, path
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html, path
        hrefs = re.findall(r'href="([^"]*)"', html)
        assert not [h for h in hrefs if h.lower().lstrip().startswith("javascript:")], path
        assert len(re.findall(r"<script", html)) == 1, path  # only our own app.js
    assert XSS_LINK in client.get(turn).text  # shown as text


def test_charts_lay_out_bars_within_the_plot():
    from judge.web._charts import grouped_bars

    chart = grouped_bars("t", ["a", "b"], ["s1", "s2"], [[50.0, 100.0], [None, 25.0]],
                         links=[[None, "/x"], [None, None]])
    assert len(chart.bars) == 3
    bottom = chart.plot["bottom"]
    heights = [b.h for b in chart.bars]
    assert heights[1] == pytest.approx(chart.plot["h"]) == 2 * heights[0] == 4 * heights[2]
    assert all(b.y + b.h == pytest.approx(bottom) for b in chart.bars)
    assert chart.bars[1].href == "/x" and chart.bars[2].title == "b — s2: 25.0%"


def test_the_session_key_is_private_or_from_the_environment(tmp_path, monkeypatch):
    from judge.web._viewer import SECRET_ENV, load_secret

    monkeypatch.delenv(SECRET_ENV, raising=False)
    first = load_secret(tmp_path)
    assert (tmp_path / "web-secret").stat().st_mode & 0o777 == 0o600
    assert load_secret(tmp_path) == first and len(first) == 64
    monkeypatch.setenv(SECRET_ENV, "shared by the replicas")
    assert load_secret(tmp_path) == b"shared by the replicas"


def test_slot_labels_alone_imply_the_turn_label_in_the_export(web, synthetic_run):
    rows = synthetic_rows(160, seed=3)
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    wrong, right = rows[10], rows[11]
    slot_w, slot_r = next(iter(wrong["pred_turn_state"])), next(iter(right["pred_turn_state"]))
    for row, slot, label in ((wrong, slot_w, "incorrect"), (right, slot_r, "correct")):
        assert _label(client, csrf, synthetic_run, dialogue_id=row["dialogue_id"],
                      turn_index=row["turn_index"], slot=slot, label=label).status_code == 200
    text = client.get(f"/ui/review/{synthetic_run}/labels.jsonl").text
    records = {(r["dialogue_id"], r["turn_index"]): r
               for r in map(json.loads, text.splitlines())}
    implied = records[(wrong["dialogue_id"], wrong["turn_index"])]
    assert implied["label"] == 0 and implied["slots"][slot_w]["label"] == 0
    partial = records[(right["dialogue_id"], right["turn_index"])]
    assert partial["label"] is None and partial["unsure"] is True
    assert partial["slots"][slot_r] == {"label": 1, "value": right["pred_turn_state"][slot_r]}


def _wait_panel(client: Any, url: str, needle: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        html = client.get(url).text
        if 'data-updating="false"' in html and needle in html:
            return html
        assert time.monotonic() < deadline, html
        time.sleep(0.1)


def test_reviewing_a_sample_adds_population_estimates(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    page = draw_form(client, csrf, synthetic_run, 12, 4)
    assert "sample: all turns" in page.text and "weight" in page.text
    from judge.web._index import build_index
    from judge.web._queues import draw

    index = build_index("j", None, iter(synthetic_rows(160, seed=3)), {})
    sample = draw(index, 12, seed=4)
    for turn in sample.turns[:8]:
        assert _label(client, csrf, synthetic_run, dialogue_id=turn.dialogue_id,
                      turn_index=turn.turn_index, label="correct").status_code == 200
    html = _wait_panel(client, f"/ui/review/{synthetic_run}/agreement",
                       "Population agreement from the")
    assert "human: correct turns %" in html and "AC1" in html


def test_candidates_queue_ranks_label_error_candidates_of_a_judged_run(web):
    from judge.analysis import find_candidates, source_from_run
    from judge.data import load_dialogues, load_schema
    from judge.pipeline import Run
    from tests.conftest import EXAMPLES

    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    done = client.post("/ui/runs/new", data={"csrf": csrf}, files=example_upload())
    job_id = done.headers["location"].rsplit("/", 1)[1]
    project = web["service"].tokens.resolve_token(web["tokens"]["alice"]).project_id
    assert _wait(web["service"], project, job_id)["status"] == "succeeded"
    rows = list(web["service"].jobs.judgments(project, job_id))
    summary = web["service"].jobs.row(project, job_id).summary
    found = find_candidates(load_dialogues(EXAMPLES / "dialogues.jsonl"),
                            [source_from_run(Run(job_id, summary, rows))],
                            schema=load_schema(EXAMPLES / "schema.json"))
    assert found, "the example has suspect gold values"
    page = _when_prepared(client, f"/ui/review/{job_id}?queue=candidates")
    assert page.status_code == 200 and "candidate #1: " + found[0].slot in page.text
    assert (f'data-dialogue="{found[0].dialogue_id}" data-turn="{found[0].turn_index}"'
            in page.text)
    imported = import_run(web, bundle(synthetic_rows(20, seed=1)))
    refused = _when_prepared(client, f"/ui/review/{imported}?queue=candidates")
    assert refused.status_code == 409 and "dialogues file" in refused.text


def test_a_retry_runs_candidates_queue_reads_the_data_of_the_run_it_retried(web):
    """A ``retry-errors`` job names no data files of its own: its candidates come from the
    evaluate job it started from, as its corrections queue's do (one ``run_candidates``)."""
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    done = client.post("/ui/runs/new", data={"csrf": csrf}, files=example_upload())
    job_id = done.headers["location"].rsplit("/", 1)[1]
    principal = web["service"].tokens.resolve_token(web["tokens"]["alice"])
    assert _wait(web["service"], principal.project_id, job_id)["status"] == "succeeded"
    retry = client.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {"run": job_id}},
                        headers={"Authorization": f"Bearer {web['tokens']['alice']}"})
    assert retry.status_code == 201, retry.text
    retry_id = retry.json()["id"]
    assert _wait(web["service"], principal.project_id, retry_id)["status"] == "succeeded"
    first = _when_prepared(client, f"/ui/review/{job_id}?queue=candidates")
    again = _when_prepared(client, f"/ui/review/{retry_id}?queue=candidates")
    assert first.status_code == again.status_code == 200, again.text
    shown = re.compile(r'data-dialogue="[^"]*" data-turn="\d+"')
    assert shown.findall(again.text) == shown.findall(first.text) != []
    assert "candidate #1: " in again.text


def _when_prepared(client: Any, url: str, timeout: float = 30) -> Any:
    """The page once what it needs is computed: first a 202 page that reloads itself (the
    ranking runs in the background, never in the request), then the page. A finished job's
    background warm-up may have prepared it already: then the first answer is the page."""
    first = client.get(url)
    if first.status_code != 202:
        return first
    assert "Preparing" in first.text, first.text[:300]
    assert first.headers["retry-after"] == "2"
    assert '<meta http-equiv="refresh" content="2">' in first.text
    deadline = time.monotonic() + timeout
    while True:
        page = client.get(url)
        if page.status_code != 202:
            return page
        assert time.monotonic() < deadline, "still preparing"
        time.sleep(0.1)


def test_a_large_run_is_indexed_in_the_background_while_its_pages_say_so(web, synthetic_run,
                                                                        monkeypatch):
    import threading

    from judge.web import _index

    monkeypatch.setattr(_index, "SYNC_INDEX", 10)  # the 160-turn run counts as large
    release = threading.Event()
    build = _index.build_index

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30)
        return build(*args, **kwargs)

    monkeypatch.setattr(_index, "build_index", held)
    client = web["client"]()
    client.login(web["tokens"]["alice"])
    page = client.get(f"/ui/runs/{synthetic_run}")  # unfiltered: painted from rows by position
    assert page.status_code == 200 and "SYN00001.json" in page.text
    facets = client.get(f"/ui/runs/{synthetic_run}/facets",
                        headers={"Accept": "application/json"})
    assert facets.status_code == 202 and facets.headers["retry-after"] == "2"
    for url in (f"/ui/review/{synthetic_run}", f"/ui/compare?run={synthetic_run}",
                f"/ui/runs/{synthetic_run}?verdict=incorrect"):
        waiting = client.get(url)
        assert waiting.status_code == 202 and "Preparing" in waiting.text, url
        assert synthetic_run in waiting.text
    release.set()
    deadline = time.monotonic() + 30
    while client.get(f"/ui/runs/{synthetic_run}/facets").status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.get(f"/ui/review/{synthetic_run}").status_code == 200
    filtered = client.get(f"/ui/runs/{synthetic_run}?verdict=incorrect")
    assert filtered.status_code == 200 and "Preparing" not in filtered.text


def test_a_save_answers_with_the_panels_new_counts_in_the_right_number(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    rows = synthetic_rows(160, seed=3)
    first = _label(client, csrf, synthetic_run, dialogue_id=rows[0]["dialogue_id"],
                   turn_index=rows[0]["turn_index"], label="unsure")
    assert first.status_code == 200
    assert first.json()["counts"] == {"labels": 1, "turns": 1, "reviewers": 1, "mine": 1}
    html = client.get(f"/ui/review/{synthetic_run}/agreement").text
    assert _counted(html, "labels") == (1, "label") and _counted(html, "turns") == (1, "turn")
    assert _counted(html, "reviewers") == (1, "reviewer")
    slot = next(iter(rows[1]["pred_turn_state"]))
    second = _label(client, csrf, synthetic_run, dialogue_id=rows[1]["dialogue_id"],
                    turn_index=rows[1]["turn_index"], slot=slot, label="correct")
    assert second.json()["counts"] == {"labels": 2, "turns": 2, "reviewers": 1, "mine": 1}
    html = client.get(f"/ui/review/{synthetic_run}/agreement").text
    assert _counted(html, "labels") == (2, "labels") and "1 slot." in html
    assert _counted(html, "mine") == (1, "turn")  # the panel counts as the save did


def test_the_run_page_names_predicted_slots_outside_the_schema(web, tmp_path):
    """A run submitted from the web form says, on its page, which predicted slot names its
    schema lacks (here a planted `train-book time`), with the closest schema slot."""
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    files = example_upload()
    planted = predictions_with_slot_errors(tmp_path / "predictions.jsonl", typo=False)
    files["predictions_file"] = ("predictions.jsonl", planted.read_bytes())
    made = client.post("/ui/runs/new", data={"csrf": csrf, "model": "m"}, files=files)
    assert made.status_code == 303, made.text[:500]
    page = client.get(made.headers["location"])
    assert page.status_code == 200
    notes = re.findall(r'<p class="warning" role="note">(.*?)</p>', page.text, re.S)
    assert len(notes) == 1, notes
    assert "train-book time" in notes[0] and "restaurant-book time" in notes[0], notes


def test_the_api_and_the_web_submit_through_one_path_with_the_same_checks_and_warnings(
        web, tmp_path, monkeypatch):
    """``Service.submit_job`` is the one way in: the same refused option gets the same words
    from ``POST /v1/jobs`` and from the form, and the same warned inputs (predicted slot
    names outside the schema) the same warnings, the API in its answer, the web on the run
    page the form leads to."""
    service = web["service"]
    calls: list[str] = []
    one_path = service.submit_job

    def spy(principal: Any, request: Any) -> Any:
        calls.append(request.kind)
        return one_path(principal, request)

    monkeypatch.setattr(service, "submit_job", spy)
    api = web["client"]()
    auth = {"Authorization": f"Bearer {web['tokens']['alice']}"}
    planted = predictions_with_slot_errors(tmp_path / "predictions.jsonl", typo=False)
    ids = {}
    for kind, name, data in (("schema", "schema.json", None),
                             ("dialogues", "dialogues.jsonl", None),
                             ("predictions", "predictions.jsonl", planted.read_bytes())):
        content = data if data is not None else example_upload()[f"{kind}_file"][1]
        made = api.post("/v1/files", data={"kind": kind}, files={"file": (name, content)},
                        headers=auth)
        assert made.status_code == 201, made.text
        ids[kind] = made.json()["id"]
    refused = api.post("/v1/jobs", headers=auth, json={
        "kind": "evaluate", "inputs": ids, "options": {"model": "m", "top_p": 0}})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "options.top_p"
    created = api.post("/v1/jobs", headers=auth, json={
        "kind": "evaluate", "inputs": ids, "options": {"model": "m"}})
    assert created.status_code == 201, created.text
    api_warnings = [w["message"] for w in created.json()["warnings"]]
    assert len(api_warnings) == 1 and "train-book time" in api_warnings[0]

    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    chosen = {f"{kind}_id": file_id for kind, file_id in ids.items()}
    page = client.post("/ui/runs/new", data={"csrf": csrf, "model": "m", "top_p": "0",
                                             **chosen})
    assert page.status_code == 422
    shown = re.search(r'id="top_p-error" role="alert">([^<]+)<', page.text).group(1)
    assert shown.strip() in refused.json()["error"]["message"]
    made = client.post("/ui/runs/new", data={"csrf": csrf, "model": "m", **chosen})
    assert made.status_code == 303, made.text[:500]
    notes = re.findall(r'<p class="warning" role="note">(.*?)</p>',
                       client.get(made.headers["location"]).text, re.S)
    assert [n.strip() for n in notes] == api_warnings
    # all four went through the one method (which checks, queues, warns and wakes the worker)
    assert calls == ["evaluate"] * 4
    for job_id in (created.json()["id"], made.headers["location"].rsplit("/", 1)[1]):
        assert _wait(service, service.tokens.resolve_token(web["tokens"]["alice"]).project_id,
                     job_id)["status"] == "succeeded"
