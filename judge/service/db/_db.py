"""The service's one database: SQLite (WAL, one writer at a time) for a single machine, or
Postgres so that several replicas share one queue. Every piece of service state lives here:
projects, tokens, uploaded files, jobs with their leases and run logs (and the Batch API
batches of batch jobs), per-turn results, human labels, the shared rate-limit pool and the
ledger of paid model requests.

Tables are SQLAlchemy Core; the schema is created and upgraded by the alembic migrations in
``judge/service/migrations`` (run on every start, under a lock on Postgres). Times are Unix
seconds (float) so that SQLite and Postgres compare them alike.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from ..._errors import DatabaseUnavailable
from ._migrate import upgrade

metadata = sa.MetaData()
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")

projects = sa.Table(
    "projects", metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("settings", JSONType, nullable=False, default=dict),
)

tokens = sa.Table(
    "tokens", metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False, unique=True),
    sa.Column("prefix", sa.String(16), nullable=False),
    sa.Column("scopes", sa.String(100), nullable=False),
    sa.Column("spend_cap_usd", sa.Float),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
    sa.Column("revoked_at", sa.Float),
    # a reviewer is a person: one live token per name and project (labels are keyed by name)
    sa.Index("uq_tokens_live_name", "project_id", "name", unique=True,
             sqlite_where=sa.text("revoked_at IS NULL"),
             postgresql_where=sa.text("revoked_at IS NULL")),
)

web_sessions = sa.Table(
    "web_sessions", metadata,
    # the sha256 of the session id the browser's cookie holds (encrypted): a copied database
    # opens no session
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("token_id", sa.String(40), sa.ForeignKey("tokens.id"), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float),
    sa.Index("ix_web_sessions_expires", "expires_at"),
)

blobs = sa.Table(
    "blobs", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),  # gzip of the content
    sa.Column("created_at", sa.Float, nullable=False),
)

files = sa.Table(
    "files", metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("name", sa.String(300), nullable=False),
    sa.Column("sha256", sa.String(64), sa.ForeignKey("blobs.sha256"), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("info", JSONType, nullable=False, default=dict),
    sa.Column("token_id", sa.String(40)),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("project_id", "kind", "sha256", name="uq_files_content"),
)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("token_id", sa.String(40)),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("mode", sa.String(10), nullable=False, default="live"),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("endpoint", sa.String(100)),
    sa.Column("inputs", JSONType, nullable=False),
    sa.Column("options", JSONType, nullable=False),
    sa.Column("budget_usd", sa.Float),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("lease_owner", sa.String(80)),
    sa.Column("lease_expires", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("exit_code", sa.Integer),
    sa.Column("error", sa.Text),
    sa.Column("progress", JSONType),
    sa.Column("manifest", JSONType),
    sa.Column("summary", JSONType),
    sa.Column("cost_usd", sa.Float, nullable=False, default=0.0),
    sa.Column("tokens_used", sa.BigInteger, nullable=False, default=0),
    sa.Column("imported", sa.Boolean, nullable=False, default=False),
    # what a judge run judged: its predictions file's sha256 (human labels are keyed by it)
    sa.Column("subject", sa.String(80)),
    sa.Column("wake_at", sa.Float),  # a waiting (batch) job is claimed again from this time
    sa.Index("ix_jobs_queue", "status", "created_at"),
    sa.Index("ix_jobs_project", "project_id", "created_at"),
)

job_calls = sa.Table(
    "job_calls", metadata,
    sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("custom_id", sa.String(300), primary_key=True),
    sa.Column("record", JSONType, nullable=False),
)

job_batches = sa.Table(
    "job_batches", metadata,
    sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("batch_id", sa.String(200), primary_key=True),
    sa.Column("part", sa.Integer, nullable=False),  # 1-based number of the request file
    sa.Column("sha256", sa.String(64), nullable=False),  # of the request file
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("completed", sa.Integer, nullable=False, default=0),
    sa.Column("failed", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

judgments = sa.Table(
    "judgments", metadata,
    sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("dialogue_id", sa.String(300), nullable=False),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("verdict", sa.Boolean),
    sa.Column("has_error", sa.Boolean, nullable=False),
    sa.Column("row", JSONType, nullable=False),
    sa.Index("ix_judgments_turn", "job_id", "dialogue_id", "turn_index"),
)

artifacts = sa.Table(
    "artifacts", metadata,
    sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("content_type", sa.String(100), nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

labels = sa.Table(
    "labels", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("job_id", sa.String(40)),  # the run the label was given on (informative)
    # what was labelled: the sha256 of the predictions file whose turn states are judged,
    # "job:<id>" when a run's predictions are unknown, "" for old labels of no run
    sa.Column("subject", sa.String(80), nullable=False),
    sa.Column("dialogue_id", sa.String(300), nullable=False),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("slot", sa.String(200), nullable=False, default=""),  # "" = the whole turn
    sa.Column("label", sa.String(10), nullable=False),  # correct | incorrect | unsure
    sa.Column("reviewer", sa.String(200), nullable=False),
    sa.Column("token_id", sa.String(40)),
    sa.Column("note", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # given on a page that hid the judge's and the rules' verdicts and the gold (null: not
    # recorded, e.g. a label of the API or of an older version)
    sa.Column("blind", sa.Boolean),
    sa.UniqueConstraint("project_id", "subject", "dialogue_id", "turn_index", "slot",
                        "reviewer", name="uq_labels_subject"),
)

review_samples = sa.Table(
    # a judge run's review samples by file id: "estimate" (the run's estimate sample, fixed
    # once a turn of it has a label) and "n<n>-seed<seed>" (separate draws)
    "review_samples", metadata,
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("job_id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(60), primary_key=True),
    sa.Column("file_id", sa.String(40), sa.ForeignKey("files.id"), nullable=False),
    sa.Column("token_id", sa.String(40)),
    sa.Column("created_at", sa.Float, nullable=False),
)

correction_decisions = sa.Table(
    "correction_decisions", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("project_id", sa.String(40), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("job_id", sa.String(40), nullable=False),  # the judge run whose candidates
    sa.Column("candidate", sa.String(600), nullable=False),  # "<dialogue>:<turn>:<slot>"
    sa.Column("dialogue_id", sa.String(300), nullable=False),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("slot", sa.String(200), nullable=False),
    sa.Column("gold", sa.String(50), nullable=False),  # the annotation version it corrects
    sa.Column("action", sa.String(10), nullable=False),  # accept | edit | reject
    sa.Column("value", sa.Text),  # the decided value (null: no value)
    sa.Column("was", sa.Text),  # the annotation's value when decided (null: no value)
    sa.Column("adjudicated", sa.Boolean, nullable=False, default=False),
    sa.Column("reviewer", sa.String(200), nullable=False),
    sa.Column("token_id", sa.String(40)),
    sa.Column("note", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.UniqueConstraint("project_id", "job_id", "candidate", "reviewer", "adjudicated",
                        name="uq_correction_decisions"),
)

rate_pools = sa.Table(
    "rate_pools", metadata,
    sa.Column("endpoint", sa.String(100), primary_key=True),
    sa.Column("paused_until", sa.Float, nullable=False, default=0.0),
)

rate_events = sa.Table(
    "rate_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("endpoint", sa.String(100), nullable=False),
    sa.Column("at", sa.Float, nullable=False),  # granted
    sa.Column("done_at", sa.Float),  # the response came (or the request failed)
    sa.Column("tokens", sa.Integer, nullable=False),
    sa.Column("job_id", sa.String(40), nullable=False),
    sa.Index("ix_rate_events", "endpoint", "at"),
)

rate_waiters = sa.Table(
    "rate_waiters", metadata,
    sa.Column("endpoint", sa.String(100), primary_key=True),
    sa.Column("job_id", sa.String(40), primary_key=True),
    sa.Column("until", sa.Float, nullable=False),
)

workers = sa.Table(
    "workers", metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("draining", sa.Boolean, nullable=False, default=False),
)

ledger_requests = sa.Table(
    "ledger_requests", metadata,
    sa.Column("scope", sa.String(40), primary_key=True),  # a project id, or "*" when shared
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("state", sa.String(10), nullable=False),  # pending | replied | failed
    sa.Column("owner", sa.String(300)),
    sa.Column("lease_until", sa.Float),
    sa.Column("sends", sa.Integer, nullable=False, default=0),
    sa.Column("status", sa.Integer),
    sa.Column("content", sa.LargeBinary),  # the raw reply, as the model sent it (redacted)
    sa.Column("origin", sa.String(100)),
    sa.Column("error", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.CheckConstraint("state IN ('pending', 'replied', 'failed')",
                       name="ck_ledger_requests_state"),
    sa.Index("ix_ledger_requests_owner", "owner"),
)

ledger_replaced = sa.Table(
    "ledger_replaced", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("scope", sa.String(40), nullable=False),
    sa.Column("key", sa.String(128), nullable=False),
    sa.Column("content", sa.LargeBinary, nullable=False),
    sa.Column("status", sa.Integer),
    sa.Column("origin", sa.String(100)),
    sa.Column("recorded_at", sa.Float, nullable=False),
    sa.Column("replaced_at", sa.Float, nullable=False),
    sa.Index("ix_ledger_replaced_key", "scope", "key"),
)

service_settings = sa.Table(
    "service_settings", metadata,
    sa.Column("key", sa.String(100), primary_key=True),
    sa.Column("value", JSONType, nullable=False),
)


QUEUE_CHANNEL = "dst_judge_queue"
"""The Postgres channel on which a job being queued wakes the workers (``LISTEN``)."""


def private_folder(path: Path) -> Path:
    """Make ``path`` (and its missing parents) if it is not there, the folder itself readable
    by its owner only (0700, whatever the umask): the service's data directory holds the
    database, uploads and the web's session key. A folder that exists is left as it is."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it is not there (a SQLite database before
    SQLite opens it: SQLite gives its -wal and -shm files the database's mode)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def describe_database(url: str) -> str:
    """What a log line may say of a database: its kind and its name (a SQLite file's name,
    a Postgres database's), never a path, a socket, a host or a password."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return "a database"
    if parsed.get_backend_name() == "sqlite":
        name = Path(parsed.database).name if parsed.database else ""
        return f"SQLite file {name}" if name and name != ":memory:" else "SQLite in memory"
    kind = {"postgresql": "Postgres"}.get(parsed.get_backend_name(), parsed.get_backend_name())
    return f"{kind} database {parsed.database}" if parsed.database else f"{kind} database"


def notify_queue(conn: sa.Connection) -> None:
    """Tell listening workers that a job was queued: delivered when this transaction commits
    (nothing on SQLite, where workers poll and the API nudges its own)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"NOTIFY {QUEUE_CHANNEL}"))


