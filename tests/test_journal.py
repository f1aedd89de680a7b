"""The writer: checked, sealed, durable appends; one writer per session; torn tails kept aside."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from builders import Clock, RunWriter, header, new_writer, write_tool_session
from conftest import PROJECT_ROOT
from lines import split

from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.journal.facts import EntryFact, UserEntry
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.stores.files.disk import SessionLocked, holder_pid, is_locked
from tiny_agent.stores.files.store import ensure_private_directory
from tiny_agent.stores.journal import CommitRejected, JournalWriter, WriterPoisoned, read_journal


def test_new_journal_is_private_and_starts_with_a_v3_header(tmp_path):
    directory = tmp_path / "sessions"
    ensure_private_directory(directory)
    path = directory / "s.jsonl"
    writer = new_writer(path)
    writer.close()
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    first = json.loads(split(path.read_bytes())[0])
    assert first["kind"] == "header"
    assert first["version"] == 3


def test_existing_directory_is_tightened(tmp_path):
    directory = tmp_path / "sessions"
    directory.mkdir(mode=0o755)
    ensure_private_directory(directory)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700


def test_every_commit_is_sealed_and_a_clean_close_covers_the_last_line(tmp_path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=1)
    lines = [json.loads(line) for line in split(path.read_bytes())[1:]]
    assert all(isinstance(line, list) and line[-1]["kind"] == "seal" for line in lines)
    assert lines[-1] == [lines[-1][0]]
    assert read_journal(path).sealed


def test_a_refused_transaction_changes_neither_bytes_nor_state(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("hello")
    before_bytes = path.read_bytes()
    before_state = writer.state.to_json()
    bogus = EntryFact(id=writer.state.contextBoundary, entry=UserEntry(message=UserMessage(content="again")))
    with pytest.raises(CommitRejected) as refused:
        writer.commit([bogus])
    assert refused.value.error.code == "DUPLICATE_ID"
    assert path.read_bytes() == before_bytes
    assert writer.state.to_json() == before_state
    run.attempt()
    writer.close()
    assert reduce_bytes(path.read_bytes()).factCount == writer.state.factCount


def test_a_second_writer_is_refused_at_once_with_the_holders_pid(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    assert is_locked(path)
    with pytest.raises(SessionLocked) as locked:
        JournalWriter.open(path)
    assert locked.value.pid == os.getpid()
    assert holder_pid(path) == os.getpid()
    writer.close()
    assert not is_locked(path)
    JournalWriter.open(path).close()


def test_a_writer_in_another_process_holds_the_lock(tmp_path):
    path = tmp_path / "s.jsonl"
    new_writer(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from tiny_agent.stores.journal import JournalWriter; "
         "w = JournalWriter.open(__import__('pathlib').Path(sys.argv[1])); print('held', flush=True); time.sleep(30)", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SessionLocked) as locked:
            JournalWriter.open(path)
        assert locked.value.pid == holder.pid
        assert str(holder.pid) in str(locked.value)
    finally:
        holder.kill()
        holder.wait()
    JournalWriter.open(path).close()


def test_opening_cuts_a_torn_tail_into_a_sidecar(tmp_path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=1, close=False).close(seal=False)
    committed = path.read_bytes()
    path.write_bytes(committed + b'[{"kind":"entry","seq":99,"id":"half a li')
    writer = JournalWriter.open(path, durability="process", clock=Clock())
    assert path.read_bytes() == committed
    assert writer.repaired_tail is not None
    assert writer.repaired_tail.read_bytes() == b'[{"kind":"entry","seq":99,"id":"half a li'
    assert stat.S_IMODE(os.stat(writer.repaired_tail).st_mode) == 0o600
    RunWriter(writer).start("and now?")
    writer.close()
    assert len(read_journal(path).transcript) == 5


def test_reopened_session_continues_the_seal_chain(tmp_path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=1)
    writer = JournalWriter.open(path, durability="process", clock=Clock())
    RunWriter(writer).start("more")
    writer.close()
    state = read_journal(path)
    assert state.sealed
    assert state.transcript[-1] == UserMessage(content="more")


def test_a_failed_write_poisons_the_writer(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)

    def broken_write(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken_write)
    with pytest.raises(WriterPoisoned):
        run.start("hello")
    monkeypatch.undo()
    with pytest.raises(WriterPoisoned):
        run.start("hello again")
    writer.close()
    reduce_bytes(path.read_bytes())


def test_fsync_per_commit_unless_durability_is_process(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    durable = JournalWriter.create(tmp_path / "a.jsonl", header(), durability="fsync", clock=Clock())
    before = len(synced)
    RunWriter(durable).start("x")
    assert len(synced) == before + 1
    durable.close()
    fast = JournalWriter.create(tmp_path / "b.jsonl", header(), durability="process", clock=Clock())
    before = len(synced)
    RunWriter(fast).start("x")
    assert len(synced) == before
    fast.close()


def test_symlinked_journal_is_refused(tmp_path):
    target = tmp_path / "real.jsonl"
    new_writer(target).close()
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(Exception) as refused:
        JournalWriter.open(link)
    assert "symbolic link" in str(refused.value)
