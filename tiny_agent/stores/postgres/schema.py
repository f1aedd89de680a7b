"""The PostgreSQL store's tables and statements (docs/service.md, *The schema*), and the names it shows: pure (no driver,
no I/O)."""

from __future__ import annotations

import hashlib
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from tiny_agent.errors import ConfigError

SCHEMA_VERSION: Final = 1
LOCK_NAMESPACE: Final = b"tiny-agent session writer\x00"
SCHEMA_LOCK: Final = 0x7469_6E79_5F73_6368
"""The advisory lock (a transaction's) that serializes creating the tables: ``tiny_sch``."""

SCHEMA_STATE: Final = """SELECT current_schema(), to_regclass('tiny_agent_schema') IS NOT NULL,
    to_regclass('tiny_agent_checkpoints') IS NOT NULL"""
"""The schema the tables go in, whether they exist, and whether the checkpoint table (added later) does."""
FIRST_VERSION: Final = "INSERT INTO tiny_agent_schema (version) SELECT %s WHERE NOT EXISTS (SELECT 1 FROM tiny_agent_schema)"

CREATE_CHECKPOINTS: Final = """CREATE TABLE IF NOT EXISTS tiny_agent_checkpoints (
        session_id text COLLATE "C" PRIMARY KEY REFERENCES tiny_agent_sessions (id) ON DELETE CASCADE,
        format integer NOT NULL, fold text NOT NULL, lines integer NOT NULL, bytes bigint NOT NULL,
        prefix text NOT NULL, body text NOT NULL, snapshot bytea NOT NULL, made_at bigint NOT NULL
    )"""
"""Per session: the fold of its first ``lines`` lines (``bytes`` long, SHA-256 ``prefix``) by the code ``fold``:
``snapshot`` (its frames, each after its length) and ``body`` (their SHA-256)."""

CREATE: Final = (
    """CREATE TABLE IF NOT EXISTS tiny_agent_schema (version integer NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tiny_agent_sessions (
        id text COLLATE "C" PRIMARY KEY, tail text COLLATE "C" NOT NULL, version smallint NOT NULL,
        created_at bigint NOT NULL, updated_at bigint NOT NULL,
        cwd text NOT NULL, provider text NOT NULL, model text NOT NULL, status text NOT NULL, reason text,
        runs integer NOT NULL DEFAULT 0, prompt text,
        input bigint NOT NULL DEFAULT 0, output bigint NOT NULL DEFAULT 0,
        cache_read bigint NOT NULL DEFAULT 0, cache_write bigint NOT NULL DEFAULT 0,
        lines integer NOT NULL, bytes bigint NOT NULL, chain text,
        origin_path text, origin_length bigint, origin_sha256 text,
        parent_id text COLLATE "C", parent_line integer, parent_chain text,
        buckets bytea, buckets_lines integer
    )""",
    """CREATE INDEX IF NOT EXISTS tiny_agent_sessions_created ON tiny_agent_sessions (created_at DESC, id DESC)""",
    """CREATE INDEX IF NOT EXISTS tiny_agent_sessions_cwd ON tiny_agent_sessions (cwd, created_at DESC, id DESC)""",
    """CREATE INDEX IF NOT EXISTS tiny_agent_sessions_tail ON tiny_agent_sessions (tail)""",
    """CREATE TABLE IF NOT EXISTS tiny_agent_lines (
        session_id text COLLATE "C" NOT NULL REFERENCES tiny_agent_sessions (id),
        line integer NOT NULL CHECK (line >= 1), bytes bytea NOT NULL,
        PRIMARY KEY (session_id, line)
    )""",
    CREATE_CHECKPOINTS,
)

CHECKPOINT_OF: Final = """
    SELECT s.bytes, c.format, c.fold, c.lines, c.bytes, c.prefix, c.body, c.snapshot
    FROM tiny_agent_sessions s LEFT JOIN tiny_agent_checkpoints c ON c.session_id = s.id
    WHERE s.id = %s
"""
"""The session's length as its index row says, and its checkpoint row (NULLs when it has none), in one round trip."""

SAVE_CHECKPOINT: Final = """
    INSERT INTO tiny_agent_checkpoints (session_id, format, fold, lines, bytes, prefix, body, snapshot, made_at)
    VALUES (%(session_id)s, %(format)s, %(fold)s, %(lines)s, %(bytes)s, %(prefix)s, %(body)s, %(snapshot)s, %(made_at)s)
    ON CONFLICT (session_id) DO UPDATE SET format = EXCLUDED.format, fold = EXCLUDED.fold, lines = EXCLUDED.lines,
        bytes = EXCLUDED.bytes, prefix = EXCLUDED.prefix, body = EXCLUDED.body, snapshot = EXCLUDED.snapshot,
        made_at = EXCLUDED.made_at
"""
"""Write or replace a session's checkpoint (two readers that both made one: the last one stays; both are valid)."""

SUMMARY_COLUMNS: Final = (
    "version, created_at, updated_at, cwd, provider, model, status, reason, runs, prompt, input, output, cache_read, "
    "cache_write, lines, bytes, chain, origin_path, origin_length, origin_sha256, parent_id, parent_line, parent_chain"
)
"""The index columns a writer keeps (everything but the id, its tail and the report's cache)."""

_SUMMARY_SET: Final = ", ".join(f"{name} = %({name})s" for name in SUMMARY_COLUMNS.split(", "))

