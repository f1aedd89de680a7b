"""Checkpoints of sessions kept in PostgreSQL: a checkpoint row plus the rows after it is the full fold, byte for byte, or is not used.

Against the real local server, each test in a scratch schema of its own
(conftest's ``pg_url``; without a reachable server they skip, saying why).
The differential test cuts sessions at every line, checkpoints the fold
there, appends the rest (valid, or with a broken line) and compares with
folding every row.  The others check what keys a checkpoint row, that every
mismatch falls back to a full fold with one note, never an error, that
``verify`` never restores one, and that a writer continues from one.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from builders import RunWriter
from conftest import PROJECT_ROOT
from test_checkpoints import Notes, Restores, add_runs
from test_replay_cli import call as cli

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import Fold
from tiny_agent.fold.snapshot import SNAPSHOT_FORMAT
from tiny_agent.stores import checkpoints
from tiny_agent.stores.files.disk import file_chunks
from tiny_agent.stores.journal import fold_chunks, lines_of, reduce_source
from tiny_agent.stores.postgres import schema as pgschema
from tiny_agent.stores.postgres.checkpoints import PgCheckpoints
from tiny_agent.stores.postgres.store import PgStore

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"


def grown_session(store: PgStore, runs: int = 3) -> RunWriter:
    """A session in the database, its writer still open for more runs."""
    writer = store.create(cwd="/workspace", provider="openrouter", model="test/model", environment_identity="fixture")
    run = RunWriter(writer)
    add_runs(run, runs)
    return run


def journal(store: PgStore, session_id: str) -> bytes:
    return b"".join(store.chunks(store.session(session_id)))


def outcome(fold: Callable[[], Fold]) -> bytes | tuple[object, ...]:
    """The state's JSON bytes, or the error (code, line, seq, reason) when folding refuses the rows."""
    try:
        return fold().state.to_json_bytes()
    except CorruptionError as error:
        return (error.code, error.line, error.seq, error.reason)


def checkpoint_row(store: PgStore, session_id: str) -> tuple[object, ...] | None:
    rows = store.query(
        "SELECT lines, bytes, prefix, fold, format FROM tiny_agent_checkpoints WHERE session_id = %s", (session_id,)
    )
    return rows[0] if rows else None


def execute(url: str, statement: str, params: tuple[object, ...] = ()) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, params)  # type: ignore[arg-type]


# -- the fold -------------------------------------------------------------------------------------


def test_a_checkpoint_row_is_keyed_by_the_exact_journal_bytes_it_folded(pg_url):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    assert (
        PgCheckpoints(store, threshold=0).fold(session_id).state.to_json_bytes()
        == reduce_source([journal(store, session_id)]).to_json_bytes()
    )
    data = journal(store, session_id)
    lines, length, prefix, fold, format_ = checkpoint_row(store, session_id) or ()
    assert (lines, length) == (data.count(b"\n"), len(data))
    assert prefix == "sha256:" + hashlib.sha256(data).hexdigest(), "the file store's prefix digest, over the same bytes"
    assert fold == checkpoints.fold_identity() and format_ == SNAPSHOT_FORMAT
    run.writer.close()


def test_a_small_fold_leaves_no_checkpoint_and_a_short_tail_keeps_the_one_it_came_from(pg_url):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    size = len(journal(store, session_id))
    PgCheckpoints(store, threshold=size + 1).fold(session_id)
    assert checkpoint_row(store, session_id) is None
    PgCheckpoints(store, threshold=0).fold(session_id)
    before = checkpoint_row(store, session_id)
    add_runs(run, 1)
    PgCheckpoints(store, threshold=size).fold(session_id)
    assert checkpoint_row(store, session_id) == before
    PgCheckpoints(store, threshold=0).fold(session_id)
    assert checkpoint_row(store, session_id) != before
    run.writer.close()


def _importable() -> list[Path]:
    return [EXAMPLES / "tool-run.jsonl", EXAMPLES / "crashed-mid-tool.jsonl"]


