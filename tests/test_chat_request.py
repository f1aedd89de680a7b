"""Chat Completions requests from the canonical transcript: the same bytes the agent sends, plus the options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import replies
from builders import header
from fake_provider import FakeProvider, FakeReply
from hypothesis import given, settings
from hypothesis import strategies as st
from test_anthropic import transcripts

from tiny_agent.agent.configuration import Configuration
from tiny_agent.agent.loop import Driver, Runtime
from tiny_agent.agent.tools.builtin import BASH, READ, WRITE
from tiny_agent.agent.tools.toolbox import ToolBox
from tiny_agent.journal.tools import ToolSpec
from tiny_agent.journal.transcript import (
    AssistantMessage,
    ChatMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tiny_agent.stores.journal import JournalWriter, read_journal
from tiny_agent.wire.chat.request import chat_request
from tiny_agent.wire.request import RequestOptions

CONTEXT: list[Message] = [
    UserMessage("What is in README.md? ünïcode ✓"),
    AssistantMessage(
        content=None,
        tool_calls=[ToolCall(id="call_1", type="function", function=FunctionCall(name="read", arguments='{"path":"README.md"}'))],
    ),
    ToolMessage(content="# Example\n", tool_call_id="call_1"),
    AssistantMessage(content="It is an example."),
]


def _sent_by_the_agent_until_now(model: str, system: str, messages: list[Message], tools: list[ToolSpec]) -> bytes:
    """The body as the agent built it before this module existed (agent.Driver._request, provider.ChatClient.complete)."""
    context: list[ChatMessage] = list(messages)
    chat_messages = [SystemMessage(content=system), *context] if system else context
    payload: dict[str, Any] = {"model": model, "messages": chat_messages}
    wire_tools = [spec.to_wire() for spec in tools]
    if wire_tools:
        payload["tools"] = wire_tools
    return msgspec.json.encode(payload)


@pytest.mark.parametrize("system", ["Be brief.", ""])
@pytest.mark.parametrize("tools", [[READ, WRITE, BASH], []])
def test_the_non_streamed_body_is_byte_for_byte_what_the_agent_sent(system: str, tools: list[ToolSpec]) -> None:
    request = chat_request("openai/gpt-4o-mini", system, CONTEXT, tools)
    assert request.body == _sent_by_the_agent_until_now("openai/gpt-4o-mini", system, CONTEXT, tools)
    assert (request.path, request.headers, request.stream) == ("/chat/completions", {}, False)


def test_the_body_matches_what_the_driver_sends(tmp_path: Path) -> None:
    """Drive a real tool round trip on the in-memory provider and rebuild each request it received."""
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
    script = [
        FakeReply(status=200, body=replies.read().body),
        FakeReply(status=200, body=replies.answer("It is an example.").body),
    ]
    provider = FakeProvider(script)
    writer = JournalWriter.create(tmp_path / "s.jsonl", header(), durability="process")
    driver = Driver(writer, Runtime(configuration, toolbox, lambda: provider))
    assert driver.run("What is this?").status == "completed"
    writer.close()
    transcript = read_journal(writer.path).transcript
    first, second = provider.requests
    assert first.body == chat_request("test/model", "Be brief.", transcript[:1], toolbox.specs()).body
    assert second.body == chat_request("test/model", "Be brief.", transcript[:3], toolbox.specs()).body


def test_the_system_prompt_goes_first_only_when_there_is_one() -> None:
    with_system = json.loads(chat_request("m", "Be brief.", CONTEXT, []).body)
    assert with_system["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [message["role"] for message in with_system["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert "tools" not in with_system
    without = json.loads(chat_request("m", "", CONTEXT, []).body)
    assert [message["role"] for message in without["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_canonical_messages_are_sent_as_they_are() -> None:
    messages = json.loads(chat_request("m", "", CONTEXT, []).body)["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path":"README.md"}'}}],
    }
    assert messages[2] == {"role": "tool", "content": "# Example\n", "tool_call_id": "call_1"}
    assert messages[3] == {"role": "assistant", "content": "It is an example."}


@pytest.mark.parametrize(
    ("options", "extra"),
    [
        (RequestOptions(), {}),
        (RequestOptions(max_tokens=256), {"max_tokens": 256}),
        (RequestOptions(stream=True), {"stream": True, "stream_options": {"include_usage": True}}),
        (RequestOptions(stream=True, stream_usage=False), {"stream": True}),
        (RequestOptions(stream=False, stream_usage=True, max_tokens=1), {"max_tokens": 1}),
        (
            RequestOptions(max_tokens=64, stream=True),
            {"max_tokens": 64, "stream": True, "stream_options": {"include_usage": True}},
        ),
    ],
)
def test_options_append_their_members_after_the_agent_body(options: RequestOptions, extra: dict[str, Any]) -> None:
    request = chat_request("m", "sys", CONTEXT, [READ], options)
    body = json.loads(request.body)
    base = json.loads(_sent_by_the_agent_until_now("m", "sys", CONTEXT, [READ]))
    assert body == {**base, **extra}
    assert list(body) == [*base, *extra]
    assert request.stream is options.stream


@settings(max_examples=200, deadline=None)
@given(transcripts(), st.sampled_from(["", "sys"]), st.booleans())
def test_any_transcript_is_sent_as_the_agent_sent_it(messages: list[Message], system: str, with_tools: bool) -> None:
    tools = [READ, WRITE] if with_tools else []
    assert chat_request("m", system, messages, tools).body == _sent_by_the_agent_until_now("m", system, messages, tools)
