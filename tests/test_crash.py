"""Crash recovery with real processes: SIGKILL at every failpoint and at random moments, then resume.

A scripted model on 127.0.0.1 asks for two tools — ``read`` (safe to replay)
and a ``bash`` command that appends to a log (never replayed) — and then
answers.  Whatever moment the run dies at, ``resume`` must leave the session
idle with a provider-valid transcript, keep every committed byte, make no
request for a response already on record, replay the safe tool, never run
the unsafe one twice, and a second ``resume`` must change nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import replies
from conftest import PROJECT_ROOT, StoreUnderTest, until

from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.transcript import AssistantMessage, ToolMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import raw_facts, read_journal

README = "# Example\n\nA project that prints hi.\n"
SIDE_EFFECT = "echo ran >> side-effects.log"


class ScriptedModel:
    """Answers from the conversation itself, so any process may ask at any point."""

    def __init__(self, delay: float = 0.0) -> None:
        self.numbers = itertools.count(1)
        self.delay = delay

    def __call__(self, request: Any) -> Reply:
        number = next(self.numbers)
        last = request["messages"][-1]["role"] if request and request.get("messages") else "user"
        if last == "user":
            reply = replies.calls(("read", '{"path":"README.md"}'), ("bash", json.dumps({"command": SIDE_EFFECT})), ids=[f"call_read_{number}", f"call_bash_{number}"])
        else:
            reply = replies.answer("done")
        body = reply.body.replace(b'"gen-test"', f'"gen-{number}"'.encode())
        return Reply(body=body, delay=self.delay)


_STORE: list[StoreUnderTest] = []


@pytest.fixture(autouse=True)
def store(store_under_test: StoreUnderTest):
    """Every test here runs once per store: the helpers below name the sessions and read their journals through it."""
    _STORE[:] = [store_under_test]
    yield store_under_test
    _STORE.clear()


@pytest.fixture()
def model():
    script = ScriptedModel()
    with LoopbackServer([script] * 10_000) as server:
        server.script = script  # type: ignore[attr-defined]
        yield server


@pytest.fixture()
def workspace(tmp_path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text(README)
    return root


def tiny(workspace: Path, server: LoopbackServer, *args: str, failpoint: str | None = None, wait: bool = True):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENROUTER_", "OPENAI_"))}
    env.update(_store_of(workspace).env)
    env.update(
        PYTHONPATH=str(PROJECT_ROOT),
        TINY_AGENT_BASE_URL=server.base_url,
        TINY_AGENT_MODEL="test/model",
    )
    if failpoint:
        env["TINY_AGENT_FAILPOINT"] = failpoint
    command = [sys.executable, "-m", "tiny_agent", *args]
    if not wait:
        return subprocess.Popen(command, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def journal_of(workspace: Path) -> Path | None:
    """The newest session's journal as a file (a database's rows written out as the file store would hold them)."""
    return _store_of(workspace).newest()


def _store_of(workspace: Path) -> StoreUnderTest:
    """This module's store for the test; the file store beside the workspace for other modules using these helpers."""
    if _STORE and _STORE[0].root == workspace.parent:
        return _STORE[0]
    return StoreUnderTest("file", workspace.parent)


def side_effects(workspace: Path) -> int:
    log = workspace / "side-effects.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def check_recovered(workspace: Path, server: LoopbackServer, before: bytes, requests_before: int, raws_before: int) -> None:
    """The invariants every recovery must meet."""
    path = journal_of(workspace)
    assert path is not None
    after = path.read_bytes()
    state = read_journal(path)
    assert state.operation.__class__.__name__ == "IdleOperation"
    assert transcript_violation(state.transcript) is None
    committed_before = before[: before.rfind(b"\n") + 1]
    assert after.startswith(committed_before), "a committed byte changed or was lost"
    answers: dict[str, int] = {}
    for message in state.transcript:
        if type(message) is ToolMessage:
            answers[message.tool_call_id] = answers.get(message.tool_call_id, 0) + 1
    for message in state.transcript:
        if type(message) is AssistantMessage:
            for call in message.calls:
                assert answers.get(call.id) == 1, f"tool call {call.id} answered {answers.get(call.id, 0)} times"
    raws_after = len(list(raw_facts(path)))
    assert server.request_count - requests_before == raws_after - raws_before, "a request was made whose response was not kept, or one was repeated"
    assert side_effects(workspace) <= 1, "a never-replay tool ran twice"