@pytest.mark.parametrize("source", ["writer", *[path.name for path in _importable()]])
def test_a_checkpoint_at_any_line_plus_the_rows_after_it_is_the_full_fold(pg_url, tmp_path, monkeypatch, source):
    store = PgStore(pg_url)
    if source == "writer":
        run = grown_session(store, runs=2)
        run.writer.close()
        data = journal(store, run.writer.state.header.id)
    else:
        data = (EXAMPLES / source).read_bytes()
    lines = [line for _, line in lines_of([data])]
    session_id = json.loads(lines[0])["id"]
    if source != "writer":
        store.create_from(session_id, 0, lines, "process", "import")
    restores = Restores(monkeypatch)

    def rows_after(cut: int, tail: list[bytes]) -> None:
        execute(pg_url, "DELETE FROM tiny_agent_lines WHERE line > %s", (cut,))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.cursor().executemany(pgschema.INSERT_LINE, [(session_id, cut + 1 + at, line) for at, line in enumerate(tail)])

    for cut in range(1, len(lines)):
        execute(pg_url, "DELETE FROM tiny_agent_checkpoints")
        rows_after(1, lines[1:cut])
        PgCheckpoints(store, threshold=0).fold(session_id)
        assert checkpoint_row(store, session_id)[0] == cut  # type: ignore[index]
        for broken in (False, True):
            # Broken: the first line after the checkpoint loses its last byte (a line the fold refuses).
            rows_after(cut, [lines[cut][:-1], *lines[cut + 1 :]] if broken else lines[cut:])
            notes = Notes()
            before = restores.count
            got = outcome(functools.partial(PgCheckpoints(store, threshold=1 << 30, note=notes).fold, session_id))
            assert got == outcome(lambda: fold_chunks([journal(store, session_id)])), (cut, broken)
            assert notes == [] and restores.count == before + 1, (cut, broken)


def test_a_checkpoint_plus_appended_lines_is_the_full_fold(pg_url, monkeypatch):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    PgCheckpoints(store, threshold=0).fold(session_id)
    add_runs(run, 2)
    notes = Notes()
    restores = Restores(monkeypatch)
    fold = PgCheckpoints(store, threshold=1 << 30, note=notes).fold(session_id)
    assert restores.count == 1 and notes == []
    assert (
        fold.state.to_json_bytes()
        == run.writer.state.to_json_bytes()
        == reduce_source([journal(store, session_id)]).to_json_bytes()
    )
    assert (fold.lines, fold.committed_length, fold.chain) == (
        run.writer.fold.lines,
        run.writer.fold.committed_length,
        run.writer.fold.chain,
    )
    run.writer.close()


# -- the commands -------------------------------------------------------------------------------


@pytest.fixture
def checkpointing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINY_AGENT_STORE", "TINY_AGENT_SESSIONS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")


