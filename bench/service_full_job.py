"""Benchmark: one evaluate job over the full MultiWOZ test set (7,368 turns) through the service,
against a fake model answering in 300 ms with 64 calls in flight, beside ``judge.evaluate`` in
this process on the same inputs, model and concurrency.

Measures: wall time from submission to ``succeeded`` (the server's ``created_at`` →
``finished_at``) against the library run's; peak RSS (VmHWM) of the API process and of its
worker process; paid requests (completions at the fake model) against distinct request
bodies; how soon ``GET /v1/jobs/{id}/judgments`` sends its first byte, and the whole
download; how long the web interface's run page (``/ui/runs/{id}``) takes to arrive whole
for a logged-in session; and that the command line works on the job: ``dst-judge results
JOB --out DIR``, then ``agreement DIR``, ``compare DIR DIR`` and ``audit DIR --gold 2.1
--candidates FILE``, each timed and required to exit 0. The shared data of the development
workspace is needed (``--data``).

    python bench/service_full_job.py [--data ../shared/data/multiwoz] [--system original]
                                     [--latency 0.3] [--concurrency 64]
                                     [--out bench/service_full_job.json]

Figures also go to ``bench/results/service_full_job.json`` (rendered in docs/serve.md).
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from _common import local_only, write_results  # noqa: E402

import judge  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess  # noqa: E402
from tests.service.serve_process import ServeProcess, create_token  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "multiwoz"


def _seconds(stamp: str) -> float:
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(stamp[19:-1])


def _peak_mb(pid: int | None) -> float | None:
    """VmHWM (peak resident set) of a live process, in MB."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def _direct(args: argparse.Namespace, model: ServerProcess) -> dict[str, Any]:
    schema = judge.load_schema(args.data / "schema.json")
    dialogues = judge.load_dialogues(args.data / "dialogues.jsonl.gz")
    predictions = judge.load_predictions(args.predictions, dialogues, schema)
    config = judge.load_config({"model": "bench", "base_url": model.url, "use_cache": False,
                                "concurrency": args.concurrency, "timeout": 120.0,
                                "api_key": "sk-bench"})
    model.reset()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        result = judge.evaluate(config, schema, dialogues, predictions, out_dir=Path(out))
    wall = time.perf_counter() - start
    stats = model.snapshot(bodies=False)
    return {"wall_s": round(wall, 1), "turns": result.summary["turns"],
            "calls": result.summary["calls"]["planned"], "completed": stats["completed"],
            "verdicts": [r["verdict"] for r in result.rows]}


