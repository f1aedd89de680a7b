"""The request rules each wire API enforces, checked the way the vendors would refuse a request.

A real provider answers a malformed conversation with a 400; a test server
that accepts anything lets a client bug through.  Each check returns the
first broken rule as a :class:`Violation` (one line), or None.

- **chat**: ``messages`` is a non-empty list of objects with known roles;
  every ``tool`` message answers a call of the assistant message before it,
  once; no other message comes while calls are unanswered, and the
  conversation does not end with calls unanswered.
- **anthropic**: ``max_tokens`` is a positive integer; the
  ``anthropic-version`` header is present; a credential comes in
  ``x-api-key``, never in ``Authorization``; roles alternate strictly,
  starting with ``user``; every ``tool_result`` sits in the user turn right
  after the assistant turn holding its ``tool_use``, before any other block
  of that turn, and every ``tool_use`` is answered there.
- **responses**: ``store`` is ``false``; there is no ``previous_response_id``;
  ``input`` is a list; every ``function_call_output`` answers an earlier
  ``function_call``, once, and every ``function_call`` is answered.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tiny_agent.loopback.capture import RecordedRequest
from tiny_agent.wire.registry import Api

Rule = Literal[
    "route",
    "api",
    "json",
    "script",
    "messages",
    "transcript",
    "max_tokens",
    "version",
    "credentials",
    "alternation",
    "tool_result",
    "store",
    "previous_response_id",
    "input",
    "function_call_output",
]


class Violation(msgspec.Struct, frozen=True):
    rule: Rule
    message: str
    """One line, naming where in the request the rule broke."""
    request: int = -1
    """The index of the request in ``server.requests``."""
    api: Api | None = None


def violation_of(request: RecordedRequest) -> Violation | None:
    """The first rule the request breaks for its route's API (a route without an API breaks none here)."""
    if request.api is None:
        return None
    body = request.body
    if type(body) is not dict:
        return Violation("json", "the request body is not a JSON object")
    if request.api == "chat":
        return _chat(body)
    if request.api == "anthropic":
        return _anthropic(body, request)
    return _responses(body)


# == Chat Completions ===========================================================

_CHAT_ROLES = frozenset(("system", "developer", "user", "assistant", "tool"))


def _chat(body: dict[str, Any]) -> Violation | None:
    messages = body.get("messages")
    if type(messages) is not list or not messages:
        return Violation("messages", "messages must be a non-empty array")
    pending: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role") if type(message) is dict else None
        if role not in _CHAT_ROLES:
            return Violation("messages", f"{where}.role is {role!r}, not a known role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return Violation(
                    "transcript", f"{where} answers {call_id!r}, which no call of the assistant message before it left open"
                )
            pending.discard(call_id)
            continue
        if pending:
            return Violation("transcript", f"{where} ({role}) comes while calls are unanswered: {_listed(pending)}")
        if role == "assistant":
            pending = _chat_call_ids(message)
    if pending:
        return Violation("transcript", f"the conversation ends with calls unanswered: {_listed(pending)}")
    return None


def _chat_call_ids(message: dict[str, Any]) -> set[str]:
    calls = message.get("tool_calls")
    if type(calls) is not list:
        return set()
    return {call["id"] for call in calls if type(call) is dict and type(call.get("id")) is str}


# == Anthropic Messages =========================================================


def _anthropic(body: dict[str, Any], request: RecordedRequest) -> Violation | None:
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        return Violation("max_tokens", f"max_tokens is {max_tokens!r}: a positive integer is required")
    if "anthropic-version" not in request.headers:
        return Violation("version", "the anthropic-version header is missing")
    if "authorization" in request.headers:
        return Violation("credentials", "the credential came in Authorization; Anthropic reads it from x-api-key")
    messages = body.get("messages")
    if type(messages) is not list or not messages:
        return Violation("messages", "messages must be a non-empty array")
    return _anthropic_turns(messages)


def _anthropic_turns(messages: list[Any]) -> Violation | None:
    open_uses: set[str] = set()
    for index, turn in enumerate(messages):
        where = f"messages[{index}]"
        role = turn.get("role") if type(turn) is dict else None
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            return Violation(
                "alternation", f"{where}.role is {role!r}; roles alternate strictly from user, so {expected!r} is due"
            )
        blocks = _blocks(turn.get("content"))
        if blocks is None:
            return Violation("messages", f"{where}.content must be a string or an array of blocks")
        if role == "user":
            problem = _answers(blocks, open_uses, where)
            if problem is not None:
                return problem
            open_uses = set()
        else:
            open_uses = {block["id"] for block in blocks if block.get("type") == "tool_use" and type(block.get("id")) is str}
    if open_uses:
        return Violation("tool_result", f"the conversation ends with tool_use unanswered: {_listed(open_uses)}")
    return None


def _blocks(content: Any) -> list[dict[str, Any]] | None:
    if type(content) is str:
        return [{"type": "text", "text": content}]
    if type(content) is not list or not all(type(block) is dict for block in content):
        return None
    return content


def _answers(blocks: list[dict[str, Any]], open_uses: set[str], where: str) -> Violation | None:
    """The user turn after an assistant turn: its tool_result blocks come first and answer every open tool_use."""
    answered: set[str] = set()
    seen_other = False
    for index, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            seen_other = True
            continue
        use_id = block.get("tool_use_id")
        if use_id not in open_uses or use_id in answered:
            return Violation("tool_result", f"{where}.content[{index}] answers {use_id!r}, no open tool_use of the turn before")
        if seen_other:
            return Violation("tool_result", f"{where}.content[{index}]: tool_result blocks must come before any other block")
        answered.add(use_id)
    missing = open_uses - answered
    if missing:
        return Violation("tool_result", f"{where} leaves tool_use unanswered: {_listed(missing)}")
    return None


# == OpenAI Responses ===========================================================


def _responses(body: dict[str, Any]) -> Violation | None:
    if body.get("store") is not False:
        return Violation("store", f"store is {body.get('store', 'missing')!r}: tiny-agent is stateless, store must be false")
    if body.get("previous_response_id") is not None:
        return Violation("previous_response_id", "previous_response_id is set: a stateless request sends the whole conversation")
    items = body.get("input")
    if type(items) is not list:
        return Violation("input", "input must be an array of items")
    calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type") if type(item) is dict else None
        call_id = item.get("call_id") if type(item) is dict else None
        if kind == "function_call" and type(call_id) is str:
            calls.add(call_id)
        elif kind == "function_call_output":
            if call_id not in calls or call_id in answered:
                return Violation(
                    "function_call_output", f"input[{index}] answers {call_id!r}, which no earlier function_call left open"
                )
            answered.add(call_id)
    if calls - answered:
        return Violation("function_call_output", f"the input ends with function calls unanswered: {_listed(calls - answered)}")
    return None


def _listed(ids: set[str]) -> str:
    return ", ".join(sorted(ids))
