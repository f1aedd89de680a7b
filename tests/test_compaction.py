"""Compaction written by tiny-agent: the compact command, automatic compaction in a long tool session
(the run ends, the history is summarised, a continuation run goes on), a provider's context-length
error, and recovery after a crash at every point of a compaction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import replies
from conftest import PROJECT_ROOT, isolated_workspace
from test_replay_cli import call

from tiny_agent.agent import compaction
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.state import IdleOperation
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.journal import read_journal


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n\n" + "A line of the readme that takes some room. " * 20 + "\n")


def only_session(workspace: Path) -> Path:
    (path,) = sorted((workspace.parent / "sessions").glob("*.jsonl"))
    return path


def is_summary_request(body: Any) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[-1].get("content") == compaction.SUMMARY_INSTRUCTION


class LongTaskModel:
    """Calls ``read`` until it has been answered ``turns`` times in all (across continuations), then answers.

    Summary requests (the compaction's) get a summary; the count lives here, as a provider's would not.
    """

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.tool_turns = 0
        self.summaries = 0

    def __call__(self, body: Any) -> Reply:
        if is_summary_request(body):
            self.summaries += 1
            return replies.answer(f"Summary {self.summaries}: the agent has read README.md {self.tool_turns} times so far.")
        if self.tool_turns >= self.turns:
            return replies.answer("Finished: the README says what the project does.")
        self.tool_turns += 1
        return replies.calls(("read", json.dumps({"path": "README.md"})), ids=[f"call_{self.tool_turns}"])


def run(capsys, server: LoopbackServer, *flags: str, prompt: str = "Read the README many times.") -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", "m", "--durability", "process", "--no-stream", "--retries", "0"]
    return call(capsys, "run", prompt, *base, *flags)


def test_the_compact_command_summarises_and_keeps_the_newest_messages(capsys, workspace: Path) -> None:
    script = [replies.read(), replies.answer("one"), replies.answer("two"), replies.answer("Summary of it all.")]
    with LoopbackServer(script) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        assert run(capsys, server, "--continue", prompt="second")[0] == 0
        path = only_session(workspace)
        code, _, err = call(capsys, "compact", str(path), "--keep", "2", "--base-url", server.base_url, "--model", "m", "--no-stream")
    assert code == 0, err
    assert "compacted" in err
    summary_request = server.requests[-1].body
    assert summary_request["messages"][0]["content"] == compaction.SUMMARY_PROMPT
    assert "tools" not in summary_request
    state = read_journal(path)
    assert state.activeContext[0] == UserMessage(content="[Compacted history]\nSummary of it all.")
    assert [message.content for message in state.activeContext[1:]] == ["second", "two"]
    assert len(state.transcript) == 6, "the transcript keeps every message"
    assert verify(path).status == "ok"
    code, out, _ = call(capsys, "replay", str(path))
    assert "summary:" in out and "Summary of it all." in out
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["drift"] is False
    (item,) = report["compactions"]
    assert (item["messagesBefore"], item["messagesAfter"]) == (6, 3)


def test_a_long_tool_session_compacts_several_times_and_finishes(capsys, workspace: Path) -> None:
    model = LongTaskModel(turns=200)
    with LoopbackServer(model, validate=False) as server:
        code, out, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400")
    assert code == 0, err
    assert out == "Finished: the README says what the project does.\n"
    assert model.summaries >= 3
    path = only_session(workspace)
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert transcript_violation(state.transcript) is None
    assert verify(path).status == "ok"
    text = path.read_text()
    assert text.count('"type":"compactionStarted"') == model.summaries
    assert text.count(compaction.CONTINUE_PROMPT) >= model.summaries - 1
    assert state.lastOutcome is not None and state.lastOutcome.outcome == "completed"


def test_the_long_session_reads_the_same_through_checkpoints_and_exports_to_v2(capsys, workspace: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Checkpoints on at every fold: the run's own reads leave them, and the replays below go through them.
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")
    model = LongTaskModel(turns=200)
    with LoopbackServer(model, validate=False) as server:
        code, _, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400")
    assert code == 0, err
    assert model.summaries >= 3
    path = only_session(workspace)
    full = b'{"ok":true,"state":' + read_journal(path).to_json_bytes() + b"}\n"
    for _ in range(2):
        code, out, err = call(capsys, "replay", str(path), "--json")
        assert (code, err) == (0, "")
        assert out.encode() == full
    assert list((workspace.parent / "sessions" / ".tiny-agent-checkpoints").glob("*.checkpoint"))
    exported = workspace.parent / "v2.jsonl"
    code, _, err = call(capsys, "export", str(path), "--v2", "-o", str(exported))
    assert code == 0, err
    assert exported.read_bytes().startswith(b'{"kind":"header","version":2,')
    assert read_journal(exported).transcript == read_journal(path).transcript


def test_a_context_length_error_compacts_and_retries_once(capsys, workspace: Path) -> None:
    too_long = Reply(status=400, body=json.dumps({"error": {"message": "This model's maximum context length is 8192 tokens",
                                                           "code": "context_length_exceeded"}}).encode())
    script = [replies.answer("one"), replies.answer("two"), too_long, replies.answer("Summary."), replies.answer("Third, at last.")]
    with LoopbackServer(script) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        assert run(capsys, server, "--continue", prompt="second")[0] == 0
        code, out, err = run(capsys, server, "--continue", prompt="third")
    assert code == 0, err
    assert out == "Third, at last.\n"
    path = only_session(workspace)
    text = path.read_text()
    assert '"code":"context_length_exceeded"' in text
    assert text.count('"type":"compactionStarted"') == 1
    assert verify(path).status == "ok"


POINTS = ["compaction-started", "step-attempt", "raw", "compaction", "finish"]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_of_a_compaction_is_recovered(workspace: Path, point: str) -> None:
    """First run: one answer.  Then `compact`, killed at ``point``; `resume` finishes the compaction."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_FAILPOINT")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    script = [replies.answer("one"), replies.answer("two"), replies.answer("The summary."), replies.answer("The summary.")]
    with LoopbackServer(script) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream"]
        for prompt in ("first", "second"):
            done = subprocess.run([sys.executable, "-m", "tiny_agent", "run", prompt, *flags, "--continue" if prompt == "second" else "--retries=0"],
                                  cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        path = only_session(workspace)
        killed = subprocess.run([sys.executable, "-m", "tiny_agent", "compact", str(path), "--keep", "2", *flags],
                                cwd=workspace, env={**env, "TINY_AGENT_FAILPOINT": f"after-commit:{point}"},
                                capture_output=True, text=True, timeout=60)
        assert killed.returncode == -9, killed.stderr
        resumed = subprocess.run([sys.executable, "-m", "tiny_agent", "resume", str(path), *flags],
                                 cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert state.lastOutcome is not None and state.lastOutcome.kind == "compaction"
    assert state.activeContext[0].content.startswith("[Compacted history]\n")
    assert verify(path).status == "ok"
