"""Chat Completions requests: the canonical messages already are Chat Completions messages, so the body
is the transcript itself behind the system prompt (docs/api-mappings.md).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.transcript import AssistantMessage, ChatMessage, Message, SystemMessage
from tiny_agent.wire.request import PLAIN, TOOL_CHOICES, Messages, RequestOptions, Tools, WireRequest

PATH: Final = "/chat/completions"


class StreamOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    include_usage: bool


class NamedFunction(msgspec.Struct, frozen=True):
    name: str


class FunctionChoice(msgspec.Struct, frozen=True, tag_field="type", tag="function"):
    function: NamedFunction


class ChatBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    model: str
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | UnsetType = UNSET
    tool_choice: str | FunctionChoice | UnsetType = UNSET
    max_tokens: int | UnsetType = UNSET
    stream: Literal[True] | UnsetType = UNSET
    stream_options: StreamOptions | UnsetType = UNSET


def chat_request(model: str, system: str, messages: Messages, tools: Tools, options: RequestOptions = PLAIN) -> WireRequest:
    choice = options.choice(tools)
    body = ChatBody(
        model=model,
        messages=_with_system(system, _empty_content(messages) if options.empty_content else messages),
        tools=[spec.to_wire() for spec in tools] if tools else UNSET,
        tool_choice=UNSET if choice is None else choice if choice in TOOL_CHOICES else FunctionChoice(NamedFunction(choice)),
        max_tokens=UNSET if options.max_tokens is None else options.max_tokens,
        stream=True if options.stream else UNSET,
        stream_options=StreamOptions(include_usage=True) if options.stream and options.stream_usage else UNSET,
    )
    return WireRequest(path=PATH, body=msgspec.json.encode(body), stream=options.stream)


def _empty_content(messages: Sequence[Message]) -> list[Message]:
    """An assistant message's null content as ``""`` (llama-cpp-python answers null with HTTP 500)."""
    return [
        msgspec.structs.replace(message, content="") if isinstance(message, AssistantMessage) and message.content is None
        else message
        for message in messages
    ]


def _with_system(system: str, messages: Sequence[Message]) -> list[ChatMessage]:
    context: list[ChatMessage] = list(messages)
    if not system:
        return context
    return [SystemMessage(content=system), *context]
