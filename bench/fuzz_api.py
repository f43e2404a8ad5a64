"""Fuzz a real ``dst-judge serve`` from its OpenAPI schema (schemathesis) and count what no
request may cause: responses with a 5xx status and tracebacks in the server's log.

The server runs API only (``--jobs 0``), without rate limits (the fuzzer sends fast), with an
admin token. Figures are printed and written as JSON (the fuzzer's own output beside it, as
``.log``); an error inside the fuzzer itself is counted apart.

    python bench/fuzz_api.py [--max-examples 15] [--json fuzz.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import local_only  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=15, help="per operation and phase")
    parser.add_argument("--json", type=Path, default=Path("fuzz.json"))
    args = parser.parse_args(argv)
    local_only()
    if shutil.which("schemathesis") is None:
        print("schemathesis is not installed (pip install schemathesis)")
        return 2
    from judge.service import Database, create_token
    from tests.service.serve_process import ServeProcess

    with tempfile.TemporaryDirectory(prefix="dstj-fuzz-") as folder:
        data_dir = Path(folder)
        db = Database(f"sqlite:///{data_dir / 'dst-judge.db'}")
        db.migrate()
        token = create_token(db, "lab", "admin", name="fuzz")[0]
        db.dispose()
        flags = ["--jobs", "0", "--requests-per-minute", "0", "--auth-failures-per-minute", "0"]
        with ServeProcess(data_dir, args=flags, max_seconds=1800) as server:
            done = subprocess.run(
                ["schemathesis", "run", f"{server.url}/openapi.json",
                 "-H", f"Authorization: Bearer {token}", "--checks", "not_a_server_error",
                 "--max-examples", str(args.max_examples), "--workers", "2"],
                capture_output=True, text=True, timeout=1800, check=False)
            log = server.log.read_text(encoding="utf-8", errors="replace")
    output = done.stdout + done.stderr
    generated = re.search(r"(\d+) generated", output)
    figures = {"schemathesis_exit": done.returncode,
               "requests_generated": int(generated.group(1)) if generated else None,
               "server_errors_reported": output.count("Server error"),
               "fuzzer_internal_errors": output.count("Runtime Error"),
               "tracebacks_in_log": log.count("Traceback"),
               "error_lines_in_log": sum(" ERROR " in line for line in log.splitlines())}
    args.json.with_suffix(".log").write_text(output, encoding="utf-8")
    print(output.strip().splitlines()[-1] if output.strip() else "(no output)")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    clean = not figures["server_errors_reported"] and not figures["tracebacks_in_log"]
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
