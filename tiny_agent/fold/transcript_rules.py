"""The transcript's rules: what a message is (session-v2 §7) and the order messages may come in (§12).

Pure functions on messages, used by the fold and by the writer's own checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import UNSET

from tiny_agent.fold import contract
from tiny_agent.fold.contract import INVALID_FACT, INVALID_TRANSCRIPT, fail, require_keys, require_object, require_text, show
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, Message, ToolCall, ToolMessage, UserMessage


def parse_message(value: object, what: str = "message") -> Message:
    """Check a journal message against the exact-key contract and return it typed."""
    value = require_object(value, what)
    role = value.get("role")
    if role == "user":
        require_keys(value, contract.USER_MESSAGE_KEYS, f"user {what}")
        return UserMessage(require_text(value.get("content"), f"user {what} content"))
    if role == "assistant":
        return _parse_assistant(value, what)
    if role == "tool":
        require_keys(value, contract.TOOL_MESSAGE_KEYS, f"tool {what}")
        content = value.get("content")
        if type(content) is not str:
            fail(INVALID_FACT, f"tool {what} content is not a string")
        return ToolMessage(content, require_text(value.get("tool_call_id"), f"tool {what} tool_call_id"))
    fail(INVALID_FACT, f"{what} role is not user, assistant or tool: {show(role)}")


def _parse_assistant(value: dict[str, Any], what: str) -> AssistantMessage:
    require_keys(value, contract.ASSISTANT_MESSAGE_KEYS, f"assistant {what}")
    if "content" not in value:
        fail(INVALID_FACT, f"assistant {what} has no content member (it must be a string or null)")
    content = value["content"]
    if content is not None and type(content) is not str:
        fail(INVALID_FACT, f"assistant {what} content is neither a string nor null")
    raw_calls = value.get("tool_calls", UNSET)
    if raw_calls is UNSET:
        return AssistantMessage(content)
    if type(raw_calls) is not list or not raw_calls:
        fail(INVALID_FACT, f"assistant {what} tool_calls is not a non-empty array")
    calls = [_parse_tool_call(call, f"assistant {what} tool_calls[{index}]") for index, call in enumerate(raw_calls)]
    if len(calls) > 1 and len({call.id for call in calls}) != len(calls):
        fail(INVALID_TRANSCRIPT, f"assistant {what} repeats a tool call id")
    return AssistantMessage(content, calls)


def _parse_tool_call(value: object, what: str) -> ToolCall:
    call = require_object(value, what)
    require_keys(call, contract.TOOL_CALL_KEYS, what)
    call_id = require_text(call.get("id"), f"{what}.id")
    if call.get("type") != "function":
        fail(INVALID_FACT, f'{what}.type is not "function"')
    function = require_object(call.get("function"), f"{what}.function")
    require_keys(function, contract.FUNCTION_KEYS, f"{what}.function")
    name = require_text(function.get("name"), f"{what}.function.name")
    arguments = function.get("arguments")
    if type(arguments) is not str:
        fail(INVALID_FACT, f"{what}.function.arguments is not a string")
    return ToolCall(call_id, "function", FunctionCall(name, arguments))


def plain_tool_calls(calls: list[ToolCall]) -> bool:
    """§7's tool-call rules that the wire types leave to the fold: non-empty ids and names, ids unique."""
    if not calls:
        return False
    for call in calls:
        if not call.id or not call.function.name:
            return False
    return len(calls) == 1 or len({call.id for call in calls}) == len(calls)


def transcript_violation(messages: Iterable[Message]) -> str | None:
    """The first breach of the role rule (session-v2 §12) in a message list, or None."""
    outstanding: set[str] = set()
    for index, message in enumerate(messages):
        if type(message) is ToolMessage:
            reason = tool_turn(outstanding, message.tool_call_id)
        else:
            reason = assistant_turn(outstanding, message) if type(message) is AssistantMessage else user_turn(outstanding)
        if reason is not None:
            return f"message {index}: {reason}"
    return None


# One function per role: the fold knows each message's role already, and calls these directly.


def user_turn(outstanding: set[str]) -> str | None:
    if outstanding:
        return f"user message while tool calls are unanswered ({', '.join(sorted(outstanding))})"
    return None


def assistant_turn(outstanding: set[str], message: AssistantMessage) -> str | None:
    breach = None
    if outstanding:
        breach = f"assistant message while tool calls are unanswered ({', '.join(sorted(outstanding))})"
        outstanding.clear()
    if message.tool_calls is not UNSET:
        outstanding.update(call.id for call in message.tool_calls)
    return breach


def tool_turn(outstanding: set[str], call_id: str) -> str | None:
    if call_id not in outstanding:
        return f'tool result for "{call_id}" answers no outstanding call'
    outstanding.discard(call_id)
    return None
