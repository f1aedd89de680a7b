"""The PostgreSQL store against a real server: same bytes, one writer, whole lines, the index, and no password anywhere.

Every test gets a schema of its own (conftest's ``pg_url``); without a reachable server they skip, saying why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from builders import RunWriter, new_writer
from conftest import PROJECT_ROOT, until

from tiny_agent.errors import EXIT_TEMPFAIL, ConfigError, Misnamed
from tiny_agent.journal.facts import EntryFact, UserEntry
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.stores.base import choose_store, shortest_handles
from tiny_agent.stores.files.disk import file_chunks
from tiny_agent.stores.files.store import FileStore
from tiny_agent.stores.journal import WriterPoisoned, lines_of, reduce_source
from tiny_agent.stores.postgres import schema as pgschema
from tiny_agent.stores.postgres.store import PgStore, SessionHeld, StoreUnavailable

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"


def user(text: str) -> list:
    return [EntryFact(id=uuid7(), entry=UserEntry(message=UserMessage(content=text)))]


def stored_bytes(store: PgStore, session_id: str) -> bytes:
    return b"".join(store.chunks(store.session(session_id)))


def import_file(store: PgStore, path: Path) -> str:
    lines = [line for _, line in lines_of(file_chunks(path))]
    session_id = json.loads(lines[0])["id"]
    store.create_from(session_id, 0, lines, "process", "import")
    return session_id


# -- same bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["tool-run.jsonl", "crashed-mid-tool.jsonl"])
def test_a_journal_goes_in_and_comes_out_byte_for_byte(pg_url: str, example: str) -> None:
    store = PgStore(pg_url)
    path = EXAMPLES / example
    session_id = import_file(store, path)
    assert stored_bytes(store, session_id) == path.read_bytes()
    assert store.size(store.session(session_id)) == path.stat().st_size
    rows = store.query("SELECT line, bytes FROM tiny_agent_lines WHERE session_id = %s ORDER BY line", (session_id,))
    assert [bytes(row[1]) for row in rows] == path.read_bytes().split(b"\n")[:-1], "one row per line, without its LF"


def test_a_session_written_through_the_store_equals_the_same_facts_in_a_file(pg_url: str, tmp_path: Path) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e", durability="fsync")
    run = RunWriter(writer)
    run.start("hello")
    run.attempt()
    run.raw('{"choices":[]}')
    writer.close()
    session_id = writer.state.header.id
    data = stored_bytes(store, session_id)
    state = reduce_source([data])
    assert state.sealed and state.header.id == session_id
    # The rows are the journal: a file holding them is a valid journal the file store reads the same.
    path = tmp_path / "copy.jsonl"
    path.write_bytes(data)
    assert reduce_source(file_chunks(path)).to_json_bytes() == state.to_json_bytes()
    (row,) = store.query("SELECT lines, bytes, chain, status, prompt FROM tiny_agent_sessions WHERE id = %s", (session_id,))
    assert row == (data.count(b"\n"), len(data), writer.fold.chain, "open", "hello")


def test_replay_streams_in_bounded_chunks(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e", durability="process")
    for number in range(300):
        writer.commit(user(f"{number} " + "x" * 10_000))
    writer.close()
    chunks = list(store.chunks(store.session(writer.state.header.id)))
    assert len(chunks) >= 2
    assert all(len(chunk) < (1 << 20) + 20_000 for chunk in chunks)
    assert all(chunk.endswith(b"\n") for chunk in chunks)
    assert reduce_source(chunks).factCount == writer.state.factCount


# -- one writer ------------------------------------------------------------------------------------


def test_a_second_writer_is_refused_naming_the_holder_and_the_lock_goes_with_the_writer(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    session = store.session(writer.state.header.id)
    with pytest.raises(SessionHeld) as refused:
        PgStore(pg_url).open_writer(session, "process")
    assert refused.value.exit_code == EXIT_TEMPFAIL
    assert str(refused.value).startswith(f"LOCKED: session {session.id} is being written by pid {os.getpid()} on ")
    assert "database backend" in str(refused.value)
    assert store.holder(session) is not None and f"pid {os.getpid()}" in (store.holder(session) or "")
    assert store.listing()[0].status.startswith(f"locked by pid {os.getpid()}")
    writer.close()
    assert store.holder(session) is None
    PgStore(pg_url).open_writer(session, "process").close()


def test_two_stores_in_one_database_never_block_each_others_writers(postgres) -> None:
    """The schema is part of a writer's lock key: the same session imported into two stores has two locks."""
    first, second = PgStore(postgres.schema_url()), PgStore(postgres.schema_url())
    session_id = import_file(first, EXAMPLES / "tool-run.jsonl")
    assert import_file(second, EXAMPLES / "tool-run.jsonl") == session_id
    held = first.open_writer(first.session(session_id), "process")
    try:
        second.open_writer(second.session(session_id), "process").close()
        assert second.holder(second.session(session_id)) is None
        assert first.holder(first.session(session_id)) is not None
    finally:
        held.close()


