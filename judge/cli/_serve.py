"""``dst-judge serve``: run the evaluation service; ``serve token create|list|revoke``: manage
its bearer tokens (printed once, stored hashed).

The service needs the ``serve`` extra (``pip install 'dst-judge[serve]'``); without it these
commands say so instead of failing on an import.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from .._errors import OptionError
from ._layout import Field, fit_table

_EXTRA = "the service needs the serve extra: pip install 'dst-judge[serve]'"
SETTINGS_HELP = ("TOML/JSON file of server settings (any setting of docs/serve.md, e.g. "
                 "job_slots, retention_days); flags win over DST_JUDGE_SERVE_<NAME> "
                 "variables, which win over the file")
EXTRA_MODULES = frozenset({"fastapi", "starlette", "uvicorn", "multipart", "python_multipart",
                           "sqlalchemy", "alembic", "psycopg", "psycopg_binary",
                           "prometheus_client", "cryptography", "fastapi_offline"})
"""Top-level modules of the serve extra's packages: a missing one means the extra is absent."""

Handler = Callable[[argparse.Namespace, Console], int]


def needs_extra(handler: Handler) -> Handler:
    """Every serve and worker command imports the service lazily, some deep inside a step: one
    missing module of the extra becomes the one message (exit 2), never a traceback, whichever
    subcommand reaches it first. Other import errors are real bugs and stay tracebacks."""
    @functools.wraps(handler)
    def run(args: argparse.Namespace, console: Console) -> int:
        try:
            return handler(args, console)
        except ImportError as exc:
            if (exc.name or "").split(".")[0] in EXTRA_MODULES:
                raise OptionError(_EXTRA) from None
            raise
    return run
LIMIT_FLAGS = ("max_unpacked_mb", "max_ratio", "max_record_mb", "max_json_mb",
               "project_quota_gb", "body_timeout_seconds", "body_idle_seconds",
               "header_timeout_seconds", "auth_failures_per_minute", "requests_per_minute",
               "trusted_proxies")


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "serve", help="run the evaluation service (HTTP API, job queue; SQLite or Postgres)",
        description="Serve the /v1 API (OpenAPI docs at /docs). With no --db the state lives "
        "in SQLite in the user data directory; --db postgresql://... lets several replicas "
        "share one queue. Model endpoints and keys are configured here, never by jobs.")
    _server_args(p)
    sub = p.add_subparsers(dest="serve_command", metavar="{token,copy-db}")
    token = sub.add_parser("token", help="create, list or revoke bearer tokens")
    steps = token.add_subparsers(dest="token_command", required=True, metavar="STEP")
    create = steps.add_parser("create", help="make a token for a project (shown once)")
    create.add_argument("--project", required=True, help="project (workspace) name; created "
                        "when new")
    create.add_argument("--scopes", default="read,submit",
                        help="comma-separated: read, submit, review, admin (default read,submit)")
    create.add_argument("--name", help="a label for the token (default: its id)")
    create.add_argument("--spend-cap", type=float, metavar="USD",
                        help="stop this token's jobs once they spent this much in total")
    _db_args(create)
    create.set_defaults(handler=needs_extra(_run_token_create))
    listing = steps.add_parser("list", help="list tokens (never their secret)")
    listing.add_argument("--project", help="only this project's tokens")
    _db_args(listing)
    listing.set_defaults(handler=needs_extra(_run_token_list))
    revoke = steps.add_parser("revoke", help="revoke a token by id")
    revoke.add_argument("token_id")
    _db_args(revoke)
    revoke.set_defaults(handler=needs_extra(_run_token_revoke))
    rotate = steps.add_parser("rotate", help="a new secret for a reviewer: the live token "
                              "called NAME is revoked and replaced by one with the same name, "
                              "scopes and spending cap (its labels and usage stay its)")
    rotate.add_argument("name", help="the token's name (the reviewer)")
    rotate.add_argument("--project", required=True, help="the project of the token")
    _db_args(rotate)
    rotate.set_defaults(handler=needs_extra(_run_token_rotate))
    copy = sub.add_parser("copy-db", help="copy every row of one service database into "
                          "another, empty one (SQLite → Postgres)")
    copy.add_argument("--from", dest="source", required=True, metavar="URL",
                      help="source database, e.g. sqlite:///PATH/dst-judge.db")
    copy.add_argument("--to", dest="target", required=True, metavar="URL",
                      help="target database, e.g. postgresql://user:pw@host/db")
    copy.set_defaults(handler=needs_extra(_run_copy_db))
    p.set_defaults(handler=needs_extra(_run_serve))