def test_replay_json_through_a_checkpoint_row_is_the_full_fold_byte_for_byte(pg_url, capsys, monkeypatch, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    assert cli(capsys, "replay", session_id, "--json", "--store", pg_url)[0] == 0
    assert checkpoint_row(store, session_id) is not None
    add_runs(run, 2)
    restores = Restores(monkeypatch)
    code, out, err = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert (code, err) == (0, "")
    assert restores.count == 1
    assert out.encode() == b'{"ok":true,"state":' + reduce_source([journal(store, session_id)]).to_json_bytes() + b"}\n"
    assert checkpoint_row(store, session_id)[0] == run.writer.fold.lines, "renewed: the fold read more than the threshold"  # type: ignore[index]
    run.writer.close()


def test_a_tampered_prefix_row_is_folded_in_full_and_reported_as_without_checkpoints(pg_url, capsys, checkpointing, monkeypatch):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    lines = checkpoint_row(store, session_id)[0]  # type: ignore[index]
    add_runs(run, 1)
    run.writer.close()
    # A letter inside the first answer's text: every line stays well-formed, only the seals can tell.
    ((number,),) = store.query(
        "SELECT min(line) FROM tiny_agent_lines WHERE session_id = %s AND position('answer 0'::bytea in bytes) > 0", (session_id,)
    )
    assert number < lines
    execute(
        pg_url,
        "UPDATE tiny_agent_lines SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), 'answer 0', 'answer 1'), 'UTF8') WHERE session_id = %s AND line = %s",
        (session_id, number),
    )
    code, out, err = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 30))
    execute(pg_url, "DELETE FROM tiny_agent_checkpoints")
    plain = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert plain[0] == 65 and plain[2].startswith("SEAL_MISMATCH at line ")
    note = f"· checkpoint of session {session_id} does not match the session (its first {lines} lines changed); folding the whole session\n"
    assert (code, out, err) == (plain[0], plain[1], note + plain[2])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("UPDATE tiny_agent_checkpoints SET snapshot = 'rotten'::bytea", "is corrupt (its snapshot's digest differs)"),
        (
            "UPDATE tiny_agent_checkpoints SET snapshot = '\\x00000002c1c1'::bytea, body = 'sha256:' || encode(sha256('\\x00000002c1c1'::bytea), 'hex')",
            "is corrupt (not a snapshot",
        ),
        ("UPDATE tiny_agent_checkpoints SET fold = 'another fold'", "was made by another version of tiny-agent"),
        ("UPDATE tiny_agent_checkpoints SET lines = lines + 1000", "(truncated or replaced?)"),
        ("UPDATE tiny_agent_checkpoints SET prefix = 'sha256:' || repeat('0', 64)", "does not match the session"),
    ],
    ids=["rotten snapshot", "no snapshot", "other code", "longer than the session", "other prefix"],
)
def test_an_unusable_checkpoint_row_is_ignored_with_a_note(pg_url, capsys, monkeypatch, checkpointing, damage, reason):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    execute(pg_url, damage)
    restores = Restores(monkeypatch)
    code, out, err = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert code == 0
    assert out.encode() == b'{"ok":true,"state":' + reduce_source([journal(store, session_id)]).to_json_bytes() + b"}\n"
    assert err.startswith(f"· checkpoint of session {session_id} ") and err.count("\n") == 1, err
    assert reason in err and err.endswith("; folding the whole session\n")
    # The full fold made a good one again: the next replay uses it, silently.
    assert cli(capsys, "replay", session_id, "--json", "--store", pg_url)[1:] == (out, "")
    assert restores.count == 1, "every check that can refuse it runs before the snapshot is restored"


