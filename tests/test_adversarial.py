"""A standing adversarial suite (issue 16): every case asserts the exit code, the one-line message,
and that the journal still verifies or resumes.

Fast by default.  ``TINY_AGENT_LONG=1`` adds the long cases: a mutation sweep over journals written
by every provider path, and more random provider bodies.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT, isolated_workspace, until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz import mutate
from test_replay_cli import call

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.state import IdleOperation
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.journal import raw_facts, read_journal

LONG = bool(os.environ.get("TINY_AGENT_LONG"))
SECRET = "sk-adversary-0123456789abcdefghijklmnop"


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n")


def sessions_of(workspace: Path) -> list[Path]:
    return sorted((workspace.parent / "sessions").glob("*.jsonl"))


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("· ")]
    assert len(lines) == 1, err
    return lines[0]


def run(capsys, server: LoopbackServer, *flags: str, prompt: str = "go") -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", "m", "--durability", "process", "--retries", "0", "--no-stream"]
    return call(capsys, "run", prompt, *base, *flags)


def assert_resumable(path: Path) -> None:
    state = read_journal(path)
    assert transcript_violation(state.transcript) is None
    assert verify(path).status in ("ok", "open-tail")


# -- secrets a provider echoes (D2, D12) -------------------------------------------------------------

ECHOES = {
    "401": Reply(status=401, body=json.dumps({"error": {"message": f"Incorrect API key provided: Bearer {SECRET}"}}).encode()),
    "200-content": replies.answer(f"your key is {SECRET}"),
    "200-reasoning": Reply(body=replies.body({"role": "assistant", "content": "ok", "reasoning": f"the key {SECRET}"})),
    "500-text": Reply(status=500, body=f"upstream said: Authorization: Bearer {SECRET}".encode(), content_type="text/plain"),
    "non-json": Reply(body=f"<html>{SECRET}</html>".encode(), content_type="text/html"),
}


@pytest.mark.parametrize("shape", list(ECHOES))
def test_an_echoed_key_reaches_no_file_and_no_terminal(capsys, workspace: Path, monkeypatch, shape: str) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", SECRET)
    with LoopbackServer([ECHOES[shape]]) as server:
        code, out, err = run(capsys, server)
    assert SECRET not in out and SECRET not in err
    for file in workspace.parent.rglob("*"):
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file
    (path,) = sessions_of(workspace)
    ((_, raw),) = list(raw_facts(path))
    assert raw.raw.redactions and raw.raw.redactions >= 1
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["attempts"][0]["response"]["redactions"] >= 1
    assert_resumable(path)


def test_base_url_credentials_never_reach_the_journal(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.answer("hi")]) as server:
        url = server.base_url.replace("http://", "http://user:hunter2-secret-value@") + "?api_key=qwertyuiop-secret-12345"
        code, _, err = call(capsys, "run", "go", "--base-url", url, "--model", "m", "--no-stream", "--retries", "0")
    assert code == 0, err
    (path,) = sessions_of(workspace)
    text = path.read_text()
    assert "hunter2-secret-value" not in text and "qwertyuiop-secret-12345" not in text


# -- hostile tool arguments (D1, D13) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ['{"path":"\\ud800"}', '{"path":"README.md","path":"../../etc/passwd"}', '{"path":"\\udfff\\ud800"}'],
    ids=["lone-surrogate", "duplicate-keys", "reversed-pair"],
)
def test_hostile_arguments_are_answered_and_the_session_goes_on(capsys, workspace: Path, arguments: str) -> None:
    script = [replies.calls(("read", arguments)), replies.answer("Understood.")]
    with LoopbackServer(script) as server:
        code, out, err = run(capsys, server)
    assert (code, out) == (0, "Understood.\n"), err
    (path,) = sessions_of(workspace)
    state = read_journal(path)
    assert state.transcript[2].content == "Error: Tool arguments were invalid; the tool was not executed."
    code, _, err = call(capsys, "resume", str(path), "--dry-run")
    assert code == 0, err


# -- hostile file types (D8, D13) -----------------------------------------------------------------------


def test_read_of_a_fifo_answers_at_once(capsys, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    script = [replies.read("pipe"), replies.answer("No.")]
    with LoopbackServer(script) as server:
        code, _, err = run(capsys, server)
    assert code == 0, err
    (path,) = sessions_of(workspace)
    assert "not a regular file" in read_journal(path).transcript[2].content


def test_a_fifo_named_like_the_index_does_not_hang_sessions(capsys, workspace: Path) -> None:
    store = workspace.parent / "sessions"
    store.mkdir()
    os.mkfifo(store / ".tiny-agent-index.json")
    code, out, err = call(capsys, "sessions", "--all", "--json")
    assert (code, json.loads(out)) == (0, []), err


def test_resume_of_a_path_that_is_not_a_journal_creates_nothing(capsys, workspace: Path) -> None:
    target = workspace / "notes.txt"
    target.write_text("not a journal\n")
    code, _, err = call(capsys, "resume", str(target))
    assert code == 2
    assert one_line(err).startswith("USAGE:")
    assert sorted(path.name for path in workspace.iterdir()) == ["README.md", "notes.txt"]


def test_bad_prompt_bytes_and_a_malformed_url_leave_nothing_behind(workspace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    bad = subprocess.run([sys.executable, "-m", "tiny_agent", "run", b"\xff".decode("utf-8", "surrogateescape"), "--base-url",
                          "http://127.0.0.1:9/v1", "--model", "m"], cwd=workspace, env=env, capture_output=True, text=True)
    assert bad.returncode == 2, bad.stderr
    assert one_line(bad.stderr).startswith("USAGE:")
    url = subprocess.run([sys.executable, "-m", "tiny_agent", "run", "hi", "--base-url", "http://[::1", "--model", "m"],
                         cwd=workspace, env=env, capture_output=True, text=True)
    assert url.returncode == 2, url.stderr
    assert one_line(url.stderr).startswith(("CONFIG:", "USAGE:"))
    assert not (workspace.parent / "sessions").exists() or not any((workspace.parent / "sessions").iterdir())


# -- disk full and read-only stores (D4, D5, D10) --------------------------------------------------------


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (root only); skip, saying why, when it cannot be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for disk-full tests: {mounted.stderr.strip() or 'mount failed'}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_full_disk_when_creating_a_session_is_an_io_error_and_leaves_nothing(capsys, workspace, monkeypatch) -> None:
    with small_disk(workspace.parent / "disk", "16k") as disk:
        monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(disk / "sessions"))
        (disk / "filler").write_bytes(b"x" * 12 * 1024)
        with contextlib.suppress(OSError):
            (disk / "filler2").write_bytes(b"x" * 8 * 1024)
        with LoopbackServer([replies.answer("hi")]) as server:
            code, _, err = run(capsys, server)
        assert code == 74, err
        assert one_line(err).startswith("IO_ERROR:")
        leftovers = [path.name for path in (disk / "sessions").iterdir()] if (disk / "sessions").exists() else []
        assert leftovers == [], leftovers


def test_a_full_disk_mid_run_is_an_io_error_and_the_journal_resumes(capsys, workspace, monkeypatch) -> None:
    (workspace / "big.txt").write_text("y" * 200_000)
    with small_disk(workspace.parent / "disk", "128k") as disk:
        monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(disk / "sessions"))
        with LoopbackServer([replies.read("big.txt"), replies.answer("done")]) as server:
            code, _, err = run(capsys, server)
            assert code == 74, err
            assert one_line(err).startswith("IO_ERROR:")
            assert "a bug" not in err
            (path,) = sorted((disk / "sessions").glob("*.jsonl"))
            assert_resumable(path)
            assert [entry.name for entry in (disk / "sessions").iterdir() if not entry.name.endswith(".jsonl")] in (
                [],
                [".tiny-agent-index.json"],
            )
            shutil.copy(path, workspace.parent / "moved.jsonl")
    moved = workspace.parent / "moved.jsonl"
    with LoopbackServer([replies.answer("done")]) as server:
        code, _, err = call(capsys, "resume", str(moved), "--base-url", server.base_url, "--model", "m", "--no-stream")
    assert code in (0, 1), err
    assert type(read_journal(moved).operation) is IdleOperation


def test_a_failed_closing_seal_still_prints_the_answer_and_resume_seals(capsys, workspace, monkeypatch) -> None:
    monkeypatch.setenv("TINY_AGENT_FAILPOINT", "enospc:seal")
    with LoopbackServer([replies.answer("The answer.")]) as server:
        code, out, err = run(capsys, server)
    assert out == "The answer.\n"
    assert code == 74
    assert one_line(err).startswith("IO_ERROR:") and "not sealed" in err
    monkeypatch.delenv("TINY_AGENT_FAILPOINT")
    (path,) = sessions_of(workspace)
    assert verify(path).status == "open-tail"
    code, out, _ = call(capsys, "resume", str(path))
    assert code == 0
    assert verify(path).status == "ok"


def test_a_read_only_store_is_an_io_error(capsys, workspace, monkeypatch) -> None:
    with small_disk(workspace.parent / "disk", "64k") as disk:
        (disk / "sessions").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(disk / "sessions"))
        with LoopbackServer([replies.answer("hi")]) as server:
            code, _, err = run(capsys, server)
        assert code == 74, err
        assert one_line(err).startswith("IO_ERROR:")
        code, out, err = call(capsys, "sessions", "--all")
        assert code == 0, err


# -- SIGTERM (D13) -----------------------------------------------------------------------------------------


def test_sigterm_records_the_abort_and_exits_143(workspace: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_FAILPOINT")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    with LoopbackServer([Reply(body=replies.answer("late").body, delay=30)]) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "tiny_agent", "run", "hi", "--base-url", server.base_url, "--model", "m", "--no-stream"],
            cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        until(lambda: server.request_count > 0, "the request arrived", process)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 143
    assert err.strip().splitlines()[-1].startswith("TERMINATED:")
    (path,) = sessions_of(workspace)
    assert '"outcome":"aborted"' in path.read_text()
    assert verify(path).status == "ok"


# -- any provider body: settles or fails durably; planning never crashes -----------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "choices",
        "message", "finish_reason", "usage", "id", "function", "name", "arguments", "type", "error"]), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200 if LONG else 40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=JSONISH, status=st.sampled_from([200, 200, 200, 400, 500]))
def test_any_provider_body_settles_or_fails_durably(tmp_path_factory, body, status) -> None:
    from fake_provider import FakeReply
    from test_driver import _driver

    from tiny_agent.agent.recovery import CurrentConfiguration, explain, plan_recovery

    directory = tmp_path_factory.mktemp("body")
    wrapped = {"choices": [{"message": body, "finish_reason": "stop"}]} if status == 200 else body
    reply = FakeReply(status=status, body=json.dumps(wrapped).encode())
    driver, _ = _driver(directory, [reply, FakeReply(status=200, body=replies.answer("ok").body)] * 3)
    result = driver.run("go")
    driver.writer.close()
    assert result.status in ("completed", "failed")
    state = read_journal(driver.writer.path)
    assert type(state.operation) is IdleOperation
    current = CurrentConfiguration(configurationDigest="sha256:" + "0" * 64, environmentIdentity="x", tools=[])
    explain(plan_recovery(state, current), state)


# -- a mutation sweep over journals the new provider paths wrote ---------------------------------------------


def _journals_from_every_path(capsys, workspace: Path, monkeypatch) -> list[bytes]:
    written = []
    scripts = {
        "chat-stream": (["--stream"], [replies.stream("chat", replies.one_call(), seed=3), replies.stream("chat", replies.text_answer())]),
        "anthropic": (["--provider", "anthropic", "--stream"], [replies.stream("anthropic", replies.one_call()),
                                                                  replies.stream("anthropic", replies.text_answer())]),
        "responses": (["--provider", "openai-responses"], [replies.whole("responses", replies.text_answer())]),
        "retry": ([], [replies.failure("chat", 429, retry_after="0"), replies.answer("ok")]),
    }
    monkeypatch.setenv("TINY_AGENT_API_KEY", SECRET)
    for flags, script in scripts.values():
        with LoopbackServer(script) as server:
            call(capsys, "run", "go", "--base-url", server.base_url, "--model", "m", "--retries", "1", "--retry-wait", "0.01", *flags)
        written.append(sessions_of(workspace)[-1].read_bytes())
        for path in sessions_of(workspace):
            path.unlink()
    return written


def test_mutations_of_journals_from_every_provider_path_never_escape(capsys, workspace, monkeypatch) -> None:
    rounds = 5000 if LONG else 300
    journals = _journals_from_every_path(capsys, workspace, monkeypatch)
    rng = random.Random(16)
    for _ in range(rounds):
        original = rng.choice(journals)
        mutated = mutate(original, rng.randrange(2**32), rng.randint(1, 3))
        try:
            state = reduce_bytes(mutated)
        except CorruptionError:
            continue
        original_state = reduce_bytes(original)
        prefix = original_state.transcript[: len(state.transcript)]
        assert state.transcript == prefix, "a changed journal reduced to a different transcript"