def test_a_killed_writers_lock_is_gone_at_once(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    writer.close()
    session_id = writer.state.header.id
    holder = _python(
        f"""
        from tiny_agent.stores.postgres.store import PgStore
        store = PgStore({pg_url!r})
        writer = store.open_writer(store.session({session_id!r}), "fsync")
        print("held", flush=True)
        import time; time.sleep(60)
        """
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(SessionHeld, match=f"pid {holder.pid} "):
        store.open_writer(store.session(session_id), "process")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    deadline = time.monotonic() + 10
    while True:  # the server drops the backend as soon as it reads the closed socket
        try:
            store.open_writer(store.session(session_id), "process").close()
            break
        except SessionHeld:
            assert time.monotonic() < deadline, "the lock outlived its killed writer"
            time.sleep(0.05)


def test_two_processes_racing_one_wins_one_is_locked_nothing_interleaves(pg_url: str, tmp_path: Path) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    writer.close()
    session_id = writer.state.header.id
    go, finish = tmp_path / "go", tmp_path / "finish"
    # Both racers are released together by one file; the winner then holds its lock until the loser has been
    # refused (a loaded machine may start one racer long after the other: time alone would not make them meet).
    script = f"""
        import sys, time
        from pathlib import Path
        from tiny_agent.stores.postgres.store import PgStore
        from tiny_agent.errors import TinyAgentError
        from tiny_agent.journal.facts import EntryFact, UserEntry
        from tiny_agent.journal.ids import uuid7
        from tiny_agent.journal.transcript import UserMessage
        def wait_for(path):
            deadline = time.monotonic() + 120
            while not Path(path).exists():
                assert time.monotonic() < deadline, path
                time.sleep(0.005)
        store = PgStore({pg_url!r})
        wait_for({str(go)!r})
        try:
            writer = store.open_writer(store.session({session_id!r}), "fsync")
        except TinyAgentError as error:
            print(error, file=sys.stderr); sys.exit(error.exit_code)
        wait_for({str(finish)!r})
        for number in range(40):
            writer.commit([EntryFact(id=uuid7(), entry=UserEntry(message=UserMessage(content=sys.argv[1] + str(number))))])
        writer.close()
        """
    racers = [_python(script, name) for name in ("a", "b")]
    go.touch()
    until(lambda: any(racer.poll() is not None for racer in racers), "one racer was refused")
    finish.touch()
    results = [(racer.wait(timeout=120), racer.stderr.read() if racer.stderr else "") for racer in racers]
    codes = sorted(code for code, _ in results)
    assert codes == [0, EXIT_TEMPFAIL], results
    assert any(err.startswith("LOCKED: ") for _, err in results)
    state = reduce_source(store.chunks(store.session(session_id)))
    contents = [message.content for message in state.transcript]
    winner = "a" if results[0][0] == 0 else "b"
    assert contents == [f"{winner}{number}" for number in range(40)]
    assert state.sealed


def test_a_lost_race_is_an_error_never_an_overwrite(pg_url: str) -> None:
    """Even a writer whose lock was bypassed cannot commit a line someone else committed: the key refuses it."""
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    session_id = writer.state.header.id
    intruder = store.connect()
    intruder.execute(pgschema.INSERT_LINE, (session_id, 2, b'{"kind":"not ours"}'))
    with pytest.raises(WriterPoisoned, match="line 2 of session .* is already in the database"):
        writer.commit(user("mine"))
    with pytest.raises(WriterPoisoned):
        writer.commit(user("and this one neither"))
    writer.close()
    rows = store.query("SELECT line, bytes FROM tiny_agent_lines WHERE session_id = %s ORDER BY line", (session_id,))
    assert [row[0] for row in rows] == [1, 2] and bytes(rows[1][1]) == b'{"kind":"not ours"}'


def test_a_mid_write_kill_leaves_no_part_of_the_line(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    writer.commit(user("kept"))
    writer.close()
    session_id = writer.state.header.id
    before = stored_bytes(store, session_id)
    killed = _python(
        f"""
        from tiny_agent.stores.postgres.store import PgStore
        from tiny_agent.journal.facts import EntryFact, UserEntry
        from tiny_agent.journal.ids import uuid7
        from tiny_agent.journal.transcript import UserMessage
        store = PgStore({pg_url!r})
        writer = store.open_writer(store.session({session_id!r}), "fsync")
        writer.commit([EntryFact(id=uuid7(), entry=UserEntry(message=UserMessage(content="lost")))], "user")
        """,
        failpoint="mid-write:user",
    )
    assert killed.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while store.holder(store.session(session_id)) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert stored_bytes(store, session_id) == before
    (row,) = store.query("SELECT lines, bytes FROM tiny_agent_sessions WHERE id = %s", (session_id,))
    assert row == (before.count(b"\n"), len(before))


def test_rows_whose_header_is_another_session_are_refused(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    writer.close()  # only its header: no seal covers it
    session_id = writer.state.header.id
    other = uuid7()
    conn = store.connect()
    conn.execute(
        "UPDATE tiny_agent_lines SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), %s, %s), 'UTF8') "
        "WHERE session_id = %s AND line = 1",
        (session_id, other, session_id),
    )
    with pytest.raises(Misnamed):
        store.open_writer(store.session(session_id), "process")


# -- naming and listing ------------------------------------------------------------------------------


HEADER_ROW = b'{"type":"header"}'


def _bulk_sessions(store: PgStore, count: int, cwd: str) -> list[str]:
    """``count`` sessions (index row and header line each) made with COPY, not through writers: test setup only.

    The index rows vouch for the rows (as many, as long), so listing trusts them as it would a writer's.
    """
    created = 1_787_371_200_000
    ids = [uuid7(created + number) for number in range(count)]
    conn = store.connect()
    with conn.transaction(), conn.cursor() as cursor:
        columns = "id, tail, version, created_at, updated_at, cwd, provider, model, status, runs, prompt, input, output, lines, bytes"
        with cursor.copy(f"COPY tiny_agent_sessions ({columns}) FROM STDIN") as copy:
            for number, session_id in enumerate(ids):
                copy.write_row((session_id, session_id[-12:], 3, created + number, created + number, cwd if number % 2 else "/elsewhere",
                                "custom", "m", "idle", 1, f"prompt {number}", number, 1, 1, len(HEADER_ROW) + 1))
        with cursor.copy("COPY tiny_agent_lines (session_id, line, bytes) FROM STDIN") as copy:
            for session_id in ids:
                copy.write_row((session_id, 1, HEADER_ROW))
    conn.close()
    return ids


def test_sessions_folds_a_session_whose_rows_the_index_no_longer_vouches_for(pg_url: str) -> None:
    store = PgStore(pg_url)
    session_id = import_file(store, EXAMPLES / "tool-run.jsonl")
    (trusted,) = store.listing()
    line_2 = "WHERE session_id = %s AND line = 2 RETURNING 1"
    store.query(f"UPDATE tiny_agent_lines SET bytes = bytes {line_2}", (session_id,))
    assert store.listing() == [trusted], "a row written again as it was: folded, and listed as it is"
    store.query(f"UPDATE tiny_agent_lines SET bytes = bytes || ' '::bytea {line_2}", (session_id,))
    (edited,) = store.listing()
    assert (edited.status, edited.model, edited.cwd) == ("corrupt", trusted.model, trusted.cwd)
    assert edited.error is not None and edited.error.startswith(("SEAL_MISMATCH at line 3", "MALFORMED_JSON at line 2")), edited.error
    crashed = import_file(store, EXAMPLES / "crashed-mid-tool.jsonl")
    store.query("DELETE FROM tiny_agent_lines WHERE session_id = %s AND line > 3 RETURNING 1", (crashed,))
    cut = next(row for row in store.listing() if row.session == crashed)
    assert cut.status == "corrupt" and cut.error is not None and cut.error.startswith("TRUNCATED: its rows hold "), cut.error


def test_ten_thousand_sessions_are_listed_from_the_index_with_their_handles(pg_url: str) -> None:
    store = PgStore(pg_url)
    ids = _bulk_sessions(store, 10_000, "/here")
    everything = store.listing()
    assert len(everything) == 10_000
    assert [row.session for row in everything] == ids[::-1], "newest first"
    expected = shortest_handles(ids)
    assert {row.session: row.handle for row in everything} == expected
    here = store.listing(cwd="/here")
    assert len(here) == 5_000 and all(row.cwd == "/here" for row in here)
    assert [row.session for row in store.listing(cwd="/here", limit=3)] == [row.session for row in here[:3]]
    assert store.resolve(expected[ids[1234]]).id == ids[1234]
    assert store.handle(ids[42]) == expected[ids[42]]
    assert store.query("EXPLAIN SELECT id FROM tiny_agent_sessions WHERE cwd = '/here' ORDER BY created_at DESC, id DESC LIMIT 20")


def test_names_a_session_by_id_prefix_handle_and_refuses_what_fits_several(pg_url: str) -> None:
    from tiny_agent.stores.base import AmbiguousSession, SessionNotFound

    store = PgStore(pg_url)
    session_id = import_file(store, EXAMPLES / "tool-run.jsonl")
    assert store.resolve(session_id).id == session_id
    assert store.resolve(session_id[:20]).id == session_id
    assert store.resolve(session_id[-12:-6]).id == session_id
    assert store.resolve(str(EXAMPLES / "tool-run.jsonl")).path == EXAMPLES / "tool-run.jsonl"
    with pytest.raises(SessionNotFound):
        store.resolve("abcdef0123")
    with pytest.raises(SessionNotFound):
        store.resolve("x'; DROP TABLE tiny_agent_lines; --")
    _bulk_sessions(store, 40, "/here")
    with pytest.raises(AmbiguousSession):
        store.resolve("0")


# -- the schema --------------------------------------------------------------------------------------


def test_tables_of_a_newer_tiny_agent_are_not_written(pg_url: str) -> None:
    store = PgStore(pg_url)
    store.listing()
    store.query("UPDATE tiny_agent_schema SET version = %s RETURNING 1", (pgschema.SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigError, match="newer than this tiny-agent"):
        PgStore(pg_url).listing()


def test_a_search_path_without_a_schema_is_a_config_error(postgres) -> None:
    with pytest.raises(ConfigError, match="search_path names no schema"):
        PgStore(postgres.url_for("no_such_schema_here")).listing()


def test_choosing_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:
    monkeypatch.delenv("TINY_AGENT_STORE", raising=False)
    assert isinstance(choose_store(str(tmp_path)), FileStore)
    assert isinstance(choose_store(None, f"file:{tmp_path}"), FileStore)
    assert isinstance(choose_store(None, str(tmp_path)), FileStore)
    assert isinstance(choose_store(None, pg_url), PgStore)
    monkeypatch.setenv("TINY_AGENT_STORE", pg_url)
    assert isinstance(choose_store(None), PgStore)
    assert isinstance(choose_store(str(tmp_path)), FileStore), "--sessions-dir names a directory over the environment"
    with pytest.raises(ConfigError):
        choose_store(None, "mysql://somewhere/db")


# -- no password anywhere ----------------------------------------------------------------------------

SECRET = "hunter2-never-shown"


def _with_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, _, host = rest.rpartition("@")
    return f"{scheme}://{user or os.environ.get('USER', 'postgres')}:{SECRET}@{host}"


def test_the_password_never_appears_in_messages_rows_or_labels(pg_url: str) -> None:
    url = _with_password(pg_url)  # trust authentication ignores it, which lets it travel everywhere a real one would
    store = PgStore(url)
    assert SECRET not in store.label
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    writer.commit(user("hello"))
    messages = []
    try:
        PgStore(url).open_writer(store.session(writer.state.header.id), "process")
    except SessionHeld as error:
        messages.append(str(error))
    writer.close()
    for broken in (url.replace("/test", "/no_such_database"), url.replace(":5432", ":1")):
        with pytest.raises(StoreUnavailable) as failed:
            PgStore(broken).listing()
        messages.append(str(failed.value))
    assert len(messages) == 3
    assert all(SECRET not in message for message in messages), messages
    dumped = store.query("SELECT t::text FROM tiny_agent_sessions t") + store.query("SELECT bytes FROM tiny_agent_lines")
    assert SECRET.encode() not in b"".join(row[0].encode() if isinstance(row[0], str) else bytes(row[0]) for row in dumped)
    assert pgschema.without_secrets(f"could not connect with {url}", url).count(SECRET) == 0


def test_a_store_url_shown_keeps_the_user_but_not_the_password() -> None:
    shown = pgschema.safe_store_url("postgresql://alice:s3cr%40t@db.example:5432/agents?sslmode=require&password=x")
    assert shown == "postgresql://alice@db.example:5432/agents?sslmode=require&password=***"


# -- helpers -------------------------------------------------------------------------------------------


def _python(script: str, *args: str, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    if failpoint:
        env["TINY_AGENT_FAILPOINT"] = failpoint
    command = [sys.executable, "-c", textwrap.dedent(script), *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_writer_on_a_file_and_on_rows_agree_fact_for_fact(pg_url: str, tmp_path: Path) -> None:
    """The same commits through both stores give journals that fold to the same transcript."""
    store = PgStore(pg_url)
    in_rows = store.create(cwd="/w", provider="custom", model="m", environment_identity="e", durability="process")
    in_file = new_writer(tmp_path / "s.jsonl")
    for writer in (in_rows, in_file):
        run = RunWriter(writer)
        run.start("same")
        run.attempt()
        writer.close()
    from_rows = reduce_source(store.chunks(store.session(in_rows.state.header.id)))
    from_file = reduce_source(file_chunks(tmp_path / "s.jsonl"))
    assert [type(m).__name__ for m in from_rows.transcript] == [type(m).__name__ for m in from_file.transcript]
    assert from_rows.factCount == from_file.factCount and from_rows.sealed and from_file.sealed


def test_a_closed_connection_mid_session_poisons_the_writer_with_an_io_error(pg_url: str) -> None:
    store = PgStore(pg_url)
    writer = store.create(cwd="/w", provider="custom", model="m", environment_identity="e")
    backend = store.query("SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s", (f"tiny-agent pid {os.getpid()} %",))
    store.query("SELECT pg_terminate_backend(%s)", (backend[0][0],))
    with pytest.raises(WriterPoisoned) as failed:
        writer.commit(user("after the server hung up"))
    assert failed.value.exit_code == 74
    writer.close()
    assert psycopg.__version__