def connection_lost(exc: BaseException) -> bool:
    """Whether a database error means "no database for now" (a connection refused, closed or
    reset, a server shutting down, SQLite's lock held too long), not a wrong statement."""
    if isinstance(exc, DatabaseUnavailable):
        return True
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa.exc.InterfaceError) and isinstance(getattr(exc, "orig", None),
                                                              sqlite3.Error):
        return False  # SQLite's is a misuse (Python 3.10: a parameter it cannot bind)
    return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError,
                            sa.exc.DisconnectionError))


@contextlib.contextmanager
def _available() -> Iterator[None]:
    try:
        yield
    except sa.exc.SQLAlchemyError as exc:
        if connection_lost(exc):
            raise DatabaseUnavailable(exc) from exc
        raise


class Database:
    """An engine plus the write discipline of its dialect.

    SQLite allows one writer: every write transaction starts with ``BEGIN IMMEDIATE`` (so it
    waits for the lock instead of failing on upgrade) and writers in this process queue on a
    lock. Postgres transactions are ordinary; the queue uses ``FOR UPDATE SKIP LOCKED``.
    """

    busy_seconds = 30.0
    """How long SQLite waits for another writer's lock before the request is refused (503)."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.is_postgres = url.startswith("postgresql")
        if self.is_postgres and url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
        if self.is_sqlite:
            path, query, _ = (url.split("///", 1)[1] if "///" in url else "").partition("?")
            if path and path != ":memory:":
                private_folder(Path(path).parent)
                if not query:  # a URI's options (read-only, in memory...) create nothing
                    private_file(Path(path))
            self.engine = sa.create_engine(url, echo=echo,
                                           connect_args={"check_same_thread": False,
                                                         "timeout": self.busy_seconds})
            self._setup_sqlite()
        else:
            self.engine = sa.create_engine(url, echo=echo, pool_pre_ping=True, pool_size=10,
                                           max_overflow=20)
        self._writer = threading.Lock() if self.is_sqlite else None
        self.serial = (ThreadPoolExecutor(1, thread_name_prefix="dst-judge-sqlite")
                       if self.is_sqlite else None)
        """On SQLite, one thread for the short statements of async callers (the ledger's):
        its thread starts on first use and ends with the process."""

    def _setup_sqlite(self) -> None:
        @sa.event.listens_for(self.engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={int(self.busy_seconds * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @sa.event.listens_for(self.engine, "begin")
        def _begin(connection: sa.Connection) -> None:
            mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
            if mode is not None:
                connection.exec_driver_sql(f"BEGIN {mode}")

    @contextlib.contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read transaction (concurrent with others, and with the writer under WAL)."""
        with _available(), self.engine.connect() as connection, connection.begin():
            yield connection

    @contextlib.contextmanager
    def query(self) -> Iterator[sa.Connection]:
        """For one read statement: on SQLite no BEGIN/COMMIT around it (a statement is its
        own transaction there), which halves the cost of the API's hottest reads (the token
        of every request, a job's status). Several statements that must agree: :meth:`read`."""
        with _available(), self.engine.connect() as connection:
            if self.is_sqlite:
                connection = connection.execution_options(sqlite_begin=None)
            yield connection

    @contextlib.contextmanager
    def write(self) -> Iterator[sa.Connection]:
        """A write transaction: committed on exit, rolled back on error."""
        if self._writer is None:
            with _available(), self.engine.connect() as connection, connection.begin():
                yield connection
            return
        with _available(), self._writer, self.engine.connect() as connection:
            connection = connection.execution_options(sqlite_begin="IMMEDIATE")
            with connection.begin():
                yield connection

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest migration (alembic)."""
        upgrade(self, self._writer)

    def ping(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(sa.text("SELECT 1"))
            return True
        except sa.exc.SQLAlchemyError:
            return False

    def dispose(self) -> None:
        self.engine.dispose()


def now() -> float:
    return time.time()