def _download(url: str, token: str) -> tuple[float, float, int]:
    """First byte and whole download of the judgments stream (seconds), and its lines."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    start = time.perf_counter()
    lines = 0
    with opener.open(request, timeout=300) as response:
        first = response.read(1)
        first_at = time.perf_counter() - start
        lines = (first + response.read()).count(b"\n")
    return first_at, time.perf_counter() - start, lines


def _run_page(url: str, token: str, job_id: str) -> tuple[float, int]:
    """Log in through the form as a browser would, then time the run page: seconds to the
    whole HTML, and its size."""
    with httpx.Client(base_url=url, timeout=120, trust_env=False) as web:
        login = web.get("/ui/login")
        nonce = re.search(r'name="csrf" value="([^"]+)"', login.text)
        if nonce is None:
            raise SystemExit("the login page has no CSRF field")
        done = web.post("/ui/login", data={"token": token, "csrf": nonce.group(1),
                                           "next": "/ui/"})
        if done.status_code != 303:
            raise SystemExit(f"login failed: HTTP {done.status_code}")
        start = time.perf_counter()
        page = web.get(f"/ui/runs/{job_id}")
        took = time.perf_counter() - start
    if page.status_code != 200 or job_id not in page.text:
        raise SystemExit(f"the run page answered HTTP {page.status_code}")
    return took, len(page.content)


def _cli(url: str, token: str, job_id: str, folder: Path) -> dict[str, float]:
    """The command line on the served job; each command timed, each must exit 0."""
    env = {**os.environ, "DST_JUDGE_SERVER": url, "DST_JUDGE_TOKEN": token,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = folder / "run"
    commands = {"results": ["results", job_id, "--out", str(run)],
                "agreement": ["agreement", str(run)],
                "compare": ["compare", str(run), str(run)],
                "audit": ["audit", str(run), "--gold", "2.1", "--candidates",
                          str(folder / "candidates.csv")]}
    seconds = {}
    for name, argv in commands.items():
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "judge", *argv], env=env, cwd=folder,
                              capture_output=True, text=True, timeout=1800, check=False)
        seconds[name] = round(time.perf_counter() - start, 1)
        if done.returncode != 0:
            raise SystemExit(f"dst-judge {name} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def _service(args: argparse.Namespace, model: ServerProcess, folder: Path) -> dict[str, Any]:
    token = create_token(folder, "bench")
    endpoints = {"fake": {"base_url": model.url, "max_concurrency": args.concurrency}}
    model.reset()
    with ServeProcess(folder, endpoints=endpoints, args=["--jobs", "1", "--lease", "60"],
                      max_seconds=3600) as server:
        client = judge.Client(server.url, token, timeout=300)
        inputs = {"schema": client.upload(args.data / "schema.json", "schema").id,
                  "dialogues": client.upload(args.data / "dialogues.jsonl.gz",
                                             "dialogues").id,
                  "predictions": client.upload(args.predictions, "predictions").id}
        job = client.submit("evaluate", inputs, {"model": "bench",
                                                 "concurrency": args.concurrency})
        done = client.wait(job.id, timeout=3600, poll=1.0).model_dump()
        health = server.health()
        api_peak = _peak_mb(server.process.pid if server.process else None)
        worker_peak = _peak_mb(health["worker"].get("pid"))
        first, whole, lines = _download(f"{server.url}/v1/jobs/{job.id}/judgments", token)
        verdicts = [r["verdict"] for r in client.judgments(job.id)]
        page_s, page_bytes = _run_page(server.url, token, job.id)
        cli = _cli(server.url, token, job.id, folder)
    stats = model.snapshot(bodies=False)
    return {"status": done["status"], "exit_code": done["exit_code"],
            "wall_s": round(_seconds(done["finished_at"]) - _seconds(done["created_at"]), 1),
            "completed": stats["completed"], "distinct": stats["distinct_bodies"],
            "api_peak_rss_mb": api_peak and round(api_peak), "worker_peak_rss_mb":
            worker_peak and round(worker_peak), "judgments_first_byte_ms": round(1000 * first),
            "judgments_download_s": round(whole, 2), "judgments_lines": lines,
            "run_page_ms": round(1000 * page_s), "run_page_kb": round(page_bytes / 1024),
            "cli_s": cli, "verdicts": verdicts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--system", default="original")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "service_full_job.json")
    args = parser.parse_args()
    args.predictions = args.data / "predictions" / f"{args.system}.jsonl.gz"
    if not args.predictions.exists():
        print(f"skipped: no MultiWOZ data at {args.data}; pass --data DIR")
        return 0
    local_only()
    with ServerProcess(FaultConfig(latency=args.latency), max_seconds=7200) as model, \
            tempfile.TemporaryDirectory(prefix="dstj-full-") as tmp:
        direct = _direct(args, model)
        print(f"library: {direct['wall_s']} s for {direct['turns']} turns, {direct['calls']} "
              f"calls; {direct['completed']} completions", flush=True)
        served = _service(args, model, Path(tmp))
    same = served.pop("verdicts") == direct.pop("verdicts")
    ratio = served["wall_s"] / direct["wall_s"] - 1
    print(f"service: {served['status']} (exit {served['exit_code']}) in {served['wall_s']} s "
          f"({100 * ratio:+.1f} % against the library); paid {served['completed']} for "
          f"{served['distinct']} distinct; peak RSS API {served['api_peak_rss_mb']} MB, "
          f"worker {served['worker_peak_rss_mb']} MB; judgments: first byte "
          f"{served['judgments_first_byte_ms']} ms, {served['judgments_lines']} lines in "
          f"{served['judgments_download_s']} s; same verdicts as the library: {same}")
    args.out.write_text(json.dumps({"benchmark": "service_full_job", "latency_s": args.latency,
                                    "concurrency": args.concurrency, "library": direct,
                                    "service": served, "overhead": round(ratio, 4),
                                    "same_verdicts": same}, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")
    print(f"run page {served['run_page_ms']} ms ({served['run_page_kb']} KB); command line: "
          + ", ".join(f"{k} {v} s" for k, v in served["cli_s"].items()) + " (all exit 0)")
    _write_tables(args, direct, served, ratio, same)
    return 0


def _write_tables(args: argparse.Namespace, direct: dict[str, Any], served: dict[str, Any],
                  ratio: float, same: bool) -> None:
    cli = served["cli_s"]
    write_results("service_full_job", [{
        "title": (f"One evaluate job over the MultiWOZ test set ({direct['turns']:,} turns, "
                  f"{direct['calls']:,} calls), fake model at {args.latency * 1000:.0f} ms, "
                  f"{args.concurrency} calls in flight"),
        "columns": ["measure", "figure", "target"],
        "rows": [
            ["wall time, library (s)", f"{direct['wall_s']}", ""],
            ["wall time, service (s)", f"{served['wall_s']} ({100 * ratio:+.1f} %)",
             "within 10 % of the library"],
            ["paid requests / distinct", f"{served['completed']:,} / {served['distinct']:,}",
             "equal"],
            ["peak RSS, API / worker (MB)",
             f"{served['api_peak_rss_mb']} / {served['worker_peak_rss_mb']}", ""],
            ["judgments download: first byte (ms)", f"{served['judgments_first_byte_ms']}",
             "< 200"],
            ["judgments download: whole (s)",
             f"{served['judgments_download_s']} ({served['judgments_lines']:,} lines)", ""],
            ["run page /ui/runs/ID, logged in (ms)",
             f"{served['run_page_ms']} ({served['run_page_kb']} KB)", "< 1000"],
            ["dst-judge results JOB --out DIR (s)", f"{cli['results']}", "exit 0"],
            ["agreement / compare / audit on DIR (s)",
             f"{cli['agreement']} / {cli['compare']} / {cli['audit']}", "exit 0"],
        ],
        "note": (f"status {served['status']}, same verdicts as the library: {same}; one run "
                 "on a shared, loaded machine (see the load average), so times are noisy."),
    }], latency_s=args.latency, concurrency=args.concurrency)


if __name__ == "__main__":
    raise SystemExit(main())