def resume_and_check(workspace: Path, server: LoopbackServer) -> None:
    path = journal_of(workspace)
    if path is None:
        return
    before = path.read_bytes()
    requests_before = server.request_count
    raws_before = len(list(raw_facts(path))) if before.count(b"\n") else 0
    session = path.name.split("_", 1)[1][:-6]
    resumed = tiny(workspace, server, "resume", session, "--allow-bash")
    if resumed.returncode == 75:
        # Both attempts of a step were started and neither response landed (a
        # resume was killed too): recovery must stop rather than pay a third time.
        assert "attempts_exhausted" in resumed.stderr, resumed.stderr
        resumed = tiny(workspace, server, "resume", session, "--abort", "--allow-bash")
    assert resumed.returncode in (0, 1), resumed.stderr
    assert "Traceback" not in resumed.stderr
    check_recovered(workspace, server, before, requests_before, raws_before)
    settled = _bytes_now(workspace)
    again = tiny(workspace, server, "resume", session, "--allow-bash")
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert _bytes_now(workspace) == settled


def _bytes_now(workspace: Path) -> bytes:
    path = journal_of(workspace)
    assert path is not None
    return path.read_bytes()


FAILPOINTS = [
    "after-commit:run-started",
    "after-commit:step-attempt",
    "after-commit:raw",
    "after-commit:settle",
    "after-commit:tool-started",
    "after-commit:tool-result",
    "after-commit:tool-started#2",
    "after-commit:tool-result#2",
    "after-commit:step-attempt#2",
    "after-commit:raw#2",
    "after-commit:settle#2",
    "after-commit:finish",
    "after-commit:seal",
    "mid-write:run-started",
    "mid-write:step-attempt",
    "mid-write:raw",
    "mid-write:settle",
    "mid-write:tool-started",
    "mid-write:tool-result",
    "mid-write:tool-result#2",
    "mid-write:raw#2",
    "mid-write:finish",
    "before-tool:read",
    "after-tool:read",
    "before-tool:bash",
    "after-tool:bash",
]


@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_resume_after_a_kill_at_every_failpoint(workspace, model, failpoint):
    crashed = tiny(workspace, model, "run", "What is this project?", "--allow-bash", failpoint=failpoint)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    resume_and_check(workspace, model)
    path = journal_of(workspace)
    assert path is not None
    state = read_journal(path)
    if failpoint.endswith(("run-started",)) and failpoint.startswith("mid-write"):
        if _STORE[0].kind == "file":
            assert list(path.parent.glob("*.torn-*")), "the torn first transaction was kept in a sidecar"
        else:
            assert path.read_bytes().count(b"\n") == 1, "a transaction killed before its commit left no row"
        return
    reads = [message.content for message in state.transcript if type(message) is ToolMessage and message.tool_call_id.startswith("call_read")]
    if reads:
        assert reads == [README], "the safe tool was replayed, not interrupted"
    bash_results = [message.content for message in state.transcript if type(message) is ToolMessage and message.tool_call_id.startswith("call_bash")]
    if failpoint in ("before-tool:bash", "after-tool:bash", "after-commit:tool-started#2", "mid-write:tool-result#2"):
        assert bash_results == ["Operation interrupted after execution status became unknown; the tool was not replayed."]
    if failpoint == "before-tool:bash":
        assert side_effects(workspace) == 0


def test_settle_from_raw_makes_no_new_request(workspace, model):
    tiny(workspace, model, "run", "What is this project?", "--allow-bash", failpoint="after-commit:raw")
    before = model.request_count
    resumed = tiny(workspace, model, "resume", journal_of(workspace).name.split("_", 1)[1][:-6], "--allow-bash")  # type: ignore[union-attr]
    assert resumed.returncode == 0
    assert "from its stored response" in resumed.stderr
    assert model.request_count - before == 1, "only the step after the tools asks the model again"


@pytest.mark.parametrize("seed", range(12))
def test_resume_after_kills_at_random_moments(tmp_path, seed):
    rng = random.Random(seed)
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "README.md").write_text(README)
    script = ScriptedModel(delay=rng.uniform(0.0, 0.15))
    with LoopbackServer([script] * 10_000) as server:
        process = tiny(workspace, server, "run", "What is this project?", "--allow-bash", "--durability", rng.choice(["fsync", "process"]), wait=False)
        time.sleep(rng.uniform(0.2, 1.6))
        process.send_signal(signal.SIGKILL)
        process.communicate()
        if rng.random() < 0.4 and journal_of(workspace) is not None:
            # Kill the first resume too, then resume again.
            path = journal_of(workspace)
            interrupted = tiny(workspace, server, "resume", path.name.split("_", 1)[1][:-6], "--allow-bash", wait=False)  # type: ignore[union-attr]
            time.sleep(rng.uniform(0.05, 0.6))
            interrupted.send_signal(signal.SIGKILL)
            interrupted.communicate()
        resume_and_check(workspace, server)