def _db_args(p: argparse.ArgumentParser) -> None:
    """--db and --data-dir here mean what they mean before ``token`` (SUPPRESS: not given
    here leaves the value given there, or the environment's)."""
    p.add_argument("--db", default=argparse.SUPPRESS, help="database URL (default: SQLite in "
                   "the data directory; env DST_JUDGE_SERVE_DB)")
    p.add_argument("--data-dir", default=argparse.SUPPRESS,
                   help="server data directory (env DST_JUDGE_SERVE_DATA_DIR)")
    p.add_argument("--settings", default=argparse.SUPPRESS, metavar="FILE",
                   help=SETTINGS_HELP)
    p.add_argument("--init", action="store_true", help="create the database when there is "
                   "none yet (otherwise a token command refuses to make a new, empty one)")
    p.add_argument("--json", action="store_true", help="print JSON")


def queue_args(p: argparse.ArgumentParser) -> None:
    """The options ``serve`` and ``worker`` share: where the service's state is, which
    endpoints jobs may use, and how workers claim and run them."""
    p.add_argument("--db", help="database URL: sqlite:///PATH or postgresql://... (default: "
                   "SQLite in the data directory; env DST_JUDGE_SERVE_DB)")
    p.add_argument("--data-dir", help="data directory (default: the user data dir; env "
                   "DST_JUDGE_SERVE_DATA_DIR)")
    p.add_argument("--settings", metavar="FILE", help=SETTINGS_HELP)
    p.add_argument("--endpoints", metavar="FILE", help="TOML/JSON file of named model "
                   "endpoints: base_url, api_key_env, models, rpm, tpm, max_concurrency")
    p.add_argument("--endpoint", action="append", default=[], metavar="NAME=URL",
                   help="a named endpoint without a file (key from DST_JUDGE_KEY_<NAME>)")
    p.add_argument("--max-attempts", type=int, metavar="N",
                   help="claims of a job whose worker died while running it, before the job "
                   "is given up as failed (default 3)")
    p.add_argument("--no-listen", action="store_false", default=None, dest="listen",
                   help="on Postgres, poll for new jobs only (by default workers LISTEN for "
                   "them and start them at once)")
    p.add_argument("--worker-processes", type=int, metavar="N",
                   help="worker processes, the job slots split among them (default: one "
                   "per 4 job slots, at most one per core; more use more cores under a full "
                   "queue)")
    p.add_argument("--lease", type=float, dest="lease_seconds",
                   help="seconds before a silent worker's job is taken over (default 30)")
    p.add_argument("--grace", type=float, dest="grace_seconds",
                   help="seconds calls in flight may finish on SIGTERM (default 20)")
    p.add_argument("--batch-poll", type=float, dest="batch_poll_seconds",
                   help="seconds between two status polls of a batch job (default 30)")
    p.add_argument("--retention-days", type=float,
                   help="delete finished jobs, unused files and ledger replies older than "
                   "this (default: keep)")
    p.add_argument("--share-cache", action="store_true", default=None,
                   dest="share_cache_across_projects",
                   help="one reply cache for all projects (cache hits reveal other projects' "
                   "requests)")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])


