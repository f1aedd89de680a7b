"""The Chat Completions seam (the rules, what is kept and how usage is derived: docs/normalize.md).

Nothing malformed is coerced: that is a rejection, or a quirk adapter's job (:mod:`.adapters`).
Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET

from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, StopReason, ToolCall, Usage
from tiny_agent.wire.seam import (
    MISSING,
    Reject,
    answer_object,
    counter,
    describe,
    kind,
    member_object,
    optional_counter,
    reasoning_part,
    refusal,
    reported_cost,
    short,
    unkept_paths,
)

CacheSource = Literal["prompt_tokens_details.cached_tokens", "prompt_cache_hit_tokens"]


class ChatUsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="chat"):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read: int = 0
    cache_read_source: CacheSource | None = None
    cache_write: int = 0
    cost: float | None = None
    """Provider-reported cost, when the provider reports one (kept for audit, not in the ledger)."""
    reasoning: int | None = None
    """``completion_tokens_details.reasoning_tokens``, when reported (part of ``completion_tokens``)."""

    @property
    def usage(self) -> Usage:
        net_input = max(0, self.prompt_tokens - self.cache_read - self.cache_write)
        reasoning = UNSET if self.reasoning is None else self.reasoning
        return Usage(net_input, self.completion_tokens, self.cache_read, self.cache_write, reasoning)

    def explain(self) -> str:
        usage = self.usage
        clamp = " (clamped at 0)" if self.prompt_tokens - self.cache_read - self.cache_write < 0 else ""
        return (
            f"prompt_tokens {self.prompt_tokens} − cached {self.cache_read} − write {self.cache_write}"
            f" = input {usage.input}{clamp}; completion_tokens {self.completion_tokens} = output {usage.output}"
            + reasoning_part("completion_tokens_details.reasoning_tokens", self.reasoning)
        )


def finish_reason(body: dict[str, Any]) -> Any:
    choices = body.get("choices")
    return choices[0].get("finish_reason") if type(choices) is list and choices and type(choices[0]) is dict else None


def answer(body: Any) -> tuple[AssistantMessage, StopReason]:
    choice = _first_choice(body)
    message = _assistant_message(choice.get("message", MISSING))
    refused = _refusal(choice["message"])
    finish = choice.get("finish_reason")
    if refused and finish in (None, "stop", "length"):
        # The refusal's text follows whatever content came before it: it is the answer.
        return refusal(AssistantMessage(content=(message.content or "") + refused, tool_calls=message.tool_calls), "choices[0]")
    return message, _stop_reason(finish, message)


def _refusal(message: dict[str, Any]) -> str:
    """``refusal``: a string or null (absent: none); empty means the model did not refuse."""
    value = message.get("refusal")
    if value is not None and type(value) is not str:
        raise Reject(f"choices[0].message.refusal is {kind(value)} (expected a string or null)")
    return value or ""


def _first_choice(body: Any) -> dict[str, Any]:
    choices = answer_object(body, kind).get("choices", MISSING)
    if choices is MISSING or choices is None:
        raise Reject("response has no choices")
    if type(choices) is not list:
        raise Reject(f"choices is {kind(choices)} (expected an array)")
    if not choices:
        raise Reject("choices is empty")
    choice = choices[0]
    if type(choice) is not dict:
        raise Reject(f"choices[0] is {kind(choice)} (expected an object)")
    return choice


def _assistant_message(value: Any) -> AssistantMessage:
    where = "choices[0].message"
    if value is MISSING:
        raise Reject(f"{where} is missing")
    if type(value) is not dict:
        raise Reject(f"{where} is {kind(value)} (expected an object)")
    role = value.get("role", MISSING)
    if role != "assistant":
        raise Reject(f"{where}.role is {'missing' if role is MISSING else short(role)} (expected \"assistant\")")
    content = value.get("content", MISSING)
    if content is MISSING:
        raise Reject(f"{where}.content is missing (expected a string or null)")
    if content is not None and type(content) is not str:
        raise Reject(f"{where}.content is {kind(content)} (expected a string or null)")
    calls = _tool_calls(value.get("tool_calls"))
    if not calls:
        return AssistantMessage(content=content)
    return AssistantMessage(content=content, tool_calls=calls)


def _tool_calls(value: Any) -> list[ToolCall]:
    where = "choices[0].message.tool_calls"
    if value is None:
        return []
    if type(value) is not list:
        raise Reject(f"{where} is {kind(value)} (expected an array or null)")
    if not value:
        raise Reject(f"{where} is an empty array (expected null, absent, or at least one call)")
    calls = [_tool_call(call, f"{where}[{index}]") for index, call in enumerate(value)]
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call.id in seen:
            raise Reject(f"{where}[{index}].id {short(call.id)} repeats an earlier call id")
        seen.add(call.id)
    return calls


def _tool_call(value: Any, where: str) -> ToolCall:
    if type(value) is not dict:
        raise Reject(f"{where} is {kind(value)} (expected an object)")
    call_id = value.get("id")
    if type(call_id) is not str or not call_id:
        raise Reject(f"{where}.id is {describe(call_id, 'strings')} (expected a non-empty string)")
    if value.get("type") != "function":
        raise Reject(f"{where}.type is {describe(value.get('type', MISSING), 'strings')} (expected \"function\")")
    function = value.get("function")
    if type(function) is not dict:
        raise Reject(f"{where}.function is {describe(function, 'strings')} (expected an object)")
    name = function.get("name")
    if type(name) is not str or not name:
        raise Reject(f"{where}.function.name is {describe(name, 'strings')} (expected a non-empty string)")
    arguments = function.get("arguments", MISSING)
    if type(arguments) is not str:
        raise Reject(f"{where}.function.arguments is {describe(arguments, 'strings')} (expected a string of JSON text)")
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def _stop_reason(finish_reason: Any, message: AssistantMessage) -> StopReason:
    has_calls = message.tool_calls is not msgspec.UNSET
    if finish_reason == "length":
        return "length"
    if finish_reason in ("tool_calls", "function_call"):
        if not has_calls:
            raise Reject(f"finish_reason {finish_reason} but the message carries no tool calls")
        return "toolUse"
    if finish_reason is None or finish_reason == "stop":
        return "toolUse" if has_calls else "stop"
    if finish_reason == "content_filter":
        raise Reject("finish_reason content_filter: the provider withheld the answer")
    if finish_reason == "error":
        raise Reject("finish_reason error: the provider failed while generating")
    if type(finish_reason) is not str:
        raise Reject(f"finish_reason is {kind(finish_reason)} (expected a string or null)")
    raise Reject(f"finish_reason {short(finish_reason)} is not one the seam knows (stop, length, tool_calls)")


def read_usage(usage: dict[str, Any], problems: list[str]) -> ChatUsageDerivation:
    prompt = counter(usage, "prompt_tokens", "usage.prompt_tokens", problems, "strings")
    completion = counter(usage, "completion_tokens", "usage.completion_tokens", problems, "strings")
    details = member_object(usage, "prompt_tokens_details", "usage.prompt_tokens_details", problems)
    cache_read = 0
    source: CacheSource | None = None
    if details.get("cached_tokens") is not None:
        cache_read = counter(details, "cached_tokens", "usage.prompt_tokens_details.cached_tokens", problems, "strings")
        source = "prompt_tokens_details.cached_tokens"
    elif usage.get("prompt_cache_hit_tokens") is not None:
        cache_read = counter(usage, "prompt_cache_hit_tokens", "usage.prompt_cache_hit_tokens", problems, "strings")
        source = "prompt_cache_hit_tokens"
    write = counter(details, "cache_write_tokens", "usage.prompt_tokens_details.cache_write_tokens", problems, "strings")
    output_details = member_object(usage, "completion_tokens_details", "usage.completion_tokens_details", problems)
    return ChatUsageDerivation(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cache_read=cache_read,
        cache_read_source=source,
        cache_write=write,
        cost=reported_cost(usage),
        reasoning=optional_counter(output_details, "reasoning_tokens", REASONING, problems),
    )


REASONING: Final = "usage.completion_tokens_details.reasoning_tokens"
_KEPT_CALL: Final = {"id": None, "type": None, "function": {"name": None, "arguments": None}}


def dropped_paths(body: Any, derivation: Any) -> list[str]:
    if not isinstance(derivation, ChatUsageDerivation):  # no usage object: nothing of it to list
        derivation = ChatUsageDerivation()
    kept_usage: dict[str, Any] = {"prompt_tokens": None, "completion_tokens": None}
    if derivation.reasoning is not None:
        kept_usage["completion_tokens_details"] = {"reasoning_tokens": None}
    details: dict[str, Any] = {"cache_write_tokens": None}
    if derivation.cache_read_source == "prompt_tokens_details.cached_tokens":
        details["cached_tokens"] = None
    elif derivation.cache_read_source == "prompt_cache_hit_tokens":
        kept_usage["prompt_cache_hit_tokens"] = None
    kept_usage["prompt_tokens_details"] = details
    message = body["choices"][0]["message"]
    calls = message.get("tool_calls")
    kept_message: dict[str, Any] = {"role": None, "content": None}
    if message.get("refusal"):
        kept_message["refusal"] = None
    if calls is not None:
        kept_message["tool_calls"] = [_KEPT_CALL] * len(calls)
    shape = {"choices": [{"message": kept_message, "finish_reason": None}], "usage": kept_usage}
    return unkept_paths(body, shape)


def activity(body: Any) -> list[str]:
    """Chat Completions has no hosted tool blocks."""
    return []
