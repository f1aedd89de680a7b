"""Live sessions against a real Chat Completions server on 127.0.0.1: the run lifecycle end to end.

Every test runs once per store (conftest.STORES): the file store, and PostgreSQL in
a scratch schema (skipped, saying why, without a server).  Checks on a journal's
bytes read it as the file the file store would hold (``StoreUnderTest.journals``).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest
import replies
from conftest import PROJECT_ROOT, StoreUnderTest
from lines import split
from test_replay_cli import call

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.loopback import LoopbackServer, Reply, demo_bodies
from tiny_agent.stores.journal import raw_facts, read_journal


@pytest.fixture()
def store(store_under_test: StoreUnderTest, monkeypatch) -> StoreUnderTest:
    """The store this run of the test writes to, chosen through the environment as a user would."""
    for name, value in store_under_test.env.items():
        monkeypatch.setenv(name, value)
    return store_under_test


@pytest.fixture()
def workspace(tmp_path, monkeypatch, store) -> Path:
    """A working directory with a README, the store beside it, and no provider settings from the host."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text("# Example\n\nA project that prints hi.\n")
    monkeypatch.chdir(root)
    for name in ("TINY_AGENT_BASE_URL", "TINY_AGENT_MODEL", "TINY_AGENT_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY", "TINY_AGENT_FAILPOINT"):
        monkeypatch.delenv(name, raising=False)
    if "TINY_AGENT_STORE" not in store.env:
        monkeypatch.delenv("TINY_AGENT_STORE", raising=False)
    return root


def run_prompt(capsys, server: LoopbackServer, *extra: str, prompt: str = "What is this project?") -> tuple[int, str, str]:
    """One run against the loopback server, without transport retries (tests of retries pass --retries)."""
    flags = ["--base-url", server.base_url, "--model", "test/model", "--durability", "process", "--retries", "0"]
    return call(capsys, "run", prompt, *flags, *extra)


def only_session(store: StoreUnderTest) -> Path:
    (path,) = store.journals()
    return path


