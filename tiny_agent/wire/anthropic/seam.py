"""The Anthropic Messages seam (the rules, in order: docs/normalize.md, "Anthropic: reject first").

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec
from msgspec import UNSET

from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, StopReason, ToolCall, Usage
from tiny_agent.wire.seam import (
    DROPPED,
    MISSING,
    Reject,
    compact_json,
    counter,
    describe,
    error_text,
    member_object,
    rebuild,
    refusal,
    require_array,
    require_object,
    require_string,
    require_text,
    short,
    unkept_paths,
)


class AnthropicUsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="anthropic"):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_creation: tuple[tuple[str, int], ...] = ()
    """The cache writes by lifetime (``ephemeral_5m_input_tokens``, ``ephemeral_1h_input_tokens``), when reported."""

    @property
    def usage(self) -> Usage:
        # Anthropic reports cache reads and writes beside input_tokens, not inside
        # it, so input_tokens already is the ledger's net input.
        return Usage(self.input_tokens, self.output_tokens, self.cache_read_input_tokens, self.cache_creation_input_tokens)

    cost: ClassVar[None] = None

    def explain(self) -> str:
        split = ", ".join(f"{name} {count}" for name, count in self.cache_creation)
        return (
            f"input_tokens {self.input_tokens} = input {self.input_tokens}"
            f" (nothing subtracted: Anthropic counts cache read {self.cache_read_input_tokens}"
            f" and cache write {self.cache_creation_input_tokens} apart from input_tokens);"
            f" output_tokens {self.output_tokens} = output {self.output_tokens}"
            + (f"; cache write {self.cache_creation_input_tokens}, by lifetime: {split}" * bool(self.cache_creation_input_tokens))
        )


_SERVER_TOOLS: Final = ("web_search", "web_fetch", "code_execution", "bash_code_execution", "text_editor_code_execution")
"""The hosted tools a ``server_tool_use`` block may name; each answers with a ``<name>_tool_result`` block."""
_KNOWN_BLOCKS: Final = "text, tool_use, thinking, redacted_thinking, server_tool_use, mcp_tool_use and their results"
_KEPT_BLOCKS: Final = {"text": {"type": None, "text": None}, "tool_use": {"type": None, "id": None, "name": None, "input": None}}
_COUNTERS: Final = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_KEPT_USAGE: Final = {**dict.fromkeys(_COUNTERS), "cache_creation": None}

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "refusal": "refusal",
}


def finish_reason(body: dict[str, Any]) -> Any:
    return body.get("stop_reason")


def answer(body: Any) -> tuple[AssistantMessage, StopReason]:
    content = _message_content(body)
    stop_reason = _known_stop_reason(body.get("stop_reason", MISSING))
    message = rebuild(content, "content", _block)
    _pair_hosted(content)
    if stop_reason == "refusal":
        return refusal(message, "content")
    has_calls = message.tool_calls is not UNSET
    if stop_reason == "toolUse" and not has_calls:
        raise Reject("stop_reason tool_use but the message carries no tool_use blocks")
    return message, "toolUse" if stop_reason == "stop" and has_calls else stop_reason


def _message_content(body: Any) -> list[Any]:
    if type(body) is not dict:
        raise Reject(f"response is {describe(body)}, not an object")
    body_type = body.get("type", MISSING)
    if body_type == "error":
        raise Reject(f"provider reported an error: {error_text(body.get('error'), 'type')}")
    if body_type != "message":
        raise Reject(f'type is {describe(body_type)} (expected "message")')
    role = body.get("role", MISSING)
    if role != "assistant":
        raise Reject(f'role is {describe(role)} (expected "assistant")')
    return require_array(body.get("content", MISSING), "content")


def _known_stop_reason(value: Any) -> StopReason:
    if type(value) is str and value in _STOP_REASONS:
        return _STOP_REASONS[value]
    if value == "pause_turn":
        raise Reject("stop_reason pause_turn: the server paused a long-running turn, which tiny-agent does not continue")
    if value is None or value is MISSING:
        raise Reject(f"stop_reason is {describe(value)} (the response does not say why it ended)")
    if type(value) is not str:
        raise Reject(f"stop_reason is {describe(value)} (expected a string)")
    raise Reject(f"stop_reason {short(value)} is not one the seam knows (end_turn, stop_sequence, tool_use, max_tokens)")


def _block(block_type: Any, block: dict[str, Any], where: str) -> list[str] | ToolCall | None:
    if block_type == "text":
        return [require_string(block, "text", where)]
    if block_type == "tool_use":
        call_id = require_text(block, "id", where)
        name = require_text(block, "name", where)
        arguments = compact_json(require_object(block.get("input", MISSING), f"{where}.input"), f"{where}.input")
        return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))
    if block_type in ("thinking", "redacted_thinking"):
        return None
    if block_type in ("server_tool_use", "mcp_tool_use"):
        require_text(block, "id", where)
        name = require_text(block, "name", where)
        if block_type == "server_tool_use" and name not in _SERVER_TOOLS:
            raise Reject(f"{where}.name is {short(name)}, not a server tool the seam knows ({', '.join(_SERVER_TOOLS)})")
        if block_type == "mcp_tool_use":
            require_text(block, "server_name", where)
        require_object(block.get("input", MISSING), f"{where}.input")
        return None
    if type(block_type) is str and block_type in _RESULTS:
        require_text(block, "tool_use_id", where)
        return None
    raise Reject(f"{where}.type is {describe(block_type)}, not a block the seam knows ({_KNOWN_BLOCKS})")


_RESULTS: Final = frozenset([f"{name}_tool_result" for name in _SERVER_TOOLS] + ["mcp_tool_result"])


def _pair_hosted(content: list[dict[str, Any]]) -> None:
    expected: dict[str, str] = {}
    for index, block in enumerate(content):
        if block["type"] in ("server_tool_use", "mcp_tool_use"):
            expected[block["id"]] = "mcp_tool_result" if block["type"] == "mcp_tool_use" else f"{block['name']}_tool_result"
        elif block["type"] in _RESULTS and expected.get(block["tool_use_id"]) != block["type"]:
            call = short(block["tool_use_id"])
            raise Reject(f"content[{index}] is a {block['type']} without its call (no earlier hosted call {call})")


def activity(body: dict[str, Any]) -> list[str]:
    lines = []
    for block in body["content"]:
        if block["type"] == "server_tool_use":
            lines.append(f"{block['name']} {short(block['input'])}")
        elif block["type"] == "mcp_tool_use":
            lines.append(f"mcp {block['server_name']}.{block['name']} {short(block['input'])}")
        elif block["type"] in _RESULTS:
            lines.append(f"  → {block['type']}: {_result(block)}")
    billed = (body.get("usage") or {}).get("server_tool_use")  # an accepted body's usage is an object or null
    if type(billed) is dict and billed:
        lines.append("billed by the provider: " + ", ".join(f"{key} {short(count)}" for key, count in billed.items()))
    return lines


_RESULT_WORDS: Final = (("error_code", "error"), ("return_code", "return code"), ("stdout", "stdout"), ("url", "fetched"))


def _result(block: dict[str, Any]) -> str:
    content = block.get("content")
    if type(content) is list and block["type"] != "mcp_tool_result":
        return f"{len(content)} results"
    shown = [f"{word} {short(content[key])}" for key, word in _RESULT_WORDS if type(content) is dict and key in content]
    return ("error " if block.get("is_error") is True else "") + (", ".join(shown) or short(content))


def read_usage(usage: dict[str, Any], problems: list[str]) -> AnthropicUsageDerivation:
    counts: dict[str, Any] = {key: counter(usage, key, f"usage.{key}", problems) for key in _COUNTERS}
    split = member_object(usage, "cache_creation", "usage.cache_creation", problems)
    ttl = tuple((key, counter(split, key, f"usage.cache_creation.{key}", problems)) for key in split)
    return AnthropicUsageDerivation(**counts, cache_creation=ttl)


def dropped_paths(body: dict[str, Any], derivation: object) -> list[str]:
    blocks = [_KEPT_BLOCKS.get(block["type"], DROPPED) for block in body["content"]]
    shape = {"type": None, "role": None, "content": blocks, "stop_reason": None, "usage": _KEPT_USAGE}
    return unkept_paths(body, shape)
