"""audit, verify and sessions: what the provider sent, what was kept, that no byte changed, and the overview."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from builders import RunWriter, new_writer, write_tool_session
from conftest import PROJECT_ROOT
from lines import edit_line, reseal, split
from test_replay_cli import call

from tiny_agent.stores.files import catalog
from tiny_agent.stores.journal import JournalWriter, raw_facts


@pytest.fixture()
def workspace(tmp_path, monkeypatch) -> Path:
    """A working directory with a README and a sessions directory beside it."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text("# Example\n\nA project that prints hi.\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(tmp_path / "sessions"))
    return root


@pytest.fixture()
def demo_session(capsys, workspace) -> Path:
    assert call(capsys, "demo")[0] == 0
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    return path


# -- audit ---------------------------------------------------------------------------


def test_audit_of_the_demo_lists_dropped_fields_usage_and_no_drift(capsys, demo_session):
    code, out, _ = call(capsys, "audit", str(demo_session))
    assert code == 0
    assert "choices[0].message.reasoning" in out
    assert "choices[0].message.refusal" in out
    assert "choices[0].message.annotations" in out
    assert "choices[0].message.tool_calls[0].index" in out
    assert "prompt_tokens 1200 − cached 800 − write 300 = input 100" in out
    assert "cache hit rate 70.4%" in out
    assert "verdict: no drift" in out
    code, out, _ = call(capsys, "audit", str(demo_session), "--json")
    report = json.loads(out)
    assert code == 0
    assert report["drift"] is False
    assert report["dropped"]["choices[0].message.reasoning"] == 2
    assert report["cost"] == pytest.approx(0.000465 + 0.000211)
    first = report["attempts"][0]
    assert (first["response"]["status"], first["response"]["finishReason"], first["stopReason"]) == (200, "tool_calls", "toolUse")
    assert first["requestMessages"] == 1
    assert first["requestDigest"].startswith("sha256:")
    assert report["tools"] == [{"toolName": "read", "toolCallId": "call_demo_read_readme", "replay": "safe", "replayKey": "builtin:read:v1", "outcome": "success"}]


def test_request_digest_is_the_digest_of_the_messages_sent(capsys, demo_session):
    from tiny_agent.journal.canonical import canonical_digest
    from tiny_agent.stores.journal import read_journal

    report = json.loads(call(capsys, "audit", str(demo_session), "--json")[1])
    messages = json.loads(call(capsys, "replay", str(demo_session), "--messages")[1])
    assert report["attempts"][1]["requestDigest"] == canonical_digest(messages[:3])
    assert report["attempts"][1]["requestMessages"] == 3
    assert read_journal(demo_session).transcript


def test_a_flipped_byte_in_a_stored_body_fails_verify_at_the_next_line(capsys, demo_session, tmp_path):
    copy = tmp_path / "copy.jsonl"
    data = demo_session.read_bytes()
    lines = split(data)
    (raw_line, _), = [(number, fact) for number, fact in raw_facts(demo_session)][:1]
    target = lines[raw_line - 1]
    position = target.index(b"reasoning")
    lines[raw_line - 1] = target[:position] + b"R" + target[position + 1 :]
    copy.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out, err = call(capsys, "verify", str(copy))
    assert code == 65
    assert f"SEAL_MISMATCH at line {raw_line + 1}" in out


def test_a_forged_canonical_entry_is_reported_as_drift(capsys, demo_session, tmp_path):
    data = demo_session.read_bytes()
    answer_line = next(number for number, line in enumerate(split(data), start=1) if b'"stopReason":"stop"' in line)

    def forge(facts):
        facts[0]["entry"]["message"]["content"] = "The README says this project is perfect."
        return facts

    forged = reseal(edit_line(data, answer_line, forge))
    copy = tmp_path / "forged.jsonl"
    copy.write_bytes(forged)
    assert call(capsys, "verify", str(copy))[0] == 0
    code, out, _ = call(capsys, "audit", str(copy))
    assert code == 3
    assert "DRIFT     message differs" in out
    assert "verdict: DRIFT in attempt(s) 2" in out


def test_forged_usage_is_drift_too(capsys, demo_session, tmp_path):
    data = demo_session.read_bytes()
    answer_line = next(number for number, line in enumerate(split(data), start=1) if b'"stopReason":"stop"' in line)

    def forge(facts):
        facts[1]["usage"]["output"] = 1
        return facts

    copy = tmp_path / "forged.jsonl"
    copy.write_bytes(reseal(edit_line(data, answer_line, forge)))
    code, out, _ = call(capsys, "audit", str(copy), "--json")
    assert code == 3
    assert "usage" in json.loads(out)["attempts"][1]["drift"][0]


def test_audit_notes_attempts_without_a_response_and_responses_never_settled(capsys, tmp_path):
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("hi")
    run.attempt()
    run.attempt(2)
    run.raw('{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}')
    writer.close()
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["attempts"][0]["notes"] == ["no response on record: closed by a retry (attempt 2)"]
    assert "never settled" in report["attempts"][1]["notes"][0]