def _index_rows(url: str) -> str:
    """Every row of a database store's sessions index, as text."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT row_to_json(s)::text FROM tiny_agent_sessions s").fetchall()
    return "\n".join(row[0] for row in rows)


def assert_provider_valid(path: Path) -> None:
    state = read_journal(path)
    assert transcript_violation(state.transcript) is None
    assert state.operation.__class__.__name__ == "IdleOperation"


# -- the happy path -------------------------------------------------------------------


def test_demo_runs_offline_and_keeps_only_canonical_fields(capsys, store, workspace):
    code, out, _ = call(capsys, "demo")
    assert code == 0
    path = only_session(store)
    assert "#3 tool read" in out
    state = read_journal(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    entries = [json.dumps(fact) for line in lines for fact in line if fact["kind"] == "entry" and "stopReason" in fact["entry"]]
    assert entries and all("reasoning" not in entry and "refusal" not in entry for entry in entries)
    bodies = [fact.raw.body.encode() for _, fact in raw_facts(path)]
    assert bodies == demo_bodies()
    assert state.sealed


def test_run_against_a_dirty_provider(capsys, store, workspace):
    script = [replies.read("README.md"), replies.answer("It prints hi.")]
    with LoopbackServer(script) as server:
        code, out, err = run_prompt(capsys, server)
    assert (code, out) == (0, "It prints hi.\n")
    path = only_session(store)
    assert_provider_valid(path)
    state = read_journal(path)
    assert [message.__class__.__name__ for message in state.transcript] == ["UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]
    assert state.transcript[2].content == "# Example\n\nA project that prints hi.\n"
    assert [fact.raw.body.encode() for _, fact in raw_facts(path)] == [reply.body for reply in script]
    if store.kind == "file":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    request = server.requests[1].body
    assert request["model"] == "test/model"
    assert [message["role"] for message in request["messages"]] == ["user", "assistant", "tool"]
    assert "reasoning" not in request["messages"][1]
    assert {tool["function"]["name"] for tool in request["tools"]} == {"read", "write", "edit", "list", "glob", "grep"}


def test_every_changed_byte_is_caught_by_a_seal(capsys, store, workspace):
    with LoopbackServer([replies.read(), replies.answer("It prints hi.")]) as server:
        assert run_prompt(capsys, server)[0] == 0
    data = only_session(store).read_bytes()
    lines = split(data)
    for number in range(1, len(lines)):
        line = lines[number]
        position = len(line) // 2
        changed = line[:position] + (b"X" if line[position:position + 1] != b"X" else b"Y") + line[position + 1 :]
        tampered = b"".join(item + b"\n" for item in [*lines[:number], changed, *lines[number + 1 :]])
        if number == len(lines) - 1:
            continue  # the closing seal line covers the line before it; nothing covers the seal itself
        with pytest.raises(CorruptionError):
            reduce_bytes(tampered)


def test_the_api_key_is_sent_but_never_written(capsys, store, workspace, monkeypatch):
    secret = "sk-test-0123456789-never-on-disk"
    monkeypatch.setenv("TINY_AGENT_API_KEY", secret)
    with LoopbackServer([replies.read(), replies.answer("done")]) as server:
        assert run_prompt(capsys, server)[0] == 0
    assert all(request.authorized for request in server.requests)
    assert secret not in json.dumps(msgspec.to_builtins(server.requests))
    store.journals()  # a database's journals and index, written out beside the workspace to be searched too
    if store.url is not None:
        (workspace.parent / "index.txt").write_text(_index_rows(store.url))
    for file in workspace.parent.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), file


def test_json_output_and_continuing_an_idle_session(capsys, store, workspace):
    with LoopbackServer([replies.answer("first"), replies.answer("second")]) as server:
        code, out, _ = run_prompt(capsys, server, "--json")
        result = json.loads(out)
        assert (code, result["outcome"], result["final"]) == (0, "completed", "first")
        code, out, _ = run_prompt(capsys, server, "--session", result["session"], prompt="and again?")
    assert (code, out) == (0, "second\n")
    (path,) = [journal for journal in store.journals() if result["session"] in journal.name]
    state = read_journal(path)
    assert [message.content for message in state.transcript] == ["What is this project?", "first", "and again?", "second"]


# -- failures become durable outcomes ----------------------------------------------------


@pytest.mark.parametrize(
    "reply, reason",
    [
        (Reply(status=500, body=b'{"error":{"message":"upstream overloaded","code":500}}'), "HTTP 500"),
        (Reply(status=401, body=b'{"error":{"message":"No auth credentials found","code":401}}'), "HTTP 401"),
        (Reply(body=b'{"error":{"message":"Provider returned error","code":502}}'), "provider reported an error"),
        (Reply(body=b"<html>502 Bad Gateway</html>", content_type="text/html"), "not JSON"),
        (Reply(body=replies.body({"role": "assistant", "content": [{"type": "text", "text": "hi"}]})), "content is a list"),
        (Reply(body=replies.body({"role": "assistant", "content": ""}, finish="content_filter")), "content_filter"),
        (Reply(body=b"\xff\xfe not utf-8"), "not UTF-8"),
    ],
    ids=["500", "401", "in-band-error", "html", "content-list", "filtered", "binary"],
)
def test_bad_responses_fail_the_run_durably(capsys, store, workspace, reply, reason):
    with LoopbackServer([reply]) as server:
        code, out, err = run_prompt(capsys, server)
    assert code == 1
    assert reason in err
    assert len(err.strip().splitlines()) == 1 or err.count("FAILED:") == 1
    path = only_session(store)
    state = read_journal(path)
    assert state.operation.__class__.__name__ == "IdleOperation"
    raws = [fact.raw for _, fact in raw_facts(path)]
    assert len(raws) == 1
    (raw,) = raws
    assert raw.status == reply.status
    stored = base64.b64decode(raw.bodyBase64) if raw.body is msgspec.UNSET else raw.body.encode("utf-8")
    assert stored == reply.body, "the raw fact must hold the body exactly as received"
    assert "stepFailed" in path.read_text()


def test_a_cut_off_answer_is_kept_shown_and_marked(capsys, store, workspace):
    cut = Reply(body=replies.body({"role": "assistant", "content": "It is a proj"}, finish="length"))
    with LoopbackServer([cut]) as server:
        code, out, err = run_prompt(capsys, server)
    assert code == 1
    assert out == "It is a proj\n"
    assert "cut off by the model's token limit" in err
    assert "finish the run: the answer was cut off by the model's token limit" in err and "as completed" not in err
    path = only_session(store)
    state = read_journal(path)
    assert state.transcript[-1].content == "It is a proj"
    text = path.read_text()
    assert '"stopReason":"length"' in text
    assert '"code":"length_without_calls"' in text
    assert_provider_valid(path)


def test_timeout_and_hang_up_fail_without_a_raw_fact(capsys, store, workspace):
    with LoopbackServer([Reply(body=b"{}", delay=3), Reply(hang_up=True)]) as server:
        code, _, err = run_prompt(capsys, server, "--read-timeout", "0.5")
        assert code == 1
        assert "timed out" in err
        assert "--read-timeout" in err
        code, _, err = run_prompt(capsys, server)
        assert code == 1
    journals = store.journals()
    assert len(journals) == 2
    for path in journals:
        assert not list(raw_facts(path))
        assert "provider_" in path.read_text()


def test_length_with_calls_is_answered_as_truncated_and_never_executed(capsys, store, workspace):
    truncated = replies.calls(("write", '{"path":"notes.md","content":"# No'), finish="length")
    with LoopbackServer([truncated]) as server:
        code, _, _ = run_prompt(capsys, server)
    assert code == 0
    assert not (workspace / "notes.md").exists()
    state = read_journal(only_session(store))
    assert state.transcript[-1].content.startswith("Error: Tool call arguments were truncated")
    assert '"completion":"truncated"' in only_session(store).read_text()


def test_unknown_tools_and_invalid_arguments_are_answered_with_fixed_texts(capsys, store, workspace):
    script = [
        replies.calls(("launch_rockets", "{}"), ("read", "not json"), ("read", '{"file":"README.md"}')),
        replies.answer("I could not do any of that."),
    ]
    with LoopbackServer(script) as server:
        code, out, _ = run_prompt(capsys, server)
    assert code == 0
    contents = [message.content for message in read_journal(only_session(store)).transcript[2:5]]
    assert contents == [
        "Error: Unknown tool; the tool was not executed.",
        "Error: Tool arguments were invalid; the tool was not executed.",
        "Error: Tool arguments were invalid; the tool was not executed.",
    ]


def test_a_tool_error_is_a_result_not_a_crash(capsys, store, workspace):
    script = [replies.read("../outside.txt"), replies.read("missing.txt"), replies.answer("Neither file is readable.")]
    with LoopbackServer(script) as server:
        assert run_prompt(capsys, server)[0] == 0
    state = read_journal(only_session(store))
    assert "leaves the working directory" in state.transcript[2].content
    assert "missing.txt" in state.transcript[4].content


# -- one writer per session ------------------------------------------------------------


def test_a_second_writer_exits_75_at_once(capsys, store, workspace):
    with LoopbackServer([replies.answer("first")]) as server:
        code, out, _ = run_prompt(capsys, server, "--json")
    session = json.loads(out)["session"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    gate = threading.Event()

    def held(_body: object) -> Reply:
        gate.wait(60)
        return replies.answer("slow")

    with LoopbackServer([held]) as server:
        first = subprocess.Popen(
            [sys.executable, "-m", "tiny_agent", "run", "slow one", "--session", session, "--base-url", server.base_url, "--model", "test/model"],
            cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while server.request_count == 0:
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the first writer never asked the model"
                time.sleep(0.05)
            second = subprocess.run(
                [sys.executable, "-m", "tiny_agent", "run", "fast one", "--session", session, "--base-url", server.base_url, "--model", "test/model"],
                cwd=workspace, env=env, capture_output=True, text=True, timeout=60,
            )
            assert first.poll() is None, "the second writer was refused while the first still held the session, not after"
        finally:
            gate.set()
        first.communicate(timeout=60)
    assert second.returncode == 75
    assert second.stderr.startswith("LOCKED:")
    assert f"pid {first.pid}" in second.stderr
    assert first.returncode == 0
    assert_provider_valid(only_session(store))