def _server_args(p: argparse.ArgumentParser) -> None:
    queue_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; "
                   "put a reverse proxy with TLS in front for other machines)")
    p.add_argument("--port", type=int, default=None, help="port (default 8765)")
    p.add_argument("--replay", metavar="CASSETTES",
                   help="add an endpoint 'replay' (the default one) that answers exactly the "
                   "requests recorded in this cassette file or folder, e.g. cassettes/: try "
                   "the service without a key (model 'local'; other requests become error "
                   "rows)")
    p.add_argument("--jobs", type=int, dest="job_slots", help="jobs this replica runs at once "
                   "(default 4; 0 = API only)")
    p.add_argument("--no-worker", action="store_const", const=0, dest="job_slots",
                   help="an API-only replica (the same as --jobs 0): jobs are run by "
                   "'dst-judge worker' processes or other replicas on the same database")
    p.add_argument("--worker", choices=("process", "thread"), default="process",
                   dest="worker_mode", help="run jobs in a worker process (default) or a "
                   "thread of the API process")
    p.add_argument("--max-upload-mb", type=float, help="largest upload body as sent, in MB "
                   "(default 200)")
    p.add_argument("--max-unpacked-mb", type=float, help="largest upload once unpacked, a "
                   "bundle's members together (default 512)")
    p.add_argument("--max-ratio", type=float, help="largest compression ratio of a .gz upload "
                   "(default 100)")
    p.add_argument("--max-record-mb", type=float, help="largest JSON Lines line, or file that "
                   "is one JSON document, in MB (default 16, at most 64)")
    p.add_argument("--max-json-mb", type=float, help="largest JSON request body (default 2)")
    p.add_argument("--project-quota-gb", type=float, help="unpacked size of one project's "
                   "files (default 10)")
    p.add_argument("--body-timeout", type=float, dest="body_timeout_seconds",
                   help="seconds a client may take to send a request body (default 300)")
    p.add_argument("--body-idle", type=float, dest="body_idle_seconds",
                   help="seconds between two parts of a request body (default 30)")
    p.add_argument("--header-timeout", type=float, dest="header_timeout_seconds",
                   help="seconds a connection may take to send its request head (default 10)")
    p.add_argument("--auth-failures-per-minute", type=int, help="failed authentications per "
                   "client address and minute before 429 (default 30; 0: no limit)")
    p.add_argument("--requests-per-minute", type=int, help="requests per token and minute "
                   "before 429 (default 1200; 0: no limit)")
    p.add_argument("--trusted-proxy", action="append", dest="trusted_proxies", metavar="ADDR",
                   help="address or network of a reverse proxy whose X-Forwarded-For and "
                   "-Proto are believed (repeat for several; default: loopback; 'none': "
                   "nobody)")
    p.add_argument("--max-job-budget", type=float, metavar="USD",
                   help="spending cap of every job")
    p.add_argument("--max-seconds", type=float, help="stop (as on SIGTERM) after this many "
                   "seconds; for tests and benchmarks")


def _settings(args: argparse.Namespace) -> Any:
    try:
        from ..service import build_settings, read_endpoints_file
    except ImportError:
        raise OptionError(_EXTRA) from None
    # flags here; DST_JUDGE_SERVE_* variables and --settings FILE are read by the settings
    values: dict[str, Any] = {"db": getattr(args, "db", None),
                              "data_dir": getattr(args, "data_dir", None)}
    for name in ("job_slots", "lease_seconds", "grace_seconds", "retention_days",
                 "max_upload_mb", "max_job_budget", "share_cache_across_projects",
                 "worker_mode", "worker_processes", "batch_poll_seconds", "max_attempts",
                 "listen", *LIMIT_FLAGS):
        values[name] = getattr(args, name, None)
    endpoints: dict[str, Any] = {}
    if getattr(args, "endpoints", None):
        values.update(read_endpoints_file(args.endpoints))
        endpoints = dict(values.get("endpoints") or {})
    for item in getattr(args, "endpoint", None) or []:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise OptionError(f"--endpoint expects NAME=URL (got {item!r})")
        endpoints[name] = {"base_url": url,
                           "api_key_env": f"DST_JUDGE_KEY_{name.upper().replace('-', '_')}"}
    if getattr(args, "replay", None):
        from ..service import replay_endpoint

        endpoints["replay"] = replay_endpoint(args.replay)
        values["default_endpoint"] = "replay"
    if endpoints:
        values["endpoints"] = endpoints
    return build_settings(values, getattr(args, "settings", None))


def _run_serve(args: argparse.Namespace, console: Console) -> int:
    settings = _settings(args)
    from ..service import (
        DEFAULT_PORT,
        create_app,
        describe_database,
        listening_socket,
        run_server,
    )
    from ..web import mount_web

    port = args.port if args.port is not None else DEFAULT_PORT
    sock = listening_socket(args.host, port)  # a port in use fails here, before any announce
    console.print(f"dst-judge serve on http://{args.host}:{port} (web interface at /ui, docs "
                  f"at /docs); state in {escape(describe_database(settings.db_url))}; endpoints: "
                  f"{escape(', '.join(settings.all_endpoints()))}", highlight=False)
    app = create_app(settings)
    mount_web(app)  # the web interface (judge/web) on the service's app
    run_server(settings, host=args.host, port=port, log_level=args.log_level,
               max_seconds=args.max_seconds, app=app, sock=sock)
    return 0


