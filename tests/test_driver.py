"""The driver on the provider seam, with an in-memory provider: fast unit tests of the agent loop.

The loopback-HTTP tests (test_agent.py, test_crash.py) are the integration layer; these
drive the same loop with :class:`fake_provider.FakeProvider`, no sockets and no threads.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import msgspec
import pytest
import replies
from builders import header
from fake_provider import FakeProvider, FakeReply

from tiny_agent.agent import recovery
from tiny_agent.agent.configuration import Configuration
from tiny_agent.agent.loop import Driver, Policy, Runtime
from tiny_agent.agent.tools.toolbox import ToolBox
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.state import IdleOperation, RunOperation
from tiny_agent.providers.http import WireRequest
from tiny_agent.stores.journal import JournalWriter, raw_facts, read_journal


def _driver(tmp_path: Path, script: list[FakeReply], policy: Policy = Policy(retry_wait=0.01)) -> tuple[Driver, FakeProvider]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Example\n")
    toolbox = ToolBox(workspace)
    configuration = Configuration(
        model="test/model",
        system_prompt="Be brief.",
        tools=[spec.declaration() for spec in toolbox.specs()],
        routing_identity="fake#test/model",
        environment_identity=str(workspace),
    )
    provider = FakeProvider(script)
    runtime = Runtime(configuration, toolbox, lambda: provider, policy=policy)
    writer = JournalWriter.create(tmp_path / "s.jsonl", header(), durability="process")
    return Driver(writer, runtime), provider


def _fake(reply_body: bytes, status: int = 200) -> FakeReply:
    return FakeReply(status=status, body=reply_body)


def _sent(request: WireRequest) -> dict[str, object]:
    value = msgspec.json.decode(request.body)
    assert isinstance(value, dict)
    return value


def test_a_tool_round_trip(tmp_path: Path) -> None:
    driver, provider = _driver(tmp_path, [_fake(replies.read().body), _fake(replies.answer("It is an example.").body)])
    result = driver.run("What is this?")
    driver.writer.close()
    assert (result.status, result.final) == ("completed", "It is an example.")
    first, second = (_sent(request) for request in provider.requests)
    assert [message["role"] for message in first["messages"]] == ["system", "user"]  # type: ignore[index]
    assert [message["role"] for message in second["messages"]] == ["system", "user", "assistant", "tool"]  # type: ignore[index]
    state = read_journal(driver.writer.path)
    assert transcript_violation(state.transcript) is None
    assert state.transcript[2].content == "# Example\n"
    assert [fact.raw.body.encode() for _, fact in raw_facts(driver.writer.path)] == [
        replies.read().body,
        replies.answer("It is an example.").body,
    ]
    assert state.sealed


def test_a_provider_that_cannot_be_reached_is_retried_then_left_open_for_resume(tmp_path: Path) -> None:
    refused = FakeReply(status=0, breaks_off="connect")
    driver, provider = _driver(tmp_path, [refused, refused, refused])
    result = driver.run("Hello?")
    driver.writer.close()
    assert (result.status, result.unreachable) == ("blocked", True)
    assert (result.reason or "").startswith("the provider could not be reached in 3 attempts (")
    assert len(provider.requests) == 3
    text = driver.writer.path.read_text()
    assert text.count('"type":"stepAttempt"') == 3
    assert "stepFailed" not in text and "operationFinished" not in text
    assert not list(raw_facts(driver.writer.path))
    assert type(read_journal(driver.writer.path).operation) is RunOperation


def test_a_timeout_is_retried_then_fails_the_step_durably(tmp_path: Path) -> None:
    slow = FakeReply(status=0, breaks_off="timeout")
    driver, provider = _driver(tmp_path, [slow, slow, slow])
    result = driver.run("Hello?")
    driver.writer.close()
    assert result.status == "failed"
    assert len(provider.requests) == 3
    assert driver.writer.path.read_text().count('"code":"provider_timeout"') == 1
    assert type(read_journal(driver.writer.path).operation) is IdleOperation


def test_a_rate_limit_is_retried_after_its_raw_response_is_journaled(tmp_path: Path) -> None:
    limited = FakeReply(status=429, body=b'{"error":{"message":"slow down"}}', retry_after="0")
    driver, provider = _driver(tmp_path, [limited, _fake(replies.answer("Fine.").body)])
    result = driver.run("Hello?")
    driver.writer.close()
    assert (result.status, result.final) == ("completed", "Fine.")
    assert len(provider.requests) == 2
    statuses = [raw.raw.status for _, raw in raw_facts(driver.writer.path)]
    assert statuses == [429, 200]
    assert '"attempt":2' in driver.writer.path.read_text()


def test_an_http_error_is_journaled_raw_then_fails_the_step(tmp_path: Path) -> None:
    error = b'{"error":{"message":"bad request","code":400}}'
    driver, _ = _driver(tmp_path, [_fake(error, status=400)])
    result = driver.run("Hello?")
    driver.writer.close()
    assert result.status == "failed"
    assert "HTTP 400" in (result.reason or "")
    ((_, raw),) = list(raw_facts(driver.writer.path))
    assert (raw.raw.status, raw.raw.body) == (400, error.decode())


def test_an_interrupt_during_planning_is_reconciled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C can land anywhere in the loop, not only during an action: the abort is still finished."""
    real = recovery.plan_recovery
    calls = {"count": 0}

    def interrupted_once(state, current):  # type: ignore[no-untyped-def]
        calls["count"] += 1
        if calls["count"] == 1:
            raise KeyboardInterrupt
        return real(state, current)

    monkeypatch.setattr("tiny_agent.agent.loop.plan_recovery", interrupted_once)
    driver, provider = _driver(tmp_path, [])
    result = driver.run("Hello?")
    driver.writer.close()
    assert result.status == "aborted"
    assert result.stopped_by == "interrupt"
    assert provider.requests == []
    state = read_journal(driver.writer.path)
    assert type(state.operation) is IdleOperation
    assert '"outcome":"aborted"' in driver.writer.path.read_text()


def test_an_interrupt_right_after_the_run_is_accepted_is_reconciled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver, _ = _driver(tmp_path, [])
    real_commit = driver.writer.commit

    def commit_then_interrupt(facts, label="transaction"):  # type: ignore[no-untyped-def]
        stamped = real_commit(facts, label)
        if label == "run-started":
            raise KeyboardInterrupt
        return stamped

    monkeypatch.setattr(driver.writer, "commit", commit_then_interrupt)
    result = driver.run("Hello?")
    driver.writer.close()
    assert result.status == "aborted"
    assert type(read_journal(driver.writer.path).operation) is IdleOperation


def test_sigterm_during_a_tool_is_recorded_like_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver, _ = _driver(tmp_path, [_fake(replies.read().body), _fake(replies.answer("never asked").body)])

    def terminated(name, arguments, link=None):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM should have stopped the tool")

    monkeypatch.setattr(driver.runtime.toolbox, "execute", terminated)
    result = driver.run("What is this?")
    driver.writer.close()
    assert (result.status, result.stopped_by) == ("aborted", "terminate")
    text = driver.writer.path.read_text()
    assert '"phase":"tool"' in text
    assert '"outcome":"aborted"' in text
    state = read_journal(driver.writer.path)
    assert transcript_violation(state.transcript) is None
    assert json.loads(json.dumps(state.transcript[-1].content)).startswith("Operation interrupted")
