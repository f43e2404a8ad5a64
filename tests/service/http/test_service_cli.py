"""The command-line side of the service: token create/list/revoke, and ``judge.Client``
importable without the serve extra (httpx only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from judge.cli import main
from tests.netguard.sitecustomize import subprocess_pythonpath
from tests.service.serve_process import ROOT


def test_token_create_list_revoke(tmp_path, capsys):
    data = ["--data-dir", str(tmp_path)]
    assert main(["serve", "token", "create", "--project", "lab", "--scopes", "read,review",
                 "--name", "bob", "--json", "--init", *data]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["token"].startswith("dsj_") and made["scopes"] == ["read", "review"]
    assert main(["serve", "token", "list", "--json", *data]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in listed] == ["bob"] and "hash" not in listed[0]
    assert made["token"] not in json.dumps(listed)
    assert main(["serve", "token", "revoke", made["id"], *data]) == 0
    capsys.readouterr()
    assert main(["serve", "token", "list", "--json", *data]) == 0
    assert json.loads(capsys.readouterr().out)[0]["revoked_at"] is not None
    assert main(["serve", "token", "revoke", made["id"], *data]) == 2
    assert main(["serve", "token", "create", "--project", "lab", "--scopes", "root",
                 *data]) == 2
    assert "scopes must be some of" in capsys.readouterr().err


def test_remote_commands_need_a_server_and_a_token(monkeypatch, capsys):
    monkeypatch.delenv("DST_JUDGE_SERVER", raising=False)
    monkeypatch.delenv("DST_JUDGE_TOKEN", raising=False)
    assert main(["jobs"]) == 2
    assert "--server URL is needed" in capsys.readouterr().err
    assert main(["jobs", "--server", "http://127.0.0.1:9"]) == 2
    assert "DST_JUDGE_TOKEN" in capsys.readouterr().err


def test_the_client_imports_without_the_serve_extra():
    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('fastapi', 'starlette', 'uvicorn', "
               "'sqlalchemy', 'alembic', 'psycopg', 'prometheus_client'):\n"
               "            raise ImportError(f'blocked: {name}')\n"
               "sys.meta_path.insert(0, Block())\n"
               "import judge\n"
               "client = judge.Client('http://127.0.0.1:9', 'dsj_x')\n"
               "print(type(client).__name__, 'fastapi' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT)},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Client False"


def test_worker_processes_default_to_one_per_four_slots_up_to_the_cores(tmp_path, monkeypatch):
    """A replica that runs many jobs at once spreads them over the machine's cores by default
    (past about four jobs, one process's jobs wait on its interpreter lock); a number given
    wins, and no replica has more processes than job slots."""
    from judge.service import build_settings
    from judge.service.queue import WorkerProcesses

    def count(cores: int | None, **values) -> int:
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        return build_settings({"data_dir": tmp_path, **values}).worker_process_count

    assert count(8, job_slots=4) == 1  # the default: 4 slots
    assert count(8, job_slots=5) == 2 and count(8, job_slots=16) == 4
    assert count(2, job_slots=16) == 2 and count(None, job_slots=16) == 1
    assert count(8, job_slots=0) == 1  # an API-only replica keeps one idle worker process
    assert count(2, job_slots=16, worker_processes=3) == 3  # as asked
    assert count(8, job_slots=2, worker_processes=4) == 2  # never more than the slots
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    settings = build_settings({"data_dir": tmp_path, "job_slots": 8, "worker_mode": "process"})
    slots = [p.settings.job_slots for p in WorkerProcesses(settings).processes]
    assert slots == [4, 4]


def test_token_commands_read_the_data_dir_before_or_after_token_and_never_make_a_new_db(
        tmp_path, capsys, monkeypatch):
    """``serve --data-dir D token create`` used D's database no more than ``token create
    --data-dir D`` did: it wrote a new one under the user data directory, whose token the
    server then refused. Both spellings (and the environment) mean D; a command that would
    create a new, empty database says so and asks for --init."""
    folder = tmp_path / "served"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "elsewhere"))
    assert main(["serve", "--data-dir", str(folder), "token", "create", "--project", "lab"]) == 2
    assert "--init" in capsys.readouterr().err and not folder.exists()
    assert not (tmp_path / "elsewhere").exists()
    assert main(["serve", "--data-dir", str(folder), "token", "create", "--project", "lab",
                 "--name", "ana", "--init", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (folder / "dst-judge.db").is_file()
    assert main(["serve", "token", "list", "--json", "--data-dir", str(folder)]) == 0
    assert [t["id"] for t in json.loads(capsys.readouterr().out)] == [first["id"]]
    monkeypatch.setenv("DST_JUDGE_SERVE_DATA_DIR", str(folder))
    assert main(["serve", "token", "create", "--project", "lab", "--name", "ana"]) == 2
    assert "already called 'ana'" in capsys.readouterr().err  # one live token per reviewer
    assert main(["serve", "token", "rotate", "ana", "--project", "lab", "--json"]) == 0
    rotated = json.loads(capsys.readouterr().out)
    assert rotated["name"] == "ana" and rotated["replaces"] == first["id"]
    assert rotated["token"] != first["token"] and rotated["scopes"] == first["scopes"]
    assert main(["serve", "token", "list", "--json"]) == 0
    listed = {t["id"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed[first["id"]]["revoked_at"] is not None
    assert listed[rotated["id"]]["revoked_at"] is None
    assert main(["serve", "token", "rotate", "nobody", "--project", "lab"]) == 2
    assert not (tmp_path / "elsewhere").exists()  # nothing was ever written there


def test_server_settings_come_from_flags_then_environment_then_a_settings_file(
        tmp_path, monkeypatch, capsys):
    """``ServiceSettings`` is read as the judge's options are: a flag wins over
    ``DST_JUDGE_SERVE_<NAME>``, which wins over ``--settings FILE``; the CLI reads no variable
    itself. A bad value names its setting; a bad JSON variable names the variable, never its
    value."""
    from judge.cli._main import build_parser
    from judge.cli._serve import _settings
    from judge.service import ENV_PREFIX, ServiceSettings, build_settings

    assert ENV_PREFIX == "DST_JUDGE_SERVE_"
    for name in ServiceSettings.model_fields:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    file = tmp_path / "serve.toml"
    file.write_text('job_slots = 7\nretention_days = 30\nlease_seconds = 12\n'
                    f'data_dir = "{(tmp_path / "from-file").as_posix()}"\n')
    monkeypatch.setenv("DST_JUDGE_SERVE_JOB_SLOTS", "5")
    monkeypatch.setenv("DST_JUDGE_SERVE_LEASE_SECONDS", "9")
    settings = build_settings({"lease_seconds": 20.0}, file)
    assert (settings.job_slots, settings.lease_seconds, settings.retention_days) == (5, 20.0, 30)
    assert settings.data_dir == tmp_path / "from-file"
    args = build_parser().parse_args(["serve", "--settings", str(file), "--jobs", "2"])
    assert (_settings(args).job_slots, _settings(args).retention_days) == (2, 30)
    monkeypatch.setenv("DST_JUDGE_SERVE_DB", f"sqlite:///{tmp_path / 'env.db'}")
    args = build_parser().parse_args(["serve", "token", "list"])
    assert _settings(args).db_url == f"sqlite:///{tmp_path / 'env.db'}"  # no CLI env code
    monkeypatch.setenv("DST_JUDGE_SERVE_JOB_SLOTS", "many")
    assert main(["serve", "token", "list", "--settings", str(file)]) == 2
    assert "job_slots" in capsys.readouterr().err
    monkeypatch.setenv("DST_JUDGE_SERVE_JOB_SLOTS", "1")
    monkeypatch.setenv("DST_JUDGE_SERVE_ENDPOINTS", '{"x": {"api_key": "sk-HIDDEN"')
    assert main(["serve", "token", "list"]) == 2
    err = capsys.readouterr().err
    assert "DST_JUDGE_SERVE_ENDPOINTS: not valid JSON" in err and "sk-HIDDEN" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text("job_slots = \n")
    assert main(["serve", "token", "list", "--settings", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err
