"""The OpenAI Responses seam (the rules, in order: docs/normalize.md, "Responses: reject first").

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET

from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, StopReason, ToolCall, Usage
from tiny_agent.wire.seam import (
    DROPPED,
    MISSING,
    Reject,
    answer_object,
    counter,
    describe,
    member_object,
    optional_counter,
    reasoning_part,
    rebuild,
    refusal,
    reported_cost,
    require_array,
    require_object,
    require_string,
    require_text,
    short,
    unkept_paths,
)


class ResponsesUsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="responses"):
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning: int | None = None
    """``output_tokens_details.reasoning_tokens``, when reported (part of ``output_tokens``)."""
    cost: float | None = None
    """Provider-reported cost (OpenRouter's ``usage.cost``), kept for audit, not in the ledger."""

    @property
    def usage(self) -> Usage:
        # Responses counts cached (and, where reported, cache-write) tokens inside input_tokens; the ledger's input is net.
        net_input = max(0, self.input_tokens - self.cached_tokens - self.cache_write_tokens)
        reasoning = UNSET if self.reasoning is None else self.reasoning
        return Usage(net_input, self.output_tokens, self.cached_tokens, self.cache_write_tokens, reasoning)

    def explain(self) -> str:
        usage = self.usage
        clamp = " (clamped at 0)" if self.input_tokens - self.cached_tokens - self.cache_write_tokens < 0 else ""
        return (
            f"input_tokens {self.input_tokens} − cached {self.cached_tokens} − write {self.cache_write_tokens}"
            f" = input {usage.input}{clamp} (Responses counts cache reads and writes inside input_tokens);"
            f" output_tokens {self.output_tokens} = output {usage.output}"
            + reasoning_part("output_tokens_details.reasoning_tokens", self.reasoning)
        )


_HOSTED: Final = {
    "web_search_call": ("action",),
    "file_search_call": ("queries", "results"),
    "mcp_list_tools": ("server_label", "tools"),
    "mcp_call": ("server_label", "name", "arguments", "output", "error"),
    "image_generation_call": ("size", "output_format", "result"),
    "code_interpreter_call": ("code", "outputs"),
}
"""Items the provider ran itself (hosted tools), and the members their activity line shows."""
_KNOWN_ITEMS: Final = f"message, function_call, reasoning, {', '.join(_HOSTED)}"
_KEPT_PARTS: Final = {"output_text": {"type": None, "text": None}, "refusal": {"type": None, "refusal": None}}
_KEPT_CALL: Final = {"type": None, "call_id": None, "name": None, "arguments": None}
_KEPT_USAGE: Final = {
    "input_tokens": None,
    "input_tokens_details": {"cached_tokens": None, "cache_write_tokens": None},
    "output_tokens": None,
    "output_tokens_details": {"reasoning_tokens": None},
    "cost": None,
}


def finish_reason(body: dict[str, Any]) -> Any:
    status = body.get("status")
    details = body.get("incomplete_details")
    reason = details.get("reason") if type(details) is dict else None
    return reason if status == "incomplete" and type(reason) is str else status


def answer(body: Any) -> tuple[AssistantMessage, StopReason]:
    truncated = _truncated(body)
    message = rebuild(body.get("output", MISSING), "output", _item)
    if any(part["type"] == "refusal" for item in body["output"] if item["type"] == "message" for part in item["content"]):
        return refusal(message, "output")
    return message, "length" if truncated else ("toolUse" if message.tool_calls is not UNSET else "stop")


def _truncated(body: Any) -> bool:
    """Whether a finished answer was cut at the output cap (anything else is rejected)."""
    response_object = answer_object(body, describe).get("object", MISSING)
    if response_object != "response":
        raise Reject(f'object is {describe(response_object)} (expected "response")')
    status = body.get("status", MISSING)
    if status == "completed":
        return False
    if status == "incomplete":
        details = body.get("incomplete_details")
        if type(details) is not dict:
            raise Reject(f"incomplete_details is {describe(details)} (expected an object with a reason)")
        reason = details.get("reason", MISSING)
        if reason == "max_output_tokens":
            return True
        if reason == "content_filter":
            raise Reject("status incomplete (content_filter): the provider withheld the answer")
        raise Reject(f"status incomplete with reason {describe(reason)}, not one the seam knows (max_output_tokens)")
    if status == "failed":
        raise Reject("status failed (and error is null)")
    if type(status) is not str:
        raise Reject(f"status is {describe(status)} (expected a string)")
    raise Reject(f"status {short(status)} is not a finished answer (expected completed, or incomplete at max_output_tokens)")


def _item(item_type: Any, item: dict[str, Any], where: str) -> list[str] | ToolCall | None:
    if item_type == "message":
        return _message_texts(item, where)
    if item_type == "function_call":
        return _tool_call(item, where)
    if item_type == "reasoning" or (type(item_type) is str and item_type in _HOSTED):
        return None
    if item_type == "mcp_approval_request":
        raise Reject(f"{where} asks for approval of an MCP call (mcp_approval_request), which tiny-agent does not give")
    raise Reject(f"{where}.type is {describe(item_type)}, not an item the seam knows ({_KNOWN_ITEMS})")


def _message_texts(item: dict[str, Any], where: str) -> list[str]:
    role = item.get("role", MISSING)
    if role != "assistant":
        raise Reject(f'{where}.role is {describe(role)} (expected "assistant")')
    texts: list[str] = []
    for index, value in enumerate(require_array(item.get("content", MISSING), f"{where}.content")):
        part_where = f"{where}.content[{index}]"
        part = require_object(value, part_where)
        part_type = part.get("type", MISSING)
        if part_type != "output_text" and part_type != "refusal":
            raise Reject(f"{part_where}.type is {describe(part_type)}, not a part the seam knows (output_text, refusal)")
        # A refusal part's text is the answer too (the step then stops with `refusal`).
        texts.append(require_string(part, "text" if part_type == "output_text" else "refusal", part_where))
    return texts


def _tool_call(item: dict[str, Any], where: str) -> ToolCall:
    call_id = require_text(item, "call_id", where)
    name = require_text(item, "name", where)
    arguments = item.get("arguments", MISSING)
    if type(arguments) is not str:
        raise Reject(f"{where}.arguments is {describe(arguments)} (expected a string of JSON text)")
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def read_usage(usage: dict[str, Any], problems: list[str]) -> ResponsesUsageDerivation:
    details = member_object(usage, "input_tokens_details", "usage.input_tokens_details", problems)
    output_details = member_object(usage, "output_tokens_details", "usage.output_tokens_details", problems)
    return ResponsesUsageDerivation(
        input_tokens=counter(usage, "input_tokens", "usage.input_tokens", problems),
        cached_tokens=counter(details, "cached_tokens", "usage.input_tokens_details.cached_tokens", problems),
        output_tokens=counter(usage, "output_tokens", "usage.output_tokens", problems),
        cache_write_tokens=counter(details, "cache_write_tokens", "usage.input_tokens_details.cache_write_tokens", problems),
        reasoning=optional_counter(output_details, "reasoning_tokens", "usage.output_tokens_details.reasoning_tokens", problems),
        cost=reported_cost(usage),
    )


def dropped_paths(body: dict[str, Any], derivation: object) -> list[str]:
    shape = {
        "object": None,
        "status": None,
        "error": None,
        "incomplete_details": {"reason": None},
        "output": [_kept_item(item) for item in body["output"]],
        "usage": _KEPT_USAGE,
    }
    return unkept_paths(body, shape)


def _kept_item(item: dict[str, Any]) -> Any:
    if item["type"] == "message":
        return {"type": None, "role": None, "content": [_KEPT_PARTS[part["type"]] for part in item["content"]]}
    if item["type"] == "function_call":
        return _KEPT_CALL
    return DROPPED


def activity(body: dict[str, Any]) -> list[str]:
    """Each hosted item: its type and status, and the members that say what it did."""
    lines = []
    for item in body["output"]:
        shown = _HOSTED.get(item["type"])
        if shown is not None:
            members = "; ".join(f"{key} {_brief(key, item[key])}" for key in shown if key in item)
            status = item.get("status")
            lines.append(f"{item['type']}{f' {status}' if type(status) is str else ''}: {members}")
    return lines


def _brief(key: str, value: Any) -> str:
    if type(value) is list and key != "queries" and key != "outputs":
        return f"{len(value)} {key}"
    if key == "result" and type(value) is str:
        return f"{len(value) * 3 // 4} bytes of base64 (kept in the raw body)"
    return short(value)