INSERT_SESSION: Final = (
    f"INSERT INTO tiny_agent_sessions (id, tail, {SUMMARY_COLUMNS}) VALUES (%(id)s, %(tail)s, "
    + ", ".join(f"%({name})s" for name in SUMMARY_COLUMNS.split(", "))
    + ")"
)
UPDATE_SESSION: Final = f"UPDATE tiny_agent_sessions SET {_SUMMARY_SET} WHERE id = %(id)s"

APPEND: Final = (
    "WITH line AS (INSERT INTO tiny_agent_lines (session_id, line, bytes) VALUES (%(id)s, %(number)s, %(data)s)) "
    + UPDATE_SESSION
)
"""One line and its index row in one statement, so in one transaction and one round trip."""

INSERT_LINE: Final = "INSERT INTO tiny_agent_lines (session_id, line, bytes) VALUES (%s, %s, %s)"
COPY_LINES: Final = "COPY tiny_agent_lines (session_id, line, bytes) FROM STDIN (FORMAT BINARY)"
READ_LINES_AFTER: Final = "SELECT bytes FROM tiny_agent_lines WHERE session_id = %s AND line > %s ORDER BY line"
READ_LINES_THROUGH: Final = "SELECT bytes FROM tiny_agent_lines WHERE session_id = %s AND line <= %s ORDER BY line"

HELD_LOCKS: Final = """
    SELECT l.classid::bigint, l.objid::bigint, l.pid, coalesce(a.application_name, '')
    FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
"""Every session-level advisory lock held in this database, and who holds it (a few rows: one per live writer)."""

NEIGHBOURS: Final = """(SELECT max(n.tail) FROM tiny_agent_sessions n WHERE n.tail < s.tail),
    (SELECT min(n.tail) FROM tiny_agent_sessions n WHERE n.tail > s.tail)"""
"""The tails either side of a session's in tail order: enough to know its shortest unique handle."""

LISTED_COLUMNS: Final = (
    "s.id, s.created_at, s.cwd, s.provider, s.model, s.status, s.reason, s.runs, s.prompt, s.input, s.output, "
    "s.cache_read, s.cache_write, s.origin_path, s.origin_length, s.origin_sha256, s.parent_id, s.parent_line, "
    "s.parent_chain, s.bytes, s.lines"
)
"""A listing's columns: the summary's, then the length in bytes and lines; :data:`NEIGHBOURS` follow them."""
BYTES, LINES, NEIGHBOURS_AT, VOUCHED_AT = 19, 20, 21, 23

VOUCHED: Final = """(SELECT count(*) = s.lines AND coalesce(sum(octet_length(l.bytes)), 0) + count(*) = s.bytes
        AND coalesce(bool_and(age(l.xmin) >= age(s.xmin)), true)
    FROM tiny_agent_lines l WHERE l.session_id = s.id)"""
"""Whether the index row still vouches for the session's rows: as many, as long, and none written after it (an ``xmin``
newer than the index row's; docs/service.md, *Reading at scale*)."""


def lock_key(schema: str, session_id: str) -> int:
    """The advisory lock key of a session's writer: 64 bits of SHA-256 over the store's schema (two stores in one database
    never block each other's writers) and the id."""
    digest = hashlib.sha256(LOCK_NAMESPACE + schema.encode() + b"\x00" + session_id.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_parts(key: int) -> tuple[int, int]:
    """How ``pg_locks`` shows a bigint advisory key: (classid, objid), its high and low 32 bits, unsigned."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def application_name(pid: int, host: str) -> str:
    """What a writer's connection calls itself, so a refused writer can say who holds the session (≤ 63 bytes)."""
    return f"tiny-agent pid {pid} on {host or '?'}"[:63]


def holder_words(application: str, backend: int) -> str:
    """``pid 123 on host (database backend 456)``: who holds a session, from its connection's name."""
    prefix = "tiny-agent "
    who = application[len(prefix) :] if application.startswith(prefix) else (application or "a client")
    return f"{who} (database backend {backend})"


def safe_store_url(url: str) -> str:
    """The URL without its user's password, nor a ``password`` or secret-looking query parameter: what messages may show
    (an unreadable host or port is a CONFIG error that shows only the scheme)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # reading it checks it
    except ValueError as error:
        what = "an unclosed [ in its host" if "IPv6" in str(error) else "its port is not a number from 0 to 65535"
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"{scheme}://…: not a valid store URL ({what}); it is not shown, as it may hold a password") from None
    user, at, host = parts.netloc.rpartition("@")
    shown_user = user.partition(":")[0] + "@" if at and user.partition(":")[0] else ""
    query = "&".join(f"{name}={_shown(name, value)}" for name, value in parse_qsl(parts.query, keep_blank_values=True))
    return f"{parts.scheme}://{shown_user}{host}{parts.path}" + (f"?{query}" if query else "")


def _shown(name: str, value: str) -> str:
    lowered = name.lower()
    secret = lowered in ("password", "passfile", "sslpassword", "sslkey") or "secret" in lowered or "token" in lowered
    return "***" if secret else value


def without_secrets(text: str, url: str) -> str:
    """A driver's message with any trace of the URL's password taken out (the driver may quote its conninfo)."""
    parts = urlsplit(url)
    secrets = [parts.password or ""]
    secrets += [value for name, value in parse_qsl(parts.query, keep_blank_values=True) if _shown(name, value) == "***"]
    text = text.replace(url, safe_store_url(url))
    for secret in secrets:
        for form in {secret, unquote(secret)}:
            if form:
                text = text.replace(form, "***")
    return text