# -- Ctrl-C: abort is recorded before anything is cancelled ------------------------------


def _records(path: Path) -> list[str]:
    kinds = []
    for line in path.read_text().splitlines()[1:]:
        value = json.loads(line)
        for fact in value if isinstance(value, list) else [value]:
            if fact["kind"] == "record":
                kinds.append(fact["record"]["type"])
            elif fact["kind"] == "entry":
                kinds.append(fact["entry"].get("result", {}).get("reason", fact["entry"]["message"]["role"]) if fact["entry"]["type"] == "message" else "compaction")
    return kinds


def test_ctrl_c_during_a_model_call(workspace):
    with LoopbackServer([Reply(body=replies.answer("late").body, delay=120)]) as server:
        process = tiny(workspace, server, "run", "hello", wait=False)
        until(lambda: server.request_count > 0, "the request arrived", process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("INTERRUPTED:")
    records = _records(journal_of(workspace))  # type: ignore[arg-type]
    assert records == ["user", "runStarted", "stepAttempt", "abortRequested", "stepFailed", "operationFinished"]
    assert '"outcome":"aborted"' in journal_of(workspace).read_text()  # type: ignore[union-attr]


def test_ctrl_c_during_a_tool_interrupts_it_and_answers_every_call(workspace):
    script = [replies.calls(("bash", json.dumps({"command": "sleep 20; echo late >> side-effects.log"})), ("read", '{"path":"README.md"}'))]
    with LoopbackServer(script) as server:
        process = tiny(workspace, server, "run", "hello", "--allow-bash", wait=False)
        until(lambda: b"toolStarted" in _journal_bytes(workspace), "the tool started", process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    records = _records(journal_of(workspace))  # type: ignore[arg-type]
    assert records[-4:] == ["abortRequested", "interrupted", "aborted", "operationFinished"]
    time.sleep(0.2)
    assert side_effects(workspace) == 0
    state = read_journal(journal_of(workspace))  # type: ignore[arg-type]
    assert transcript_violation(state.transcript) is None


def test_resume_abort_closes_a_crashed_run(workspace, model):
    tiny(workspace, model, "run", "What is this project?", "--allow-bash", failpoint="after-commit:tool-started")
    session = journal_of(workspace).name.split("_", 1)[1][:-6]  # type: ignore[union-attr]
    aborted = tiny(workspace, model, "resume", session, "--abort", "--allow-bash")
    assert aborted.returncode == 0, aborted.stderr
    records = _records(journal_of(workspace))  # type: ignore[arg-type]
    assert records[-4:] == ["abortRequested", "interrupted", "aborted", "operationFinished"]
    assert '"outcome":"aborted"' in journal_of(workspace).read_text()  # type: ignore[union-attr]


def test_blocked_recovery_exits_75_with_a_remedy(workspace, model):
    tiny(workspace, model, "run", "What is this project?", "--allow-bash", failpoint="after-commit:step-attempt")
    session = journal_of(workspace).name.split("_", 1)[1][:-6]  # type: ignore[union-attr]
    blocked = tiny(workspace, model, "resume", session, "--model", "another/model", "--allow-bash")
    assert blocked.returncode == 75
    assert blocked.stderr.strip().splitlines()[-1].startswith("BLOCKED: configuration_changed: ")
    assert "--abort" in blocked.stderr
    dry = tiny(workspace, model, "resume", session, "--dry-run", "--json", "--allow-bash")
    assert json.loads(dry.stdout)["type"] == "startStep"


# -- in the middle of a stream: Ctrl-C keeps the partial bytes, SIGKILL loses only what never landed ----


def _stalled_stream(stall_after: int) -> Reply:
    """A streamed answer that sends ``stall_after`` bytes in irregular pieces, then nothing for a long while."""
    return replies.stream("chat", replies.text_answer("A long answer, " * 20), seed=7, stall_after=stall_after, stall_for=60)


def _wait_for_bytes(server: LoopbackServer, process: subprocess.Popen[str], stall_after: int) -> None:
    """Until the client holds every byte sent before the stall and waits for more.

    The server has written them; the kernel has delivered them (nothing unacknowledged on the server's
    socket, nothing unread on the client's: /proc/net/tcp); and the client is asleep, in its next read.
    """
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here: cannot tell when the client has read the bytes")

    def holds_them() -> bool:
        sent = server.sent_to(0)
        if sent is None or sent.written < stall_after:
            return False
        if any(queues != (0, 0) for queues in _tcp_queues(server.port)):
            return False
        return Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S"

    until(holds_them, f"the client read the first {stall_after} bytes", process)


def _tcp_queues(port: int) -> list[tuple[int, int]]:
    """(unacknowledged, unread) bytes of each established TCP socket to or from ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            ports = {int(address.rsplit(":", 1)[1], 16) for address in fields[1:3]}
            if fields[3] == "01" and port in ports:
                unacknowledged, unread = fields[4].split(":")
                found.append((int(unacknowledged, 16), int(unread, 16)))
    return found


def _journal_bytes(workspace: Path) -> bytes:
    path = journal_of(workspace)
    return path.read_bytes() if path is not None else b""


@pytest.mark.parametrize(
    ("signum", "code", "label", "incomplete", "closed"),
    [
        (signal.SIGINT, 130, "INTERRUPTED:", "interrupted by the user", "Operation aborted"),
        (signal.SIGTERM, 143, "TERMINATED:", "terminated (SIGTERM)", "Operation aborted (SIGTERM)"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_in_the_middle_of_a_stream_keeps_the_partial_bytes(workspace, signum, code, label, incomplete, closed):
    reply = _stalled_stream(stall_after=300)
    with LoopbackServer([reply]) as server:
        process = tiny(workspace, server, "run", "hello", "--stream", wait=False)
        _wait_for_bytes(server, process, 300)
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert err.strip().splitlines()[-1].startswith(label)
    assert ("stopped by SIGTERM" in err) == (signum == signal.SIGTERM)
    assert "Traceback" not in err
    path = journal_of(workspace)
    assert path is not None
    assert _records(path) == ["user", "runStarted", "stepAttempt", "abortRequested", "stepFailed", "operationFinished"]
    ((_, fact),) = list(raw_facts(path))
    assert fact.raw.body is not None
    assert fact.raw.body.encode() == reply.body[:300], "the raw fact holds exactly the bytes that arrived"
    assert fact.raw.incomplete == incomplete, "SIGTERM is recorded as terminated, not as the user's interrupt"
    assert read_journal(path).lastStepFailure.message == closed
    verified = tiny(workspace, server, "verify", path.name.split("_", 1)[1][:-6])
    assert verified.returncode == 0, verified.stderr
    state = read_journal(path)
    assert state.operation.__class__.__name__ == "IdleOperation"
    assert '"outcome":"aborted"' in path.read_text()


def test_sigkill_in_the_middle_of_a_stream_then_resume_asks_again(workspace):
    stalled = _stalled_stream(stall_after=300)
    finished = replies.stream("chat", replies.text_answer("Resumed."), seed=8)
    with LoopbackServer([stalled, finished]) as server:
        process = tiny(workspace, server, "run", "hello", "--stream", wait=False)
        _wait_for_bytes(server, process, 300)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        path = journal_of(workspace)
        assert path is not None
        assert list(raw_facts(path)) == [], "a process that dies mid-stream commits none of it"
        session = path.name.split("_", 1)[1][:-6]
        resumed = tiny(workspace, server, "resume", session)
        assert resumed.returncode == 0, resumed.stderr
        assert server.request_count == 2, "the step is asked again: its first response never landed"
        assert "Resumed." in resumed.stdout
        path = journal_of(workspace)
        assert path is not None
        ((_, fact),) = list(raw_facts(path))
        assert fact.raw.body is not None
        assert fact.raw.body.encode() == finished.body
        state = read_journal(path)
        assert state.operation.__class__.__name__ == "IdleOperation"
        assert transcript_violation(state.transcript) is None
        again = tiny(workspace, server, "resume", session)
        assert again.returncode == 0, again.stderr
        assert "nothing to do" in again.stdout


def test_a_blocked_resume_names_a_changed_base_url_without_its_credentials(workspace, model):
    tiny(workspace, model, "run", "What is this project?", "--allow-bash", failpoint="after-commit:step-attempt")
    session = journal_of(workspace).name.split("_", 1)[1][:-6]  # type: ignore[union-attr]
    with LoopbackServer([replies.answer("elsewhere")]) as other:
        moved = other.base_url.replace("http://", "http://someone:hunter2@")
        blocked = tiny(workspace, model, "resume", session, "--base-url", moved, "--allow-bash")
        assert other.request_count == 0
    assert blocked.returncode == 75, blocked.stderr
    line = blocked.stderr.strip().splitlines()[-1]
    assert line.startswith("BLOCKED: configuration_changed: "), line
    assert model.base_url.split("//", 1)[1] in line and other.base_url.split("//", 1)[1] in line, line
    assert f"--base-url {model.base_url}" in line, "the flag that restores the recorded base URL"
    assert "hunter2" not in blocked.stderr + blocked.stdout
