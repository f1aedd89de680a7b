"""The transcript's rules: what a message is (session-v2 §7) and the order messages may come in (§12).

Pure functions on messages, used by the fold and by the writer's own checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from msgspec import UNSET

from tiny_agent.fold.contract import (
    ASSISTANT_MESSAGE_KEYS,
    FUNCTION_KEYS,
    INVALID_FACT,
    INVALID_TRANSCRIPT,
    TOOL_CALL_KEYS,
    TOOL_MESSAGE_KEYS,
    USER_MESSAGE_KEYS,
    fail,
    not_text,
    require_keys,
    require_object,
    require_text,
    show,
    unknown_key,
)
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, Message, ToolCall, ToolMessage, UserMessage


def parse_message(value: object, what: str = "message") -> Message:
    """Check a journal message against the exact-key contract and return it typed."""
    if not isinstance(value, dict):
        fail(INVALID_FACT, f"{what} is not an object")
    role = value.get("role")
    if role == "user":
        if not value.keys() <= USER_MESSAGE_KEYS:
            unknown_key(value, USER_MESSAGE_KEYS, f"user {what}")
        content = value.get("content")
        if type(content) is not str or not content:
            not_text(content, f"user {what} content")
        return UserMessage(content)
    if role == "assistant":
        return _parse_assistant(value, what)
    if role == "tool":
        if not value.keys() <= TOOL_MESSAGE_KEYS:
            unknown_key(value, TOOL_MESSAGE_KEYS, f"tool {what}")
        content = value.get("content")
        if type(content) is not str:
            fail(INVALID_FACT, f"tool {what} content is not a string")
        call_id = value.get("tool_call_id")
        if type(call_id) is not str or not call_id:
            not_text(call_id, f"tool {what} tool_call_id")
        return ToolMessage(content, call_id)
    fail(INVALID_FACT, f"{what} role is not user, assistant or tool: {show(role)}")


def _parse_assistant(value: dict[str, Any], what: str) -> AssistantMessage:
    if not value.keys() <= ASSISTANT_MESSAGE_KEYS:
        unknown_key(value, ASSISTANT_MESSAGE_KEYS, f"assistant {what}")
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


def _parse_tool_call(call: object, what: str) -> ToolCall:
    # One combined test for the common, valid call; the first broken rule is named only on failure.
    if type(call) is not dict or not call.keys() <= TOOL_CALL_KEYS:
        _bad_tool_call(call, what)
    call_id = call.get("id")
    function = call.get("function")
    if (
        type(call_id) is not str
        or not call_id
        or call.get("type") != "function"
        or type(function) is not dict
        or not function.keys() <= FUNCTION_KEYS
    ):
        _bad_tool_call(call, what)
    name = function.get("name")
    arguments = function.get("arguments")
    if type(name) is not str or not name or type(arguments) is not str:
        _bad_tool_call(call, what)
    return ToolCall(call_id, "function", FunctionCall(name, arguments))


def _bad_tool_call(value: object, what: str) -> NoReturn:
    """Name the first rule a tool call breaks (all of them are INVALID_FACT)."""
    call = require_object(value, what)
    require_keys(call, TOOL_CALL_KEYS, what)
    require_text(call.get("id"), f"{what}.id")
    if call.get("type") != "function":
        fail(INVALID_FACT, f'{what}.type is not "function"')
    function = require_object(call.get("function"), f"{what}.function")
    require_keys(function, FUNCTION_KEYS, f"{what}.function")
    require_text(function.get("name"), f"{what}.function.name")
    fail(INVALID_FACT, f"{what}.function.arguments is not a string")


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
        reason = role_rule(outstanding, message)
        if reason is not None:
            return f"message {index}: {reason}"
    return None


def role_rule(outstanding: set[str], message: Message) -> str | None:
    """Advance the outstanding-call set by one message; the breach it causes, if any."""
    if type(message) is ToolMessage:
        return tool_turn(outstanding, message.tool_call_id)
    if type(message) is AssistantMessage:
        return assistant_turn(outstanding, message)
    return user_turn(outstanding)


# One function per role: the fold knows each message's role already, and
# calls these directly (no type tests on the hot path).


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