def test_audit_of_a_v2_journal_and_of_a_corrupt_one(capsys):
    fixtures = Path(os.environ.get("TINY_AGENT_SHARED", PROJECT_ROOT.parent / "shared")) / "conformance" / "tiny-agent-session-v2" / "fixtures"
    code, out, _ = call(capsys, "audit", str(fixtures / "completed-tool-run.jsonl"), "--json")
    assert code == 0
    assert all("no response on record" in attempt["notes"][0] for attempt in json.loads(out)["attempts"])
    assert call(capsys, "audit", str(PROJECT_ROOT / "sessions" / "examples" / "polluted.jsonl"))[0] == 65


# -- verify -----------------------------------------------------------------------------


def test_verify_statuses(capsys, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    sealed = store / "20260101T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985201.jsonl"
    write_tool_session(sealed, runs=1)
    crashed = store / "20260101T000001Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985202.jsonl"
    write_tool_session(crashed, runs=1, close=False).close(seal=False)
    v2 = store / "20260101T000002Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985203.jsonl"
    write_tool_session(v2, runs=1, version=2)
    code, out, _ = call(capsys, "verify", "--all", "--sessions-dir", str(store), "--json")
    statuses = {Path(verdict["path"]).name[:18]: verdict["status"] for verdict in json.loads(out)}
    assert code == 0
    assert statuses == {"20260101T000000Z_0": "ok", "20260101T000001Z_0": "open-tail", "20260101T000002Z_0": "unsealed"}
    live = JournalWriter.open(crashed)
    try:
        code, out, _ = call(capsys, "verify", str(crashed))
        assert f"live (written by pid {os.getpid()})" in out
    finally:
        live.close(seal=False)
    code, out, _ = call(capsys, "verify", str(crashed))
    assert "crashed" in out


def test_verify_notices_a_journal_cut_at_a_line_boundary(capsys, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    path = store / "20260101T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985201.jsonl"
    write_tool_session(path, runs=2)
    assert call(capsys, "sessions", "--all", "--sessions-dir", str(store))[0] == 0
    lines = split(path.read_bytes())
    path.write_bytes(b"".join(line + b"\n" for line in lines[:-5]))
    code, out, _ = call(capsys, "verify", str(path))
    assert code == 65
    assert "cut off" in out


def test_verify_needs_a_session_or_all(capsys):
    assert call(capsys, "verify")[0] == 2


# -- sessions ---------------------------------------------------------------------------


def test_sessions_lists_newest_first_with_status(capsys, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    names = [f"2026010{index}T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b98520{index}.jsonl" for index in range(1, 5)]
    write_tool_session(store / names[0], runs=2)
    crashed = new_writer(store / names[1])
    RunWriter(crashed).start("left open by a crash")
    crashed.close(seal=False)
    shutil.copy(PROJECT_ROOT / "sessions" / "examples" / "polluted.jsonl", store / names[2])
    write_tool_session(store / names[3], runs=1, close=False).close(seal=False)
    holder = JournalWriter.open(store / names[3])
    try:
        code, out, _ = call(capsys, "sessions", "--all", "--sessions-dir", str(store), "--json")
    finally:
        holder.close(seal=False)
    rows = json.loads(out)
    assert code == 0
    assert [row["status"] for row in rows] == [f"locked by pid {os.getpid()}", "corrupt", "crashed", "idle"]
    assert rows[3]["runs"] == 2
    assert rows[3]["prompt"].startswith("What does file 0 say?")
    assert rows[3]["tokens"] == 2 * (12 + 3 + 4) * 2
    code, out, _ = call(capsys, "sessions", "--all", "--sessions-dir", str(store), "--limit", "2")
    assert code == 0
    assert len(out.strip().splitlines()) == 3
    code, out, _ = call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    crashed_row = next(line for line in out.splitlines() if " crashed " in line)
    assert code == 0 and crashed_row.split(" crashed ")[1].split()[:2] == ["1", "n/a"], "a run with no reported usage has no count, not 0"


def test_sessions_reuses_its_index_until_a_journal_changes(capsys, tmp_path, monkeypatch):
    store = tmp_path / "store"
    store.mkdir()
    for index in range(3):
        write_tool_session(store / f"2026010{index}T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b98520{index}.jsonl", runs=1)
    reduced = []
    real = catalog.summarize
    monkeypatch.setattr(catalog, "summarize", lambda path: reduced.append(path.name) or real(path))
    call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    assert len(reduced) == 3
    call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    assert len(reduced) == 3
    newest = sorted(store.glob("*.jsonl"))[-1]
    writer = JournalWriter.open(newest)
    RunWriter(writer).start("one more")
    writer.close()
    call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    assert reduced[3:] == [newest.name]
    (store / catalog.INDEX_NAME).write_text("not json")
    call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    assert len(reduced) == 7
    assert oct(os.stat(store / catalog.INDEX_NAME).st_mode)[-3:] == "600"


def test_large_content_stays_cheap_to_list(capsys, tmp_path, monkeypatch):
    """A journal holding a 20 MB tool result is listed from its tail once indexed."""
    store = tmp_path / "store"
    store.mkdir()
    path = store / "20260101T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985201.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("read the big file")
    run.attempt()
    asked = run.call_tools([("read", '{"path":"big.log"}')])
    run.run_tool(asked, 0, "x" * (20 * 1024 * 1024))
    writer.close()
    call(capsys, "sessions", "--all", "--sessions-dir", str(store))
    # Once indexed, listing must not reduce the journal again: make any reduction fail loudly.
    def no_reduction(path):
        raise AssertionError(f"{path.name} was reduced again although the index vouches for it")

    monkeypatch.setattr(catalog, "summarize", no_reduction)
    monkeypatch.setattr(catalog, "read_journal", no_reduction)
    code, out, _ = call(capsys, "sessions", "--all", "--sessions-dir", str(store), "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["prompt"] == "read the big file"


def test_sessions_lists_this_directorys_sessions_by_default_and_an_empty_store_is_empty(capsys, tmp_path, monkeypatch):
    store = tmp_path / "store"
    code, out, err = call(capsys, "sessions", "--sessions-dir", str(store), "--json")
    assert (code, json.loads(out), err) == (0, [], "")
    store.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    mine = new_writer(store / "20260102T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985202.jsonl", cwd=str(here))
    RunWriter(mine).start("made here")
    mine.close()
    write_tool_session(store / "20260101T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985201.jsonl", runs=1)
    code, out, _ = call(capsys, "sessions", "--sessions-dir", str(store), "--json")
    assert [row["prompt"] for row in json.loads(out)] == ["made here"]
    code, out, _ = call(capsys, "sessions", "--sessions-dir", str(store), "--all", "--json")
    assert len(json.loads(out)) == 2


def test_handles_are_short_unique_and_accepted_everywhere(capsys, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    # Time-ordered ids that share their first 13 characters; their random tails differ early.
    ids = ["019ae2a1-3c4d-7e00-8a00-5f1e00000001", "019ae2a1-3c4d-7e00-8a00-a2b300000002", "019ae2a1-3c4d-7e00-8a00-a2c400000003"]
    for number, session_id in enumerate(ids):
        write_tool_session(store / f"2026010{number}T000000Z_{session_id}.jsonl", runs=1, session_id=session_id)
    code, out, _ = call(capsys, "sessions", "--sessions-dir", str(store), "--all", "--json")
    handles = {row["session"]: row["handle"] for row in json.loads(out)}
    assert handles == {ids[0]: "5f1e", ids[1]: "a2b3", ids[2]: "a2c4"}
    for session_id, handle in handles.items():
        code, out, _ = call(capsys, "replay", handle, "--sessions-dir", str(store), "--json")
        assert (code, json.loads(out)["state"]["header"]["id"]) == (0, session_id)
    code, _, err = call(capsys, "replay", "a2", "--sessions-dir", str(store))
    assert code == 2
    assert err.startswith("USAGE: 'a2' fits 2 sessions (")
    assert "a2b" in err and "a2c" in err
    code, _, err = call(capsys, "replay", "019ae2a1", "--sessions-dir", str(store))
    assert code == 2


# -- audit reads the journal once, and refuses exactly what the reducer refuses ---------------------


def test_audit_refuses_exactly_what_the_reducer_refuses(capsys, demo_session) -> None:
    """Over many single-byte flips and cuts of a sealed journal, audit and replay agree on the verdict."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tiny_agent.errors import CorruptionError
    from tiny_agent.oversight.audit import audit
    from tiny_agent.stores.journal import read_journal

    original = demo_session.read_bytes()
    copy = demo_session.with_name("mutated.jsonl")

    def verdict(action) -> str:
        try:
            action(copy)
        except CorruptionError as error:
            return str(error)
        return "ok"

    @settings(max_examples=150, deadline=None)
    @given(st.integers(0, len(original) - 1), st.integers(1, 255), st.booleans())
    def check(offset: int, flip: int, cut: bool) -> None:
        data = original[:offset] if cut else original[:offset] + bytes([original[offset] ^ flip]) + original[offset + 1 :]
        copy.write_bytes(data)
        assert verdict(audit) == verdict(read_journal)

    check()


def test_a_huge_raw_line_is_audited_in_one_read(tmp_path, monkeypatch) -> None:
    """The audit folds each chunk before it walks its facts, so a many-MB raw line is read from disk once."""
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "bench"))
    from line_bench import write_session

    from tiny_agent.oversight.audit import audit
    from tiny_agent.stores.files import disk as filestore

    path = write_session(tmp_path, 3)
    reads = []
    original = filestore.file_chunks

    def counted(where: Path):
        reads.append(where)
        return original(where)

    monkeypatch.setattr(filestore, "file_chunks", counted)
    report = audit(path)
    assert reads == [path]
    assert not report.drift
    (attempt,) = report.attempts
    assert attempt.response is not None and attempt.response.bytes > 3_000_000
