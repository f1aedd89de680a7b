"""tiny-agent against a real llama.cpp ``llama-server`` (issue 24 item 1), as a user runs it: a plain and a
streamed turn, grammar-constrained tool calls (``tiny-tools``), and a server killed mid-stream, then brought
back for ``resume``.  Skipped, saying why, without llama-server (.ci/build-llama builds it).

The models have random weights: their text is gibberish and an answer may end at any token, so each test
accepts the outcomes a real model may give (a text answer, a cut-off one, an empty one) and checks that
tiny-agent says the same thing everywhere, not what the model said.  A run offers six tools (about 3,700
tokens of definitions), so every server here is ``tiny-tools`` with its trained 16,384-token context
(``tiny`` and ``tiny-slow`` were trained on 2,048); to be killed mid-stream it runs with ``--ignore-eos``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from conftest import PROJECT_ROOT
from llama_server import LlamaServer, llama_workspace, require
from test_wire_e2e import assert_sound

from tiny_agent.journal.state import RunOperation
from tiny_agent.journal.transcript import AssistantMessage, ToolMessage
from tiny_agent.stores.journal import raw_facts, read_journal

pytest_plugins = ["llama_server"]

ENDINGS = ("FAILED: the answer was cut off by the model's token limit", "FAILED: the model's answer was empty")
"""How a run ends, besides completing, when the model's answer cannot complete it."""


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return llama_workspace(tmp_path, monkeypatch, "# Example\n\nA project that prints hi.\n")


def started(workspace: Path, *args: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key.startswith(("PATH", "HOME", "XDG_", "TINY_AGENT_"))}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    command = [sys.executable, "-m", "tiny_agent", *args]
    return subprocess.Popen(command, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def tiny_agent(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    process = started(workspace, *args)
    out, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def flags(server: LlamaServer, model: str, *more: str) -> list[str]:
    return ["--provider", "llamacpp", "--base-url", server.api_url, "-m", model, "--retry-wait", "0.2", "--read-timeout", "120", *more]


MODEL = "tiny-tools"
CONTEXT = 16384
LONG = ("--ignore-eos",)
"""Generates to the request's max_tokens (a few hundred tokens a second here): long enough to be killed mid-stream."""


def generating(server: LlamaServer) -> None:
    """Until the server has been generating for a while (it logs ``n_gen = N`` every few seconds of a long answer)."""
    deadline = time.monotonic() + 120
    while "n_gen =" not in server.log():
        assert time.monotonic() < deadline, server.log()[-2000:]
        time.sleep(0.05)


def only_journal(workspace: Path) -> Path:
    (path,) = sorted((workspace.parent / "sessions").glob("*.jsonl"))
    return path


def check_ending(done: subprocess.CompletedProcess[str], path: Path) -> None:
    """The exit code, stdout and the last stderr line say what the journal records."""
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    answer = read_journal(path).transcript[-1]
    assert type(answer) is AssistantMessage, done.stderr
    if done.returncode == 0:
        assert done.stdout.strip() == (answer.content or "").strip()
    else:
        assert done.returncode == 1 and last.startswith(ENDINGS), done.stderr
    assert "completed (normal)" not in done.stderr or done.returncode == 0
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("stream", ["--no-stream", "--stream"])
def test_a_turn_against_llama_server(workspace: Path, start_llama: Callable[..., LlamaServer], stream: str) -> None:
    server = start_llama(MODEL, context=CONTEXT)
    done = tiny_agent(workspace, "run", "hello", *flags(server, MODEL, stream, "--tool-choice", "none", "--max-tokens", "40"))
    path = only_journal(workspace)
    check_ending(done, path)
    ((_, raw),) = list(raw_facts(path))
    assert raw.raw.status == 200 and raw.raw.incomplete is msgspec.UNSET
    assert (raw.raw.contentType or "").startswith("text/event-stream" if stream == "--stream" else "application/json")
    if stream == "--no-stream":
        assert read_journal(path).usage.output > 0
    assert_sound(path)


PROMPTS = [f"Read README.md{'!' * number}" for number in range(8)]
"""The server's sampling is seeded, so each prompt gets one answer: with ``required`` a call is likely, not certain
(llama.cpp constrains the call's grammar, but text may come first and run out the tokens)."""


def test_grammar_constrained_tool_calls_run(workspace: Path, start_llama: Callable[..., LlamaServer]) -> None:
    server = start_llama(MODEL, context=CONTEXT)
    for prompt in PROMPTS:
        done = tiny_agent(workspace, "run", prompt, *flags(server, MODEL, "--tool-choice", "required", "--max-tokens", "2000", "--max-steps", "2"))
        assert "Traceback" not in done.stderr
        path = sorted((workspace.parent / "sessions").glob("*.jsonl"))[-1]
        state = read_journal(path)
        calls = [call for message in state.transcript if type(message) is AssistantMessage for call in message.calls]
        if calls:
            break
    assert calls, done.stderr
    results = [message for message in state.transcript if type(message) is ToolMessage]
    assert len(results) == len(calls), "every call is answered exactly once"
    assert_sound(path)


def test_a_server_killed_mid_stream_is_retried_then_resumed_once_it_is_back(
    workspace: Path, start_llama: Callable[..., LlamaServer]
) -> None:
    server = start_llama(MODEL, context=CONTEXT, extra=LONG)
    process = started(workspace, "run", "hello", *flags(server, MODEL, "--stream", "--tool-choice", "none", "--max-tokens", "3000"))
    generating(server)
    server.kill()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 75, err
    assert "the response was cut off; waiting" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("BLOCKED: the provider could not be reached in 3 attempts")
    handle = last.rsplit("`tiny-agent resume ", 1)[1].split("`")[0]
    path = only_journal(workspace)
    ((_, cut),) = list(raw_facts(path))
    assert str(cut.raw.incomplete).startswith("broke off: ") and str(cut.raw.body).startswith("data: ")
    assert type(read_journal(path).operation) is RunOperation
    # Back on the same port (the session's base URL), resume tries again.
    executable, weights = require(MODEL)
    server._spawn(executable, weights, server.port)
    assert server._wait_ready()
    done = tiny_agent(workspace, "resume", handle, "--retry-wait", "0.2")
    check_ending(done, path)
    assert len(list(raw_facts(path))) == 2
    assert_sound(path)


def test_sigterm_to_tiny_agent_is_recorded_as_terminated(workspace: Path, start_llama: Callable[..., LlamaServer]) -> None:
    server = start_llama(MODEL, context=CONTEXT, extra=LONG)
    process = started(workspace, "run", "hello", *flags(server, MODEL, "--stream", "--tool-choice", "none", "--max-tokens", "3000"))
    generating(server)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("TERMINATED: run stopped by SIGTERM")
    path = only_journal(workspace)
    ((_, raw),) = list(raw_facts(path))
    assert raw.raw.incomplete == "terminated (SIGTERM)"
    assert "interrupted by the user" not in path.read_text()
    assert_sound(path)
