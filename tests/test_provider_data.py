"""No INTERNAL (exit 70) from what a provider sends (issue 22): usage a journal cannot total, negative
counters, and a property test over usage, body sizes and stream cut points for all three APIs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
import replies
from conftest import PROJECT_ROOT, isolated_workspace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_replay_cli import call

from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.state import IdleOperation
from tiny_agent.loopback import APIS, Answer, LoopbackServer, Reply, Tokens
from tiny_agent.stores.journal import read_journal

OVERFLOW = "the provider reported usage.input 100, which would take the session's total"


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n")


def counted(prompt: int, completion: int = 1) -> Reply:
    """A Chat answer "ok" reporting these counters (no cache)."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return Reply(body=replies.body({"role": "assistant", "content": "ok"}, usage=usage))


def run(capsys, server: LoopbackServer, *flags: str) -> tuple[int, str, str]:
    return call(capsys, "run", "hi", "--base-url", server.base_url, "--model", "m", "--retries", "0", "--no-stream", *flags)


def journal(workspace: Path) -> Path:
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    return path


def test_usage_past_what_a_journal_can_total_fails_the_step_and_the_session_goes_on(capsys, workspace: Path) -> None:
    with LoopbackServer([counted(MAX_SAFE_INTEGER), counted(100), counted(0, 0)]) as server:
        assert run(capsys, server)[0] == 0
        code, _, err = run(capsys, server, "--continue")
        assert code == 1, err
        assert f"FAILED: {OVERFLOW} ({MAX_SAFE_INTEGER}) past {MAX_SAFE_INTEGER}" in err
        code, out, err = run(capsys, server, "--continue")
        assert (code, out) == (0, "ok\n"), err
    state = read_journal(journal(workspace))
    assert type(state.operation) is IdleOperation
    assert state.usage.input == MAX_SAFE_INTEGER
    assert state.lastStepFailure is None or state.lastStepFailure.code == "usage_overflow"
    code, out, err = call(capsys, "audit", str(journal(workspace)))
    assert code == 0, out + err
    assert "would have taken the session's totals past what a journal holds" in out
    assert call(capsys, "resume", str(journal(workspace)), "--dry-run")[0] == 0