def _database(args: argparse.Namespace) -> Any:
    """The server's database; one that does not exist yet is created only with --init (a
    token in a database no server reads would be refused with no hint why)."""
    settings = _settings(args)
    from ..service import Database, has_tokens_table, private_folder

    url = settings.db_url
    where = url.split("@")[-1]
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        fresh = True
    else:
        probe = Database(url)
        try:
            fresh = not has_tokens_table(probe)
        finally:
            probe.dispose()
    if fresh and not getattr(args, "init", False):
        raise OptionError(f"there is no service database at {where}: this would create a new, "
                          "empty one that no running server reads. Give the server's "
                          "--data-dir or --db (before or after 'token', or in "
                          "DST_JUDGE_SERVE_DATA_DIR / DST_JUDGE_SERVE_DB), or add --init to "
                          "create it")
    private_folder(settings.data_dir)
    db = Database(url)
    db.migrate()
    return db


def _note(text: str) -> None:
    """What a token command says about the token goes to stderr: stdout holds the token alone,
    so ``TOKEN=$(dst-judge serve token create ...)`` works."""
    Console(stderr=True, highlight=False).print(text)


def _run_token_create(args: argparse.Namespace, console: Console) -> int:
    from ..service import create_token

    db = _database(args)
    token, record = create_token(db, args.project, args.scopes, name=args.name,
                                 spend_cap_usd=args.spend_cap)
    if args.json:
        print(json.dumps({**record, "token": token}, indent=2))
    else:
        _note(f"token {record['id']} for project {escape(args.project)} "
              f"({', '.join(record['scopes'])}); store it now, it is not shown again:")
        print(token)
    return 0


def _run_token_list(args: argparse.Namespace, console: Console) -> int:
    from ..service import list_tokens

    items = list_tokens(_database(args), args.project)
    if args.json:
        print(json.dumps(items, indent=2))
        return 0
    table = fit_table(["id", "project", Field("name", whole=False), "scopes", "prefix",
                       Field("spend cap", "right"), "revoked"])  # ids whole at any width
    for item in items:
        table.add_row(item["id"], item["project"], item["name"], ",".join(item["scopes"]),
                      item["prefix"] + "…",
                      "" if item["spend_cap_usd"] is None else f"{item['spend_cap_usd']:g}",
                      "yes" if item["revoked_at"] else "")
    console.print(table)
    return 0


def _run_token_revoke(args: argparse.Namespace, console: Console) -> int:
    from ..service import list_tokens, revoke_token

    db = _database(args)
    token_id = _token_id([item["id"] for item in list_tokens(db)], args.token_id)
    if not revoke_token(db, token_id):
        raise OptionError(f"no active token {token_id!r}")
    console.print(f"revoked {escape(token_id)}", highlight=False)
    return 0


_SHORTEST = 4
"""Characters after ``tok_`` a shortened id needs: fewer is too easily a slip."""


def _token_id(ids: list[str], given: str) -> str:
    """The id ``given`` names: itself, or the one id it begins (as a narrow table or a copy
    from one may show it, ``…`` and all); refused when it begins several."""
    wanted = given.strip().rstrip("…").rstrip(".")
    if wanted in ids or not wanted:
        return wanted
    matches = [i for i in ids if i.startswith(wanted)]
    if not matches:
        return wanted
    if len(wanted.removeprefix("tok_")) < _SHORTEST:
        raise OptionError(f"{given!r} is too short to name a token: give at least "
                          f"{_SHORTEST} characters after 'tok_' (see 'token list')")
    if len(matches) > 1:
        raise OptionError(f"{given!r} begins {len(matches)} token ids ("
                          f"{', '.join(matches[:5])}{', …' if len(matches) > 5 else ''}): "
                          "give more of the id")
    return matches[0]


def _run_token_rotate(args: argparse.Namespace, console: Console) -> int:
    from ..service import rotate_token

    token, record = rotate_token(_database(args), args.project, args.name)
    if args.json:
        print(json.dumps({**record, "token": token}, indent=2))
    else:
        _note(f"token {record['id']} replaces {record['replaces']} for "
              f"{escape(args.name)} in {escape(args.project)}; store it now, it is not "
              "shown again:")
        print(token)
    return 0


def _run_copy_db(args: argparse.Namespace, console: Console) -> int:
    try:
        from ..service import Database, copy_database
    except ImportError:
        raise OptionError(_EXTRA) from None
    source, target = Database(args.source), Database(args.target)
    try:
        copied = copy_database(source, target)
    finally:
        source.dispose()
        target.dispose()
    console.print("copied " + ", ".join(f"{n} {t}" for t, n in copied.items() if n),
                  highlight=False)
    return 0
