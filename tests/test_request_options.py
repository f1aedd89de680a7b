"""Request options (issue 24 items 5 and 6): ``--tool-choice`` in each API's shape, the ``null-content-as-empty``
adapter, and the options a session recorded (max tokens, tool choice, stream) reused by ``resume``,
``--session`` and ``--continue`` unless a flag overrides one; a blocked resume names exactly the options
that differ, on stdout and stderr alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import replies
from conftest import PROJECT_ROOT
from test_replay_cli import call
from test_wire_e2e import only_session, run
from test_wire_e2e import workspace as workspace  # a fixture

from tiny_agent.fold.contract import V3_SNAPSHOT_KEYS, Fault
from tiny_agent.fold.steps import new_configuration
from tiny_agent.journal.state import SentOptions
from tiny_agent.journal.tools import ToolSpec
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, ToolCall, ToolMessage, UserMessage
from tiny_agent.loopback import LoopbackServer
from tiny_agent.providers.profiles import BUILTIN_PROFILES
from tiny_agent.stores.journal import read_journal
from tiny_agent.wire.registry import API
from tiny_agent.wire.request import RequestOptions

READ = ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}, "safe", "read@1")
CONVERSATION = [
    UserMessage("hi"),
    AssistantMessage(None, [ToolCall("c1", "function", FunctionCall("read", '{"path":"a"}'))]),
    ToolMessage("text", "c1"),
]

SHAPES: dict[str, dict[str, Any]] = {
    "chat": {"auto": "auto", "none": "none", "required": "required", "read": {"type": "function", "function": {"name": "read"}}},
    "anthropic": {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}, "read": {"type": "tool", "name": "read"}},
    "responses": {"auto": "auto", "none": "none", "required": "required", "read": {"type": "function", "name": "read"}},
}


def body_of(api: str, options: RequestOptions, tools: list[ToolSpec]) -> dict[str, Any]:
    return json.loads(API[api].request("m", "", CONVERSATION, tools, options).body)  # type: ignore[index]


@pytest.mark.parametrize("api", sorted(SHAPES))
def test_each_tool_choice_goes_in_its_apis_shape_and_only_with_tools(api: str) -> None:
    for choice, shape in SHAPES[api].items():
        assert body_of(api, RequestOptions(tool_choice=choice), [READ])["tool_choice"] == shape
        assert "tool_choice" not in body_of(api, RequestOptions(tool_choice=choice), [])
    assert "tool_choice" not in body_of(api, RequestOptions(), [READ])


def test_null_content_is_sent_empty_only_when_asked() -> None:
    plain = body_of("chat", RequestOptions(), [READ])["messages"]
    empty = body_of("chat", RequestOptions(empty_content=True), [READ])["messages"]
    assert plain[1]["content"] is None and empty[1]["content"] == ""
    assert [message for index, message in enumerate(plain) if index != 1] == [m for i, m in enumerate(empty) if i != 1]


def test_the_llama_cpp_python_profile_sends_empty_content_and_records_it(capsys, workspace: Path) -> None:
    (profile,) = [profile for profile in BUILTIN_PROFILES if profile.name == "llama-cpp-python"]
    assert profile.adapters == ("null-content-as-empty",)
    with LoopbackServer([replies.read(), replies.answer("It prints hi.")]) as server:
        code, out, err = run(capsys, server, "--provider", "llama-cpp-python")
        assert code == 0, err
        assistant = server.requests[1].body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"] == "" and assistant["tool_calls"]
    snapshot = read_journal(only_session(workspace)).lastSnapshot
    assert snapshot is not None and snapshot.adapterIdentity.endswith("+null-content-as-empty@1")


def test_a_forced_choice_holds_until_the_first_tool_result(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.read(), replies.answer("It prints hi.")]) as server:
        code, _, err = run(capsys, server, "--tool-choice", "read")
        assert code == 0, err
        sent = [request.body.get("tool_choice") for request in server.requests]
    assert sent == [{"type": "function", "function": {"name": "read"}}, "auto"]


def test_a_tool_choice_naming_no_offered_tool_is_a_usage_error(capsys, workspace: Path) -> None:
    with LoopbackServer([]) as server:
        code, _, err = run(capsys, server, "--tool-choice", "bash")
        assert server.request_count == 0
    assert code == 2 and err.startswith("USAGE: --tool-choice is auto, none, required or an offered tool (read,")
    assert not (workspace.parent / "sessions").exists() or not list((workspace.parent / "sessions").glob("*.jsonl"))


def test_run_session_reuses_the_recorded_options_unless_a_flag_overrides_one(capsys, workspace: Path) -> None:
    answers = [replies.answer(f"Answer {number}.") for number in range(3)]
    with LoopbackServer(answers) as server:
        assert run(capsys, server, "--max-tokens", "300", "--tool-choice", "none", "--no-stream")[0] == 0
        session = str(only_session(workspace))
        assert run(capsys, server, "--session", session, prompt="again")[0] == 0
        assert run(capsys, server, "--session", session, "--max-tokens", "9", prompt="once more")[0] == 0
        sent = [(request.body.get("max_tokens"), request.body.get("tool_choice"), request.body.get("stream")) for request in server.requests]
    assert sent == [(300, "none", None), (300, "none", None), (9, "none", None)]
    recorded = read_journal(only_session(workspace)).lastSnapshot
    assert recorded is not None and recorded.requestOptions == SentOptions(maxTokens=9, toolChoice="none", stream=False)


# -- resume, after a crash with the attempt open ------------------------------------------------------------


def tiny(workspace: Path, server: LoopbackServer, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENAI_", "OPENROUTER_"))}
    env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_SESSIONS_DIR=str(workspace.parent / "sessions"))
    if failpoint:
        env["TINY_AGENT_FAILPOINT"] = failpoint
    command = [sys.executable, "-m", "tiny_agent", *args, "--base-url", server.base_url, "-m", "test/model", "--retry-wait", "0.01"]
    return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def test_resume_reuses_the_recorded_options_and_names_exactly_those_that_differ(workspace: Path) -> None:
    with LoopbackServer([replies.answer("Done.")]) as server:
        flags = ("--max-tokens", "3", "--tool-choice", "required", "--no-stream")
        crashed = tiny(workspace, server, "run", "hello", *flags, failpoint="after-commit:step-attempt")
        assert crashed.returncode == -9, crashed.stderr
        session = str(only_session(workspace))
        dry = tiny(workspace, server, "resume", session, "--dry-run", "--max-tokens", "5", "--stream")
        assert dry.returncode == 75
        why = "max tokens 3 → now 5; restore it with --max-tokens 3"
        assert dry.stdout.startswith("next: blocked, configuration_changed: ") and why in dry.stdout
        assert dry.stderr.strip() == "BLOCKED: " + dry.stdout.strip().removeprefix("next: blocked, ")
        assert "tool choice" not in dry.stdout and "stream" not in dry.stdout
        assert tiny(workspace, server, "resume", session, "--dry-run").stdout.startswith("next: retry step 1 (attempt 2)")
        resumed = tiny(workspace, server, "resume", session)
        assert resumed.returncode == 0, resumed.stderr
        (request,) = server.requests
    assert (request.body["max_tokens"], request.body["tool_choice"], "stream" in request.body) == (3, "required", False)


# -- the journal: requestOptions is v3, checked, and outside the digest ------------------------------------


def snapshot(**members: Any) -> dict[str, Any]:
    digest = "sha256:" + "0" * 64
    base = {"model": "m", "systemPromptDigest": digest, "tools": [], "adapterIdentity": "chat-completions:v1"}
    return {**base, "routingIdentity": "custom@http://x#m", "outputOptionsDigest": digest, **members}


def test_request_options_are_checked_and_not_digested() -> None:
    plain = new_configuration(snapshot(), V3_SNAPSHOT_KEYS)
    chosen = new_configuration(snapshot(requestOptions={"maxTokens": 3, "toolChoice": "read", "stream": True}), V3_SNAPSHOT_KEYS)
    assert chosen.digest == plain.digest
    assert chosen.snapshot.requestOptions == SentOptions(maxTokens=3, toolChoice="read", stream=True)
    for bad in ({"maxTokens": 0}, {"toolChoice": ""}, {"stream": 1}, {"temperature": 0.5}, []):
        with pytest.raises(Fault):
            new_configuration(snapshot(requestOptions=bad), V3_SNAPSHOT_KEYS)
    with pytest.raises(Fault, match="requestOptions"):
        new_configuration(snapshot(requestOptions={}))  # v2's members


def test_a_v2_export_leaves_the_request_options_out(capsys, workspace: Path, tmp_path: Path) -> None:
    with LoopbackServer([replies.read(), replies.answer("It prints hi.")]) as server:
        assert run(capsys, server, "--max-tokens", "50")[0] == 0
    exported = tmp_path / "v2.jsonl"
    code, _, err = call(capsys, "export", "--v2", str(only_session(workspace)), "-o", str(exported))
    assert code == 0, err
    assert b"requestOptions" not in exported.read_bytes()
    state = read_journal(exported)
    assert state.version == 2 and msgspec.to_builtins(state.transcript) == msgspec.to_builtins(
        read_journal(only_session(workspace)).transcript
    )
