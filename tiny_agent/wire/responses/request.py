"""OpenAI Responses requests from the canonical transcript (the mapping: docs/api-mappings.md).

The whole active context goes every time, with ``store: false``: the journal is the only source of
truth, so no server-side state (``previous_response_id``) is ever used.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.transcript import AssistantMessage, Message, ToolMessage, UserMessage
from tiny_agent.wire.request import PLAIN, TOOL_CHOICES, Messages, RequestOptions, Tools, WireRequest

PATH: Final = "/responses"


class InputText(msgspec.Struct, frozen=True, tag_field="type", tag="input_text"):
    text: str


class OutputText(msgspec.Struct, frozen=True, tag_field="type", tag="output_text"):
    text: str


class MessageItem(msgspec.Struct, frozen=True, tag_field="type", tag="message"):
    role: Literal["user", "assistant"]
    content: list[InputText] | list[OutputText]


class FunctionCallItem(msgspec.Struct, frozen=True, tag_field="type", tag="function_call"):
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(msgspec.Struct, frozen=True, tag_field="type", tag="function_call_output"):
    call_id: str
    output: str


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem


class FunctionTool(msgspec.Struct, frozen=True, tag_field="type", tag="function"):
    name: str
    description: str
    parameters: dict[str, Any]


class FunctionChoice(msgspec.Struct, frozen=True, tag_field="type", tag="function"):
    name: str


class ResponsesBody(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    instructions: str | UnsetType = UNSET
    input: list[InputItem]
    tools: list[FunctionTool] | UnsetType = UNSET
    tool_choice: str | FunctionChoice | UnsetType = UNSET
    max_output_tokens: int | UnsetType = UNSET
    store: Literal[False] = False
    stream: Literal[True] | UnsetType = UNSET


def responses_request(model: str, system: str, messages: Messages, tools: Tools, options: RequestOptions = PLAIN) -> WireRequest:
    choice = options.choice(tools)
    body = ResponsesBody(
        model=model,
        instructions=system if system else UNSET,
        input=input_items(messages),
        tools=[FunctionTool(spec.name, spec.description, spec.parameters) for spec in tools] if tools else UNSET,
        tool_choice=UNSET if choice is None else choice if choice in TOOL_CHOICES else FunctionChoice(choice),
        max_output_tokens=UNSET if options.max_tokens is None else options.max_tokens,
        stream=True if options.stream else UNSET,
    )
    return WireRequest(path=PATH, body=msgspec.json.encode(body), stream=options.stream)


def input_items(messages: Sequence[Message]) -> list[InputItem]:
    items: list[InputItem] = []
    for message in messages:
        if isinstance(message, UserMessage):
            items.append(MessageItem(role="user", content=[InputText(message.content)]))
        elif isinstance(message, ToolMessage):
            items.append(FunctionCallOutputItem(call_id=message.tool_call_id, output=message.content))
        else:
            items.extend(_assistant_items(message))
    return items


def _assistant_items(message: AssistantMessage) -> list[InputItem]:
    items: list[InputItem] = []
    if message.content:
        items.append(MessageItem(role="assistant", content=[OutputText(message.content)]))
    items.extend(FunctionCallItem(call.id, call.function.name, call.function.arguments) for call in message.calls)
    return items
