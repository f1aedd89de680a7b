"""A PostgreSQL store's connections: connecting (the tables made or checked on first use), the reading connection,
and a session's rows streamed.  Below the store and its checkpoints; docs/service.md says what each guarantee becomes."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import psycopg
import psycopg.conninfo
from psycopg import errors as pg_errors

from tiny_agent.errors import ConfigError, TinyAgentError
from tiny_agent.stores.files.disk import CHUNK_SIZE
from tiny_agent.stores.postgres import schema as pgschema

if TYPE_CHECKING:
    from tiny_agent.stores.journal import Durability

BATCH_ROWS: Final = 2000
"""Rows a server-side cursor hands over per round trip when a session is read."""

Connection = psycopg.Connection[tuple[Any, ...]]


class StoreUnavailable(TinyAgentError):
    """The database cannot be reached, or a statement failed for a reason of the server's (never the journal's)."""

    label = "UNAVAILABLE"


class Database:
    """The connections to one store's tables (in the URL's current schema); the URL is never shown with its password."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.label = pgschema.safe_store_url(url)
        try:
            psycopg.conninfo.conninfo_to_dict(url)  # libpq's own reading of it, without connecting
        except psycopg.ProgrammingError as error:
            raise ConfigError(f"{self.label}: not a valid PostgreSQL URL: {self.detail(error)}") from None
        self._reader: Connection | None = None
        self._schema: str | None = None

    def connect(self, *, writer: bool = False, durability: Durability = "fsync") -> Connection:
        """A new autocommit connection, the schema checked (created on first use); a writer's names its process."""
        name = pgschema.application_name(os.getpid(), socket.gethostname()) if writer else "tiny-agent reader"
        try:
            conn: Connection = psycopg.connect(self.url, autocommit=True, application_name=name, connect_timeout=10)
        except psycopg.Error as error:
            raise self.unavailable("cannot connect", error) from None
        try:
            with contextlib.suppress(pg_errors.UndefinedObject):  # before PostgreSQL 11 there is no JIT to turn off
                # Compiling a listing's queries costs more than it saves: half a second where they take a tenth.
                conn.execute("SET jit = off")
            self._schema = self._schema or self._check_schema(conn)
            if writer:
                # A dead machine's connection (and so its lock) is dropped within about a minute, not hours.
                conn.execute("SET tcp_keepalives_idle = 20; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3")
                if durability == "process":
                    conn.execute("SET synchronous_commit = off")
        except BaseException:
            conn.close()
            raise
        return conn

    def detail(self, error: Exception, said: str | None = None) -> str:
        """The driver's message (or ``said``: the server's, without the statement it quotes) on one line, without any trace
        of the URL's password."""
        return pgschema.without_secrets(" ".join((said or str(error)).split()) or type(error).__name__, self.url)

    def unavailable(self, what: str, error: Exception) -> StoreUnavailable:
        return StoreUnavailable(f"{self.label}: {what}: {self.detail(error)}")

    def _check_schema(self, conn: Connection) -> str:
        try:
            row = conn.execute(pgschema.SCHEMA_STATE).fetchone()
            if row is None or row[0] is None:
                raise ConfigError(f"{self.label}: the connection's search_path names no schema that exists; create it first")
            if not row[1] or not row[2]:
                with conn.transaction():  # under a lock, so that two workers starting at once do not race
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.SCHEMA_LOCK,))
                    if row[1]:  # tables made before checkpoints: a role that may not add theirs goes on without (a cache)
                        with contextlib.suppress(pg_errors.InsufficientPrivilege), conn.transaction():
                            conn.execute(pgschema.CREATE_CHECKPOINTS)
                    else:
                        for statement in pgschema.CREATE:
                            conn.execute(statement)
                        conn.execute(pgschema.FIRST_VERSION, (pgschema.SCHEMA_VERSION,))
            found = conn.execute("SELECT max(version) FROM tiny_agent_schema").fetchone()
        except psycopg.Error as error:
            raise self.unavailable("cannot prepare the tables", error) from None
        version = found[0] if found is not None else None
        if version is not None and version > pgschema.SCHEMA_VERSION:
            raise ConfigError(
                f"{self.label}: its tables are schema version {version}, newer than this tiny-agent's "
                f"{pgschema.SCHEMA_VERSION}; upgrade tiny-agent"
            )
        return str(row[0])

    def reader(self) -> Connection:
        if self._reader is None or self._reader.closed:
            self._reader = self.connect()
        return self._reader

    def query(self, statement: str, params: Iterable[object] | dict[str, object] = ()) -> list[tuple[Any, ...]]:
        """Rows of one statement on the store's reading connection."""
        try:
            return self.reader().execute(statement, params).fetchall()  # type: ignore[arg-type]
        except psycopg.Error as error:
            raise self.unavailable("a query failed", error) from None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def schema(self) -> str:
        if self._schema is None:
            self.reader()
        return self._schema or "public"


def read_chunks(conn: Connection, session_id: str, after: int = 0) -> Iterator[bytes]:
    """The session's lines after line ``after``, each with its LF, joined into chunks of about a megabyte."""
    with conn.transaction(), conn.cursor(name=f"tiny_agent_lines_{os.getpid()}", binary=True) as cursor:
        cursor.itersize = BATCH_ROWS
        cursor.execute(pgschema.READ_LINES_AFTER, (session_id, after))
        pending: list[bytes] = []
        size = 0
        for (data,) in cursor:
            pending += (data, b"\n")
            size += len(data) + 1
            if size >= CHUNK_SIZE:
                yield b"".join(pending)
                pending, size = [], 0
        if pending:
            yield b"".join(pending)
