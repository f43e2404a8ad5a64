"""The web's estimate sample: a simple random sample, drawn by a reviewer's explicit POST
(never by opening a page) and referenced by file id, drawn again and checked before use (a
tampered one is a 422 naming its first differing line, and the panel says why it shows no
estimate), fixed once a turn of it has a label (another draw is a separate sample), and the
counts the estimates leave out shown beside them (issue 34, items 1, 5 and 7; issue 42,
item 6)."""

from __future__ import annotations

import json
import time
from typing import Any

from judge.web._agreement import sample_name, stored_sample

from .conftest import draw_form


def _label(client: Any, csrf: str, job_id: str, **body: Any) -> Any:
    response = client.post(f"/ui/review/{job_id}/labels", json=body,
                           headers={"X-CSRF-Token": csrf, "Accept": "application/json"})
    assert response.status_code == 200, response.text
    return response


def _panel(client: Any, job_id: str, needle: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        html = client.get(f"/ui/review/{job_id}/agreement").text
        if 'data-updating="false"' in html and needle in html:
            return html
        assert time.monotonic() < deadline, html
        time.sleep(0.1)


def _project(web: dict[str, Any]) -> str:
    return web["service"].tokens.resolve_token(web["tokens"]["alice"]).project_id


def _upload_as_run_sample(web, job_id, records) -> None:
    """A tampered store: a sample file under the run's sample name, made the run's estimate
    sample (what an attacker with database access could do)."""
    import io

    service, project = web["service"], _project(web)
    text = "".join(json.dumps(r) + "\n" for r in records)
    record, _ = service.files.add(project, "sample", sample_name(job_id),
                                  io.BytesIO(text.encode()))
    service.samples.put(project, job_id, "estimate", record["id"])


def test_the_estimate_sample_is_random_and_fixed_once_labelled(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=12&seed=4")
    assert page.status_code == 200 and "no estimate sample is drawn yet" in page.text
    assert 'action="/ui/review/' in page.text and "Draw a random sample" in page.text
    service, project = web["service"], _project(web)
    assert stored_sample(service, project, synthetic_run) == (None, None)
    page = draw_form(client, csrf, synthetic_run, 12, 4)
    assert page.status_code == 200 and "the run&#39;s estimate sample (not fixed" in page.text
    _, first = stored_sample(service, project, synthetic_run)
    assert first.design == "random" and len(first.turns) == 12
    # before any label another draw replaces it
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=10&seed=4")
    assert "drawing this one replaces it" in page.text
    draw_form(client, csrf, synthetic_run, 10, 4)
    _, replaced = stored_sample(service, project, synthetic_run)
    assert len(replaced.turns) == 10
    turn = replaced.turns[0]
    _label(client, csrf, synthetic_run, dialogue_id=turn.dialogue_id,
           turn_index=turn.turn_index, label="correct")
    # once a turn has a label the sample is fixed: another draw is a separate sample
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=12&seed=4")
    assert "drawing this one makes a separate sample" in page.text
    page = draw_form(client, csrf, synthetic_run, 12, 4)
    assert page.status_code == 200 and "a separate sample" in page.text
    assert "fixed (n 10, seed 4)" in page.text
    _, still = stored_sample(service, project, synthetic_run)
    assert still.turns == replaced.turns
    _, separate = stored_sample(service, project, synthetic_run, 12, 4)
    assert separate is not None and len(separate.turns) == 12
    # the queue without n and seed is the estimate sample again
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample")
    assert "the run&#39;s estimate sample (fixed" in page.text
    assert 'name="n" value="10"' in page.text


def test_a_tampered_estimate_sample_is_refused(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    assert draw_form(client, csrf, synthetic_run, 8, 2).status_code == 200
    service, project = web["service"], _project(web)
    _, genuine = stored_sample(service, project, synthetic_run)
    records = [t.model_dump() for t in genuine.turns]
    drawn = {t.key for t in genuine.turns}
    index = web["app"].state.web.index.ready(service.jobs.row(project, synthetic_run))
    others = [e for e in index.entries if e.verdict is not None
              and (e.dialogue_id.lower().removesuffix(".json"), e.turn_index) not in drawn]
    # hand-picked turns under the genuine header
    picked = [{**records[0], "dialogue_id": e.dialogue_id, "turn_index": e.turn_index}
              for e in others[:8]]
    _upload_as_run_sample(web, synthetic_run, picked)
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample")
    assert page.status_code == 422, page.text[:300]
    assert f"{sample_name(synthetic_run)}:1" in page.text
    assert "not drawn by the recorded design random" in page.text
    assert "/data/" not in page.text
    # one turn id edited: the panel refuses the estimates and says why
    edited = [dict(r) for r in records]
    edited[3].update(dialogue_id=others[0].dialogue_id, turn_index=others[0].turn_index)
    _upload_as_run_sample(web, synthetic_run, edited)
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample")
    assert page.status_code == 422 and "edited: that design draws" in page.text
    _label(client, csrf, synthetic_run, dialogue_id=edited[0]["dialogue_id"],
           turn_index=edited[0]["turn_index"], label="correct")
    html = _panel(client, synthetic_run, "The statistics failed")
    assert f"{sample_name(synthetic_run)}:4" in html and "Estimates of TSA" not in html
    # a sample of another run (a smaller one) stored under this run's name
    from judge.web._index import build_index
    from judge.web._queues import draw

    from .synthetic import synthetic_rows

    other = draw(build_index("x", None, iter(synthetic_rows(120, seed=8)), {}), 8, seed=2)
    _upload_as_run_sample(web, synthetic_run, [t.model_dump() for t in other.turns])
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample")
    assert page.status_code == 422 and "the sample was drawn from another run" in page.text


def test_the_panel_states_unlabelled_tied_and_unsure_turns(web, synthetic_run):
    alice, bob = web["client"](), web["client"]()
    csrf_a = alice.login(web["tokens"]["alice"])
    csrf_b = bob.login(web["tokens"]["bob"])
    assert draw_form(alice, csrf_a, synthetic_run, 10, 1).status_code == 200
    _, sample = stored_sample(web["service"], _project(web), synthetic_run)
    turns = sample.turns
    for turn in turns[:6]:
        _label(alice, csrf_a, synthetic_run, dialogue_id=turn.dialogue_id,
               turn_index=turn.turn_index, label="correct")
    # bob splits with alice on two turns, and is unsure of one alice did not label
    for turn in turns[:2]:
        _label(bob, csrf_b, synthetic_run, dialogue_id=turn.dialogue_id,
               turn_index=turn.turn_index, label="incorrect")
    _label(bob, csrf_b, synthetic_run, dialogue_id=turns[6].dialogue_id,
           turn_index=turns[6].turn_index, label="unsure")
    html = _panel(alice, synthetic_run, "estimate-notes")
    assert "4 labelled, 3 unlabelled, 2 tied (reviewers split), 1 unsure" in html
    assert "left out of the estimates" in html and "if every such turn were wrong" in html
    assert "Sample checked: drawn again from this run" in html


def test_the_same_draw_asked_again_is_the_estimate_sample(web, synthetic_run):
    """The review index asks for ``n`` alone: the fixed sample drawn with that n and the default
    seed is the estimate sample, not a separate copy of it."""
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    assert draw_form(client, csrf, synthetic_run, 6).status_code == 200
    _, sample = stored_sample(web["service"], _project(web), synthetic_run)
    _label(client, csrf, synthetic_run, dialogue_id=sample.turns[0].dialogue_id,
           turn_index=sample.turns[0].turn_index, label="incorrect")
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=6")
    assert "the run&#39;s estimate sample (fixed" in page.text
    names = [f["name"] for f in web["service"].files.list(_project(web), kind="sample")]
    assert names == [sample_name(synthetic_run)]


def test_queue_labels_without_a_sample_give_no_estimate_and_the_panel_says_why(web,
                                                                               synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    page = client.get(f"/ui/review/{synthetic_run}?queue=disagreements")
    assert page.status_code == 200 and 'id="sample-note"' not in page.text
    first = page.text.split('data-dialogue="', 1)[1].split('"', 1)[0]
    turn = int(page.text.split('data-turn="', 1)[1].split('"', 1)[0])
    _label(client, csrf, synthetic_run, dialogue_id=first, turn_index=turn, label="correct")
    html = _panel(client, synthetic_run, "estimate-notes")
    assert "No population estimate: these labels come from review queues" in html
    assert "Estimates of TSA" not in html


def _pressed(client: Any, job_id: str, query: str, pos: int) -> bool:
    """Whether the queue's item at ``pos`` shows this reviewer's turn label as given."""
    item = client.get(f"/ui/review/{job_id}/item?{query}&pos={pos}")
    assert item.status_code == 200, item.text[:300]
    return 'aria-pressed="true"' in item.text


def test_a_separate_sample_starts_empty(web, synthetic_run):
    """Another draw once the estimate sample is fixed is a new sample: turns labelled under
    the estimate sample are not shown as labelled in its queue (nor skipped to), until a
    label is given there."""
    from judge.web._queues import draw, sample_queue

    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    assert draw_form(client, csrf, synthetic_run, 10, 4).status_code == 200
    service, project = web["service"], _project(web)
    _, estimate = stored_sample(service, project, synthetic_run)
    index = web["app"].state.web.index.ready(service.jobs.row(project, synthetic_run))
    first = {t.key for t in estimate.turns}
    # a draw of 12 that shares a turn with the estimate sample (seeded: the same every time)
    seed, shared = next((s, t) for s in range(100) for t in draw(index, 12, s).turns
                        if t.key in first and s != 4)
    _label(client, csrf, synthetic_run, dialogue_id=shared.dialogue_id,
           turn_index=shared.turn_index, label="incorrect")
    own = next(i for i, (d, n, _) in enumerate(sample_queue(estimate, 4))
               if (d, n) == (shared.dialogue_id, shared.turn_index))
    assert _pressed(client, synthetic_run, "queue=sample&n=10&seed=4", own)
    page = draw_form(client, csrf, synthetic_run, 12, seed)
    assert page.status_code == 200 and "a separate sample" in page.text
    _, separate = stored_sample(service, project, synthetic_run, 12, seed)
    order = sample_queue(separate, seed)
    there = next(i for i, (d, n, _) in enumerate(order)
                 if (d, n) == (shared.dialogue_id, shared.turn_index))
    query = f"queue=sample&n=12&seed={seed}"
    assert not _pressed(client, synthetic_run, query, there)
    assert "started empty" in page.text
    # it opens at its first turn, not past turns labelled under the estimate sample
    assert 'data-pos="0"' in page.text
    # a label given in the separate sample is its own (and still the turn's label)
    _label(client, csrf, synthetic_run, dialogue_id=shared.dialogue_id,
           turn_index=shared.turn_index, label="incorrect")
    assert _pressed(client, synthetic_run, query, there)
    assert _pressed(client, synthetic_run, "queue=sample&n=10&seed=4", own)


def test_the_runs_sample_is_found_past_a_hundred_newer_sample_files(web, synthetic_run):
    """The estimate sample is referenced by file id: 101 newer sample files of the project
    (API clients upload them too) neither hide it nor let a draw replace it once labelled."""
    import io

    from judge.web._queues import draw

    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    draw_form(client, csrf, synthetic_run, 10, 4)
    service, project = web["service"], _project(web)
    file_id, sample = stored_sample(service, project, synthetic_run)
    _label(client, csrf, synthetic_run, dialogue_id=sample.turns[0].dialogue_id,
           turn_index=sample.turns[0].turn_index, label="correct")
    index = web["app"].state.web.index.ready(service.jobs.row(project, synthetic_run))
    for seed in range(100, 201):  # 101 other samples, stored after it
        other = draw(index, 3, seed)
        text = "".join(json.dumps(t.model_dump()) + "\n" for t in other.turns)
        service.files.add(project, "sample", f"upload-{seed}.jsonl", io.BytesIO(text.encode()))
    newest = service.files.list(project, kind="sample", limit=100)
    assert file_id not in {f["id"] for f in newest}
    page = client.get(f"/ui/review/{synthetic_run}?queue=sample")
    assert page.status_code == 200
    assert "the run&#39;s estimate sample (fixed: a turn of it has a label)" in page.text
    assert 'name="n" value="10"' in page.text
    # a draw asked for the estimate sample's own n and seed changes nothing
    draw_form(client, csrf, synthetic_run, 10, 4)
    assert stored_sample(service, project, synthetic_run)[0] == file_id
    html = _panel(client, synthetic_run, "estimate-notes")
    assert "Estimate sample: random design, 10 sampled turns (seed 4); 1 labelled" in html


def test_the_sample_queue_is_labelled_blind_and_each_label_says_so(web, synthetic_run):
    """The sample queue hides the judge's and the rules' verdicts, the gold and the judge's
    replies, and says so; its labels record blind: true (in the store and in the labels file
    the page exports); shown on request, the next label records blind: false."""
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    disagreements = client.get(f"/ui/review/{synthetic_run}?queue=disagreements").text
    assert 'data-blind="false"' in disagreements
    assert 'class="facts verdicts"' in disagreements and "Gold 2.4" in disagreements
    page = draw_form(client, csrf, synthetic_run, 10, 4).text
    assert 'data-blind="true"' in page and "Blind labelling:" in page
    assert "are hidden, so your label does not lean on them" in page
    for hidden in ('class="facts verdicts"', "<dt>Judge</dt>", "RULE-2.4", "Gold 2.4",
                   "Judge replies", 'data-th="Judge"', "open the full turn"):
        assert hidden not in page, hidden
    item = client.get(f"/ui/review/{synthetic_run}/item?queue=sample&n=10&seed=4&pos=1").text
    assert 'data-blind="true"' in item and "Gold 2.4" not in item
    _, sample = stored_sample(web["service"], _project(web), synthetic_run)
    first, second = sample.turns[:2]
    _label(client, csrf, synthetic_run, dialogue_id=first.dialogue_id,
           turn_index=first.turn_index, label="incorrect", blind=True)
    shown = client.get(f"/ui/review/{synthetic_run}?queue=sample&n=10&seed=4&reveal=1").text
    assert 'data-blind="false"' in shown and 'class="facts verdicts"' in shown
    assert "reveal=1" in shown  # the queue's links keep the choice
    _label(client, csrf, synthetic_run, dialogue_id=second.dialogue_id,
           turn_index=second.turn_index, label="correct", blind=False)
    stored = {(i["dialogue_id"], i["turn_index"]): i["blind"]
              for i in web["service"].labels.list(_project(web))}
    assert stored == {(first.dialogue_id, first.turn_index): True,
                      (second.dialogue_id, second.turn_index): False}
    export = client.get(f"/ui/review/{synthetic_run}/labels.jsonl").text
    records = {(r["dialogue_id"], r["turn_index"]): r
               for r in map(json.loads, export.splitlines())}
    assert records[(first.dialogue_id, first.turn_index)]["blind"] is True
    assert records[(second.dialogue_id, second.turn_index)]["blind"] is False
    assert all(r["predictions_sha256"] == "0" * 64 for r in records.values())
    from judge.analysis import HumanLabel

    assert [HumanLabel.model_validate(r).blind for r in records.values()] in (
        [True, False], [False, True])
