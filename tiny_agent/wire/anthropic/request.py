"""Anthropic Messages requests from the canonical transcript (the mapping: docs/api-mappings.md).

Same-role neighbours merge into one turn, in transcript order (which also puts tool results before
any text in their turn, as the API requires).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.journal.transcript import SYNTHETIC_TEXTS, AssistantMessage, Message, ToolMessage, UserMessage
from tiny_agent.wire.request import PLAIN, Messages, RequestOptions, Tools, WireRequest

PATH: Final = "/messages"
API_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 4096
"""Sent when the caller sets no cap (the API requires one): every Claude model can generate this many."""

_ERROR_TEXTS: Final = frozenset(SYNTHETIC_TEXTS.values())


class TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str
    is_error: Literal[True] | UnsetType = UNSET


Block = TextBlock | ToolUseBlock | ToolResultBlock


class Turn(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: list[Block]


class AnthropicTool(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: dict[str, Any]


class ToolChoice(msgspec.Struct, frozen=True):
    type: str
    name: str | UnsetType = UNSET


_CHOICE_TYPES: Final = {"auto": ("auto",), "none": ("none",), "required": ("any",)}


class MessagesBody(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    max_tokens: int
    system: str | UnsetType = UNSET
    messages: list[Turn]
    tools: list[AnthropicTool] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET
    stream: Literal[True] | UnsetType = UNSET


def anthropic_request(model: str, system: str, messages: Messages, tools: Tools, options: RequestOptions = PLAIN) -> WireRequest:
    choice = options.choice(tools)
    body = MessagesBody(
        model=model,
        max_tokens=DEFAULT_MAX_TOKENS if options.max_tokens is None else options.max_tokens,
        system=system if system else UNSET,
        messages=turns(messages),
        tools=[AnthropicTool(spec.name, spec.description, spec.parameters) for spec in tools] if tools else UNSET,
        tool_choice=UNSET if choice is None else ToolChoice(*_CHOICE_TYPES.get(choice, ("tool", choice))),
        stream=True if options.stream else UNSET,
    )
    headers = {"anthropic-version": API_VERSION}
    return WireRequest(path=PATH, body=msgspec.json.encode(body), headers=headers, stream=options.stream)


def turns(messages: Sequence[Message]) -> list[Turn]:
    result: list[Turn] = []
    for message in messages:
        role: Literal["user", "assistant"] = "assistant" if isinstance(message, AssistantMessage) else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if result and result[-1].role == role:
            result[-1].content.extend(blocks)
        else:
            result.append(Turn(role=role, content=blocks))
    return result


def _blocks(message: Message) -> list[Block]:
    if isinstance(message, UserMessage):
        return [TextBlock(message.content)]
    if isinstance(message, ToolMessage):
        # The transcript does not say whether a tool failed; the fixed texts of
        # calls that were never (knowingly) run do, so only those are marked.
        failed: Literal[True] | UnsetType = True if message.content in _ERROR_TEXTS else UNSET
        return [ToolResultBlock(tool_use_id=message.tool_call_id, content=message.content, is_error=failed)]
    # The API refuses text blocks that are empty or only whitespace; such text
    # says nothing, so a turn of tool calls without words has no text block.
    text = message.content or ""
    blocks: list[Block] = [TextBlock(text)] if text.strip() else []
    blocks.extend(ToolUseBlock(call.id, call.function.name, tool_input(call.function.arguments)) for call in message.calls)
    return blocks


def tool_input(arguments: str) -> dict[str, Any]:
    """``{}`` when the text is not one JSON object: such a call was never run (the loop answered it with the
    fixed invalidArguments text), and ``{}`` invents no members the tool's schema does not declare."""
    try:
        value = LineDecoder().decode(arguments.encode("utf-8", "surrogatepass"))
    except ProfileViolation:
        return {}
    return value if type(value) is dict else {}