def test_a_session_left_open_with_such_usage_on_record_is_resumed(tmp_path: Path) -> None:
    """A crash after the response landed (as the old code left sessions, exiting 70): resume settles it as a failure."""
    work = tmp_path / "work"
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_") and not key.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_SESSIONS_DIR=str(tmp_path / "sessions"), XDG_CONFIG_HOME=str(tmp_path))

    def tiny(*args: str, failpoint: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tiny_agent", *args]
        return subprocess.run(command, cwd=work, env={**env, "TINY_AGENT_FAILPOINT": failpoint}, capture_output=True, text=True, timeout=120)

    with LoopbackServer([counted(MAX_SAFE_INTEGER), counted(100)]) as server:
        flags = ("--base-url", server.base_url, "--model", "m", "--no-stream")
        assert tiny("run", "hi", *flags).returncode == 0
        crashed = tiny("run", "again", "--continue", *flags, failpoint="after-commit:raw")
        assert crashed.returncode not in (0, 1, 70), crashed.stderr
    (path,) = (tmp_path / "sessions").glob("*.jsonl")
    assert type(read_journal(path).operation) is not IdleOperation
    planned = tiny("resume", str(path), "--dry-run", "--json")
    assert (planned.returncode, json.loads(planned.stdout)["type"]) == (0, "settleFromRaw"), planned.stderr
    resumed = tiny("resume", str(path))
    assert resumed.returncode == 1, resumed.stderr
    assert OVERFLOW in resumed.stderr
    assert type(read_journal(path).operation) is IdleOperation


def test_a_compaction_whose_usage_cannot_be_totalled_fails_and_leaves_the_session_as_it_was(capsys, workspace: Path) -> None:
    with LoopbackServer([counted(MAX_SAFE_INTEGER), counted(100)]) as server:
        assert run(capsys, server)[0] == 0
        before = read_journal(journal(workspace)).activeContext
        code, _, err = call(capsys, "compact", str(journal(workspace)), "--keep-tokens", "0", "--base-url", server.base_url, "--model", "m", "--retries", "0", "--no-stream")
    assert code == 1, err
    assert OVERFLOW in err
    state = read_journal(journal(workspace))
    assert type(state.operation) is IdleOperation
    assert state.activeContext == before, "no summary replaced the context"


@pytest.mark.parametrize("stream", [False, True])
def test_negative_token_counters_in_a_chat_body_fail_the_step_naming_them(capsys, workspace: Path, stream: bool) -> None:
    answer = Answer(text="ok", tokens=Tokens(input=-5, output=1, cache_read=0))
    reply = replies.stream("chat", answer) if stream else replies.whole("chat", answer)
    with LoopbackServer([reply]) as server:
        code, _, err = run(capsys, server, "--stream" if stream else "--no-stream")
    assert code == 1
    assert "usage.prompt_tokens is " in err and "(expected a non-negative integer)" in err
    assert type(read_journal(journal(workspace)).operation) is IdleOperation


# -- the property: whatever the provider sends, never 70, never a session left open ----------------------------

COUNTERS = st.one_of(
    st.integers(0, 5000),
    st.integers(MAX_SAFE_INTEGER - 3, MAX_SAFE_INTEGER + 3),
    st.integers(MAX_SAFE_INTEGER // 2 - 1, MAX_SAFE_INTEGER // 2 + 1),
    st.integers(-3, -1),
)


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[Reply, str]:
    """One reply in one API (whole or streamed, maybe cut, maybe large), and the API its request goes to."""
    api = draw(st.sampled_from(APIS))
    tokens = Tokens(input=draw(COUNTERS), output=draw(COUNTERS), cache_read=draw(COUNTERS), cache_write=draw(COUNTERS))
    answer = Answer(text="x" * draw(st.integers(0, 200_000)) or None, tokens=tokens)
    reply = replies.stream(api, answer, seed=draw(st.integers(0, 99))) if draw(st.booleans()) else replies.whole(api, answer)
    if draw(st.booleans()):
        reply = msgspec.structs.replace(reply, break_off_after=draw(st.integers(0, len(reply.body))))
    return reply, api


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(turns=st.lists(exchanges(), min_size=1, max_size=3), cap=st.sampled_from([None, 1000, 150_000]))
def test_no_provider_data_gives_internal_or_leaves_a_session_open(capsys, tmp_path: Path, turns, cap) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        sessions = str(Path(scratch) / "sessions")
        with LoopbackServer([reply for reply, _ in turns]) as server:
            for number, (reply, api) in enumerate(turns):
                flags = ["--api", api, "--retries", "0", "--sessions-dir", sessions]
                flags += ["--stream" if reply.pieces is not None else "--no-stream"]
                flags += ["--max-response-bytes", str(cap)] if cap else []
                flags += ["--continue"] if number else []
                code, _, err = call(capsys, "run", "hi", "--base-url", server.base_url, "--model", "m", *flags)
                assert code in (0, 1), err
        (path,) = Path(sessions).glob("*.jsonl")
        assert type(read_journal(path).operation) is IdleOperation
        code, _, err = call(capsys, "resume", str(path), "--dry-run", "--sessions-dir", sessions)
        assert code == 0, err


def test_the_property_reaches_the_journal_limit(capsys, workspace: Path) -> None:
    """The strategies above do reach past a journal's total (so the property is not vacuous there)."""
    big = Tokens(input=MAX_SAFE_INTEGER // 2 + 1, output=0, cache_read=0, cache_write=0)
    script = [replies.whole("anthropic", Answer(text="ok", tokens=big))] * 2
    with LoopbackServer(script) as server:
        assert run(capsys, server, "--api", "anthropic")[0] == 0
        code, _, err = run(capsys, server, "--api", "anthropic", "--continue")
    assert code == 1 and "would take the session's total" in err
