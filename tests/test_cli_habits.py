"""The habits people bring from llm, Codex and Claude Code (issue 28), and words that say what happens.

- ``tiny-agent "prompt"`` runs (``run`` stays; a misspelt command is not sent as a prompt);
- ``-m`` for ``--model``; ``--system TEXT`` or ``--system @FILE``; ``--retries N`` retries N times;
- one handle length everywhere; plurals; progress lines without ids unless ``--verbose``;
- ``resume`` after an abort says so and how to go on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT, isolated_workspace
from test_replay_cli import call

from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import read_journal

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n")


def journals(workspace: Path) -> list[Path]:
    return sorted((workspace.parent / "sessions").glob("*.jsonl"))


def test_a_bare_prompt_runs(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.answer("Hello there."), replies.answer("Again.")]) as server:
        code, out, err = call(capsys, "Say hello.", "--base-url", server.base_url, "-m", "m", "--retries", "0")
        assert (code, out) == (0, "Hello there.\n"), err
        code, out, err = call(capsys, "-m", "m", "--base-url", server.base_url, "Once more.", "--continue")
        assert (code, out) == (0, "Again.\n"), err
    (journal,) = journals(workspace)
    state = read_journal(journal)
    assert [message.content for message in state.transcript] == ["Say hello.", "Hello there.", "Once more.", "Again."]
    assert state.header.model == "m"


@pytest.mark.parametrize("words", [["-h"], ["run", "-h"], ["replay", "-h"]])
def test_h_is_help(capsys, workspace: Path, words: list[str]) -> None:
    code, out, _ = call(capsys, *words)
    assert code == 0 and out.startswith("Usage: tiny-agent")


def test_a_misspelt_command_is_not_sent_to_a_model(capsys, workspace: Path) -> None:
    code, out, err = call(capsys, "sesions", "--all")
    assert code == 2 and out == ""
    assert err == "USAGE: no command 'sesions'; did you mean sessions? (to send it as a prompt: tiny-agent run sesions)\n"
    assert journals(workspace) == []


def test_options_before_a_command_are_not_a_prompt(capsys, workspace: Path) -> None:
    code, out, err = call(capsys, "--json", "sessions")
    assert code == 2 and out == ""
    assert err == "USAGE: options go after the command (tiny-agent sessions [OPTIONS]); a prompt 'sessions' needs run\n"


def test_a_prompt_that_is_a_command_name_goes_through_run(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.answer("A list.")]) as server:
        code, out, _ = call(capsys, "run", "sessions", "--base-url", server.base_url, "-m", "m")
    assert (code, out) == (0, "A list.\n")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("Be terse.", "Be terse."),
        ("@prompt.txt", "From a file.\n"),
        ("prompt.txt", "From a file.\n"),
        ("terse", "terse"),
    ],
    ids=["text", "@file", "a file path as before", "one word"],
)
def test_system_takes_text_or_a_file(capsys, workspace: Path, given: str, expected: str) -> None:
    (workspace / "prompt.txt").write_text("From a file.\n")
    with LoopbackServer([replies.answer("ok")]) as server:
        code, _, err = call(capsys, "run", "hi", "--base-url", server.base_url, "-m", "m", "--system", given)
        assert code == 0, err
        request = server.requests[0]
    assert request.body["messages"][0] == {"role": "system", "content": expected}


@pytest.mark.parametrize("given", ["@missing.txt", "prompts/missing.txt"])
def test_system_naming_a_missing_file_is_not_found(capsys, workspace: Path, given: str) -> None:
    code, _, err = call(capsys, "run", "hi", "--base-url", "http://127.0.0.1:9/v1", "-m", "m", "--system", given)
    assert code == 66
    assert err.startswith("NOT_FOUND: --system " + given)
    assert journals(workspace) == []


def test_retries_n_is_n_retries(capsys, workspace: Path) -> None:
    script = [replies.failure("chat", 503), replies.answer("ok")]
    with LoopbackServer(script) as server:
        code, _, err = call(capsys, "run", "hi", "--base-url", server.base_url, "-m", "m", "--retries", "0", "--no-stream")
        assert code == 1 and server.request_count == 1
        assert "attempts exhausted: 1 of 1" in err
    with LoopbackServer(script) as server:
        code, out, err = call(
            capsys, "run", "hi", "--base-url", server.base_url, "-m", "m", "--retries", "1", "--retry-wait", "0", "--no-stream"
        )
        assert (code, out) == (0, "ok\n"), err
        assert server.request_count == 2
        assert "before attempt 2 of 2" in err


def test_retries_keep_the_journals_attempt_cap(capsys, workspace: Path) -> None:
    code, _, err = call(capsys, "run", "hi", "--retries", "16")
    assert code == 2 and "--retries" in err


def test_handles_have_one_length_everywhere(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.answer("one"), replies.answer("two")]) as server:
        flags = ("--base-url", server.base_url, "-m", "m")
        _, _, first = call(capsys, "run", "first", *flags)
        _, _, second = call(capsys, "run", "second", *flags)
    shown = [re.search(r"session ([0-9a-f]+) ·", err)[1] for err in (first, second)]  # type: ignore[index]
    code, out, _ = call(capsys, "sessions")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert sorted(listed) == sorted(shown)
    assert {len(handle) for handle in shown} == {4}


def test_progress_lines_name_steps_not_ids_unless_verbose(capsys, workspace: Path) -> None:
    script = [replies.read(), replies.answer("done")]
    with LoopbackServer(script) as server:
        code, _, err = call(capsys, "run", "go", "--base-url", server.base_url, "-m", "m")
    assert code == 0
    assert "ask the model (step 1 of the run)" in err and "ask the model (step 2 of the run)" in err
    assert not UUID.search(err), err
    with LoopbackServer(script) as server:
        code, _, err = call(capsys, "run", "go", "--base-url", server.base_url, "-m", "m", "--verbose")
    assert code == 0
    assert re.search(r"ask the model \(step 1 of the run, context through " + UUID.pattern, err), err


def test_plurals(capsys, workspace: Path) -> None:
    from tiny_agent.oversight.render import counted

    assert [counted(n, "session") for n in (0, 1, 2, 1234)] == ["0 sessions", "1 session", "2 sessions", "1,234 sessions"]
    with LoopbackServer([replies.answer("one")]) as server:
        call(capsys, "run", "first", "--base-url", server.base_url, "-m", "m")
    code, out, _ = call(capsys, "report")
    assert code == 0 and " 1 session (" in out.splitlines()[0]


def test_resume_after_an_abort_says_how_to_go_on(tmp_path: Path, workspace: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_")}
    env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_SESSIONS_DIR=str(tmp_path / "sessions"))
    slow = Reply(body=replies.answer("too late").body, delay=30)
    with LoopbackServer([slow]) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "tiny_agent", "run", "take your time", "--base-url", server.base_url, "-m", "m", "--retries", "0"],
            cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 60
        while server.request_count == 0 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    handle = re.search(r"session ([0-9a-f]+) ·", err)[1]  # type: ignore[index]
    done = subprocess.run(
        [sys.executable, "-m", "tiny_agent", "resume", handle], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "the last run of" in done.stdout and "was aborted" in done.stdout
    assert f"`tiny-agent run PROMPT --session {handle}`" in done.stdout
    assert f"`tiny-agent chat --session {handle}`" in done.stdout
    planned = subprocess.run(
        [sys.executable, "-m", "tiny_agent", "resume", handle, "--dry-run"], cwd=workspace, env=env, capture_output=True, text=True,
        timeout=60,
    )
    assert planned.returncode == 0 and f"the last run of session {handle} was aborted" in planned.stdout, planned
