"""Continuing a v2 journal never loses a response: real processes, SIGKILL at failpoints, a model on loopback.

A v2 journal cannot hold the ``raw`` fact our writer journals every response
into before settling it.  So whatever needs no model call (running the tool
the model asked for, aborting, finishing) is still appended to the v2 file as
v2 facts, and anything that would ask the model stops before the request with
exit 75 and the remedy, ``tiny-agent upgrade``, which continues the session in
a new v3 journal and leaves the v2 file as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import replies
from builders import RunWriter
from conftest import PROJECT_ROOT

from tiny_agent.journal.facts import HeaderLine
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.state import IdleOperation, RunOperation
from tiny_agent.journal.transcript import ToolMessage
from tiny_agent.loopback import LoopbackServer
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.files.disk import journal_name, lock_path
from tiny_agent.stores.journal import JournalWriter, raw_facts, read_journal

CREATED = 1_787_371_200_000
README = "# Example\n\nA project that prints hi.\n"


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text(README)
    return root


def sessions(workspace: Path) -> Path:
    return workspace.parent / "sessions"


def tiny(workspace: Path, server: LoopbackServer, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENROUTER_", "OPENAI_"))}
    env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_SESSIONS_DIR=str(sessions(workspace)))
    if failpoint:
        env["TINY_AGENT_FAILPOINT"] = failpoint
    flags = ["--provider", "custom", "--base-url", server.base_url, "--model", "test/model"] if args[0] in ("run", "resume") else []
    command = [sys.executable, "-m", "tiny_agent", *args, *flags]
    return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def v2_asking_for_a_tool(workspace: Path) -> Path:
    """A v2 journal (another port's) whose open run's model asked to read README.md: no tool started yet."""
    directory = sessions(workspace)
    directory.mkdir(mode=0o700)
    session_id = uuid7(CREATED)
    path = directory / journal_name(session_id, CREATED)
    header = HeaderLine(
        version=2, id=session_id, createdAt=CREATED, cwd=str(workspace), provider="custom", model="test/model",
        environmentIdentity=os.path.realpath(workspace),
    )
    writer = JournalWriter.create(path, header, durability="process")
    run = RunWriter(writer)
    run.start("What is this project?")
    run.attempt()
    run.call_tools([("read", '{"path":"README.md"}')])
    writer.close()
    return path


def others(workspace: Path, v2: Path) -> list[Path]:
    return [path for path in sorted(sessions(workspace).glob("*.jsonl")) if path != v2]


def test_a_killed_resume_of_a_v2_journal_then_upgrade_never_pays_twice(workspace: Path) -> None:
    v2 = v2_asking_for_a_tool(workspace)
    with LoopbackServer([replies.answer("It prints hi.")]) as server:
        # The tool runs (no model call), its result lands in the v2 file as a v2 fact, and the process dies.
        killed = tiny(workspace, server, "resume", str(v2), failpoint="after-commit:tool-result")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        state = read_journal(v2)
        assert state.version == 2 and [m.content for m in state.transcript if type(m) is ToolMessage] == [README]
        after_tool = v2.read_bytes()

        # The next thing is a model call: refused before the request, nothing written, the remedy named.
        blocked = tiny(workspace, server, "resume", str(v2))
        assert blocked.returncode == 75, blocked.stderr
        last = blocked.stderr.strip().splitlines()[-1]
        assert last.startswith("BLOCKED: ") and f"`tiny-agent upgrade {v2}`" in last and "no model call was made" in last
        assert v2.read_bytes() == after_tool and not lock_path(v2).exists()
        dry = tiny(workspace, server, "resume", str(v2), "--dry-run")
        assert dry.returncode == 75 and dry.stdout.startswith("next: ask the model")
        assert server.request_count == 0

        # An upgrade killed before its journal is linked into place leaves no session behind.
        torn = tiny(workspace, server, "upgrade", str(v2), failpoint="before-link:upgrade")
        assert torn.returncode == -signal.SIGKILL
        assert others(workspace, v2) == []

        made = tiny(workspace, server, "upgrade", str(v2), "--json")
        assert made.returncode == 0, made.stderr
        upgraded = Path(json.loads(made.stdout)["path"])
        assert others(workspace, v2) == [upgraded]

        resumed = tiny(workspace, server, "resume", json.loads(made.stdout)["handle"])
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "It prints hi.\n"
        assert server.request_count == 1, "one request, and its response is on record"
    assert len(list(raw_facts(upgraded))) == 1
    assert v2.read_bytes() == after_tool, "the v2 file is exactly as the last v2 writer left it"
    final = read_journal(upgraded)
    assert type(final.operation) is IdleOperation
    assert [m.content for m in final.transcript][-1] == "It prints hi."
    assert verify(upgraded).status == "ok" and "bytes are as copied" in verify(upgraded).detail


def test_a_v2_journal_is_aborted_or_refused_without_a_model(workspace: Path) -> None:
    v2 = v2_asking_for_a_tool(workspace)
    with LoopbackServer([replies.answer("unused")]) as server:
        before = v2.read_bytes()
        more = tiny(workspace, server, "run", "and then?", "--session", str(v2))
        assert more.returncode == 75 and "is a v2 journal" in more.stderr
        assert v2.read_bytes() == before
        aborted = tiny(workspace, server, "resume", str(v2), "--abort")
        assert aborted.returncode == 0, aborted.stderr
        assert server.request_count == 0
    state = read_journal(v2)
    assert state.version == 2 and type(state.operation) is IdleOperation
    assert state.lastOutcome is not None and state.lastOutcome.outcome == "aborted"
    assert v2.read_bytes().startswith(before)


def test_an_upgraded_open_run_goes_on_in_v3(workspace: Path) -> None:
    v2 = v2_asking_for_a_tool(workspace)
    with LoopbackServer([replies.answer("It prints hi.")]) as server:
        made = tiny(workspace, server, "upgrade", str(v2), "--json")
        upgraded = Path(json.loads(made.stdout)["path"])
        assert type(read_journal(upgraded).operation) is RunOperation
        resumed = tiny(workspace, server, "resume", str(upgraded))
        assert resumed.returncode == 0, resumed.stderr
        assert server.request_count == 1
    assert read_journal(upgraded).version == 3


# -- the attempt cap follows the journal's version, whatever --retries says ------------------------------


def _open_second_attempt(path: Path, version: int) -> None:
    from builders import new_writer

    writer = new_writer(path, version=version)
    run = RunWriter(writer)
    run.start("hi")
    run.attempt(1)
    run.attempt(2)
    writer.close(seal=False)


@pytest.mark.parametrize(("version", "planned"), [(2, {"type": "blocked", "reason": "attempts_exhausted"}), (3, "startStep")])
def test_retries_3_never_plans_a_third_attempt_in_a_v2_journal(capsys, tmp_path: Path, version: int, planned: object) -> None:
    from builders import SNAPSHOT_DIGEST
    from test_replay_cli import call

    path = tmp_path / "s.jsonl"
    _open_second_attempt(path, version)
    current = tmp_path / "current.json"
    current.write_text(json.dumps({"configurationDigest": SNAPSHOT_DIGEST, "environmentIdentity": "fixture", "tools": [], "maxAttempts": 3}))
    code, out, _ = call(capsys, "resume", str(path), "--dry-run", "--json", "--current-config", str(current))
    plan = json.loads(out)
    if version == 2:
        assert (code, plan) == (75, planned)
    else:
        assert (plan["type"], plan["attempt"]) == (planned, 3)
    code, out, _ = call(capsys, "resume", str(path), "--dry-run", "--json", "--retries", "3", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    if version == 2:
        assert (code, json.loads(out)) == (75, planned), "the v2 cap, before any configuration check"
