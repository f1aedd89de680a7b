"""The reference store's remaining guarantees (session-v2 §16): the header id matches the file name, and the
appends of many threads on one open session are serialized, whole lines in order."""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
from builders import RunWriter, new_writer
from test_replay_cli import call

from tiny_agent.errors import EXIT_CORRUPT
from tiny_agent.journal.facts import EntryFact, UserEntry
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.files.disk import file_chunks, journal_name, lock_path, write_all
from tiny_agent.stores.files.store import FileStore
from tiny_agent.stores.journal import JournalWriter, SessionMisnamed, fold_chunks, read_journal

CREATED = 1_787_371_200_000


# -- the header id and the file name --------------------------------------------------------------


@pytest.fixture()
def misnamed(tmp_path: Path) -> tuple[Path, str, str]:
    """A journal of one session under another session's name (a copy renamed by hand, say)."""
    directory = tmp_path / "sessions"
    directory.mkdir(mode=0o700)
    header_id = uuid7(CREATED)
    named_id = uuid7(CREATED)
    path = directory / journal_name(named_id, CREATED)
    writer = new_writer(path, session_id=header_id)
    RunWriter(writer).start("hi")
    writer.close(seal=False)
    os.chmod(path, 0o644)
    with path.open("ab") as file:
        file.write(b'[{"kind":"rec')  # a torn tail, which a writer would cut
    return path, header_id, named_id


def test_a_writer_refuses_a_journal_named_for_another_session_and_changes_nothing(misnamed: tuple[Path, str, str]) -> None:
    path, header_id, named_id = misnamed
    before = path.read_bytes()
    with pytest.raises(SessionMisnamed) as refused:
        JournalWriter.open(path, session_id=named_id)
    message = str(refused.value)
    assert message.startswith(f"MISNAMED: {path.name} is named for session {named_id} but its header is session {header_id};")
    assert message.endswith(f"give it a name ending in _{header_id}.jsonl")
    assert refused.value.exit_code == EXIT_CORRUPT
    assert path.read_bytes() == before, "the torn tail was not cut"
    assert oct(path.stat().st_mode & 0o777) == "0o644", "the mode was not changed"
    assert not lock_path(path).exists() and not list(path.parent.glob("*.torn-*"))
    with pytest.raises(SessionMisnamed):
        FileStore(path.parent).open_writer(FileStore(path.parent).resolve(named_id), "process")
    # Opened as the session its header names, it is that session's journal.
    JournalWriter.open(path, session_id=header_id).close()


def test_the_commands_refuse_to_write_it_and_replay_reads_it_saying_so(
    capsys, misnamed: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, header_id, named_id = misnamed
    monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(path.parent))
    before = path.read_bytes()
    for args in (["resume", str(path), "--abort"], ["run", "more", "--session", named_id, "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]):
        code, _, err = call(capsys, *args)
        assert code == 65 and err.startswith("MISNAMED: "), err
    assert path.read_bytes() == before
    code, out, err = call(capsys, "replay", str(path), "--json")
    assert code == 0 and json.loads(out)["state"]["header"]["id"] == header_id
    assert err.startswith(f"· warning: {path.name} is named for session {named_id} but its header is session {header_id}")
    assert "misnamed: the file name says session" in verify(path).detail


# -- many threads, one open session ----------------------------------------------------------------

THREADS = 10
COMMITS = 25


class SlowAppender:
    """A file appender that writes each line in two halves with a pause between: interleaving would show."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def append(self, data: bytes, label: str) -> None:
        half = len(data) // 2
        write_all(self._fd, data[:half])
        time.sleep(0.0005)
        write_all(self._fd, data[half:])

    def close(self) -> None:
        os.close(self._fd)


def commit_from_threads(writer: JournalWriter) -> list[BaseException]:
    """Each thread commits COMMITS user entries "t<thread> #<n>", all threads released at once."""
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def work(thread: int) -> None:
        start.wait()
        for number in range(COMMITS):
            message = UserMessage(content=f"t{thread} #{number}")
            try:
                writer.commit([EntryFact(id=uuid7(), entry=UserEntry(message=message))], "user")
            except BaseException as error:  # noqa: BLE001 - a thread's failure is the test's finding
                failures.append(error)
                return

    threads = [threading.Thread(target=work, args=(thread,)) for thread in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def assert_whole_and_in_order(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b"", "the journal ends with a LF"
    for line in lines:
        json.loads(line)  # every line is whole: one JSON value
    state = read_journal(path)
    assert state.repairedLength == path.stat().st_size
    contents = [message.content for message in state.transcript]
    assert len(contents) == THREADS * COMMITS
    for thread in range(THREADS):
        assert [text for text in contents if isinstance(text, str) and text.startswith(f"t{thread} ")] == [
            f"t{thread} #{number}" for number in range(COMMITS)
        ]


def test_ten_threads_committing_at_once_never_interleave_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    new_writer(path).close()
    writer = JournalWriter.open(path, durability="process")
    assert commit_from_threads(writer) == []
    writer.close()
    assert_whole_and_in_order(path)
    assert read_journal(path).sealed


def test_even_a_slow_appender_is_serialized(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    new_writer(path).close()
    writer = JournalWriter(SlowAppender(path), fold_chunks(file_chunks(path)), path=path)
    assert commit_from_threads(writer) == []
    writer.close()
    assert_whole_and_in_order(path)


def test_without_the_writers_lock_the_same_threads_break_the_journal(tmp_path: Path) -> None:
    """The control: the test above would notice a writer that did not serialize its commits."""
    path = tmp_path / "s.jsonl"
    new_writer(path).close()
    writer = JournalWriter(SlowAppender(path), fold_chunks(file_chunks(path)), path=path)
    writer._mutex = nullcontext()  # type: ignore[assignment]
    failures = commit_from_threads(writer)
    try:
        assert_whole_and_in_order(path)
    except Exception:  # noqa: BLE001 - any way of breaking counts: torn lines, a refused journal, lost entries
        return
    assert failures, "ten unserialized threads left a whole, ordered journal"