def test_a_checkpoint_that_cannot_be_written_is_a_note_not_an_error(pg_url, capsys, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    execute(
        pg_url,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no room here'; END $$; "
        "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON tiny_agent_checkpoints FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    code, out, err = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert code == 0 and json.loads(out)["ok"] is True
    assert err.startswith(f"· checkpoint of session {session_id} was not written (no room here") and err.count("\n") == 1
    assert checkpoint_row(store, session_id) is None


def test_audit_reads_the_checkpointed_rows_without_folding_them_again(pg_url, capsys, monkeypatch, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    session_id = run.writer.state.header.id
    add_runs(run, 1)
    run.writer.close()
    plain = cli(capsys, "audit", session_id, "--json", "--store", pg_url)
    assert checkpoint_row(store, session_id) is None, "audit writes no checkpoint"
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    restores = Restores(monkeypatch)
    assert cli(capsys, "audit", session_id, "--json", "--store", pg_url) == plain
    assert restores.count == 1


def test_verify_never_uses_a_checkpoint_row(pg_url, capsys, monkeypatch, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert checkpoint_row(store, session_id) is not None
    restores = Restores(monkeypatch)
    assert cli(capsys, "verify", session_id, "--store", pg_url)[0] == 0
    assert cli(capsys, "verify", "--all", "--store", pg_url)[0] == 0
    assert restores.count == 0


def test_resume_opens_the_session_from_its_checkpoint_row(pg_url, capsys, monkeypatch, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close(seal=False)
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    restores = Restores(monkeypatch)
    code, _, err = cli(capsys, "resume", session_id, "--store", pg_url)
    assert code == 0, err
    assert restores.count == 1
    state = reduce_source([journal(store, session_id)])
    assert state.sealed and state.runCount == 3


def test_a_writer_continues_from_the_checkpoint_row(pg_url, monkeypatch):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    PgCheckpoints(store, threshold=0).fold(session_id)
    restores = Restores(monkeypatch)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 30))
    notes: list[str] = []
    writer = store.open_writer(store.session(session_id), "process", notes.append)
    assert restores.count == 1
    assert writer.state.to_json_bytes() == reduce_source([journal(store, session_id)]).to_json_bytes()
    add_runs(RunWriter(writer), 2)
    writer.close()
    data = journal(store, session_id)
    assert writer.state.to_json_bytes() == reduce_source([data]).to_json_bytes()
    assert reduce_source([data]).runCount == 5
    (row,) = store.query("SELECT lines, bytes FROM tiny_agent_sessions WHERE id = %s", (session_id,))
    assert row == (data.count(b"\n"), len(data))


def test_run_with_a_session_continues_it_from_its_checkpoint_row(pg_url, tmp_path, capsys, monkeypatch, checkpointing):
    import replies

    from tiny_agent.loopback import LoopbackServer

    for name in ("TINY_AGENT_BASE_URL", "TINY_AGENT_MODEL", "TINY_AGENT_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    restores = Restores(monkeypatch)
    with LoopbackServer([replies.answer("and more")]) as server:
        flags = ("--base-url", server.base_url, "--model", "test/model", "--durability", "process", "--retries", "0")
        code, out, err = cli(capsys, "run", "anything else?", "--session", session_id, *flags, "--store", pg_url)
    assert code == 0, err
    assert out == "and more\n"
    assert restores.count == 1
    state = reduce_source([journal(store, session_id)])
    assert [message.content for message in state.transcript][-2:] == ["anything else?", "and more"]


# -- the schema -----------------------------------------------------------------------------------


def test_tables_made_before_checkpoints_get_the_table_and_keep_their_version(pg_url, capsys, checkpointing):
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    store.close()
    execute(pg_url, "DROP TABLE tiny_agent_checkpoints")
    code, out, err = cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    assert (code, err) == (0, "")
    assert json.loads(out)["state"] == json.loads(reduce_source([journal(store, session_id)]).to_json_bytes())
    fresh = PgStore(pg_url)
    assert checkpoint_row(fresh, session_id) is not None
    assert fresh.query("SELECT version FROM tiny_agent_schema") == [(pgschema.SCHEMA_VERSION,)] == [(1,)]


def test_an_exported_session_is_the_file_the_checkpoint_row_keyed(pg_url, tmp_path, capsys, checkpointing):
    """The same bytes, the same key: a row's prefix digest is the file store's digest of the exported journal."""
    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    cli(capsys, "replay", session_id, "--json", "--store", pg_url)
    exported = tmp_path / "out.jsonl"
    assert cli(capsys, "export", session_id, "-o", str(exported), "--store", pg_url)[0] == 0
    lines, length, prefix, *_ = checkpoint_row(store, session_id) or ()
    assert (lines, length) == (sum(1 for _ in lines_of(file_chunks(exported))), exported.stat().st_size)
    assert prefix == "sha256:" + hashlib.sha256(exported.read_bytes()).hexdigest()


def test_a_role_that_may_not_create_the_table_goes_on_without_checkpoints(pg_url, postgres):
    """Tables made before checkpoints, used by a role without CREATE: every command works, a fold says why it has no checkpoint."""
    from urllib.parse import urlsplit

    store = PgStore(pg_url)
    run = grown_session(store)
    run.writer.close()
    session_id = run.writer.state.header.id
    store.close()
    execute(pg_url, "DROP TABLE tiny_agent_checkpoints")
    schema = store.schema
    role = f"{postgres.prefix}_reader"
    postgres.admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        postgres.admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        postgres.admin.execute(f'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        parts = urlsplit(pg_url)
        url = parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}").geturl()
        limited = PgStore(url)
        notes = Notes()
        fold = PgCheckpoints(limited, threshold=0, note=notes).fold(session_id)
        assert fold.state.to_json_bytes() == reduce_source([journal(limited, session_id)]).to_json_bytes()
        assert notes == [
            f'checkpoint of session {session_id} cannot be read (relation "tiny_agent_checkpoints" does not exist); '
            "folding the whole session"
        ]
        writer = limited.open_writer(limited.session(session_id), "process")
        add_runs(RunWriter(writer), 1)
        writer.close()
        limited.close()
    finally:
        postgres.admin.execute(f'DROP OWNED BY "{role}"')
        postgres.admin.execute(f'DROP ROLE "{role}"')
    assert reduce_source([journal(store, session_id)]).runCount == 4
