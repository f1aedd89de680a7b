"""The normalization seam: one provider response in, a canonical assistant message out.

A Chat Completions response is a provider's wire format, not a message. The
seam rejects first and rebuilds second: the response must satisfy every rule
below, and the canonical message is then assembled from a whitelist of fields
(role, content, tool calls' id/type/name/arguments).  Everything else a
provider sends — ``reasoning``, ``refusal``, ``annotations``, ``audio``,
``tool_calls[i].index``, ``logprobs`` … — is listed as dropped and never
copied.  Nothing malformed is coerced: a list of content parts, an object for
``arguments`` or an unknown ``finish_reason`` is a rejection with a reason,
not a guess.

Usage is read for rejections too, so a response that was paid for is ledgered
once whatever became of it.

The outcome types (:class:`Accepted`, :class:`Rejected` and the usage
derivations) are shared by the three wire APIs: the Anthropic Messages and
OpenAI Responses seams in :mod:`tiny_agent.wire` return the same outcomes, each
with its own derivation.

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER, LineDecoder, ProfileViolation
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, StopReason, ToolCall, Usage
from tiny_agent.wire.wording import MISSING, error_text, kind, short

CacheSource = Literal["prompt_tokens_details.cached_tokens", "prompt_cache_hit_tokens"]



class UsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="chat"):
    """How the ledger's counters were derived from what a Chat Completions provider reported."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read: int = 0
    cache_read_source: CacheSource | None = None
    cache_write: int = 0
    cost: float | None = None
    """Provider-reported cost, when the provider reports one (kept for audit, not in the ledger)."""

    @property
    def usage(self) -> Usage:
        net_input = max(0, self.prompt_tokens - self.cache_read - self.cache_write)
        return Usage(input=net_input, output=self.completion_tokens, cacheRead=self.cache_read, cacheWrite=self.cache_write)

    def explain(self) -> str:
        """``prompt_tokens 1200 − cached 800 − write 300 = input 100; completion_tokens 40 = output 40``."""
        usage = self.usage
        clamp = " (clamped at 0)" if self.prompt_tokens - self.cache_read - self.cache_write < 0 else ""
        return (
            f"prompt_tokens {self.prompt_tokens} − cached {self.cache_read} − write {self.cache_write}"
            f" = input {usage.input}{clamp}; completion_tokens {self.completion_tokens} = output {usage.output}"
        )


class AnthropicUsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="anthropic"):
    """How the ledger's counters were derived from an Anthropic Messages ``usage`` object."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def usage(self) -> Usage:
        # Anthropic reports cache reads and writes beside input_tokens, not inside
        # it, so input_tokens already is the ledger's net input.
        return Usage(
            input=self.input_tokens,
            output=self.output_tokens,
            cacheRead=self.cache_read_input_tokens,
            cacheWrite=self.cache_creation_input_tokens,
        )

    @property
    def cost(self) -> float | None:
        """Anthropic reports no cost in the body."""
        return None

    def explain(self) -> str:
        """``input_tokens 20 = input 20 (cache read 12 and write 0 are counted apart …); output_tokens 5 = output 5``."""
        return (
            f"input_tokens {self.input_tokens} = input {self.input_tokens}"
            f" (nothing subtracted: Anthropic counts cache read {self.cache_read_input_tokens}"
            f" and cache write {self.cache_creation_input_tokens} apart from input_tokens);"
            f" output_tokens {self.output_tokens} = output {self.output_tokens}"
        )


class ResponsesUsageDerivation(msgspec.Struct, frozen=True, tag_field="api", tag="responses"):
    """How the ledger's counters were derived from an OpenAI Responses ``usage`` object."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    @property
    def usage(self) -> Usage:
        # Responses counts cached tokens inside input_tokens; the ledger's input is net of them.
        net_input = max(0, self.input_tokens - self.cached_tokens)
        return Usage(input=net_input, output=self.output_tokens, cacheRead=self.cached_tokens, cacheWrite=0)

    @property
    def cost(self) -> float | None:
        """The Responses API reports no cost in the body."""
        return None

    def explain(self) -> str:
        """``input_tokens 40 − cached 25 = input 15 (Responses counts cached tokens inside input_tokens); …``."""
        usage = self.usage
        clamp = " (clamped at 0)" if self.input_tokens - self.cached_tokens < 0 else ""
        return (
            f"input_tokens {self.input_tokens} − cached {self.cached_tokens} = input {usage.input}{clamp}"
            f" (Responses counts cached tokens inside input_tokens);"
            f" output_tokens {self.output_tokens} = output {usage.output}; cache write 0 (Responses reports none)"
        )


Derivation = UsageDerivation | AnthropicUsageDerivation | ResponsesUsageDerivation
"""The usage derivation of whichever wire API answered: each has ``usage``, ``cost`` and ``explain()``."""


class Accepted(msgspec.Struct, frozen=True):
    message: AssistantMessage
    stop_reason: StopReason
    usage: Usage
    derivation: Derivation
    dropped: list[str]
    """JSON paths of the members the canonical result was not built from, in document order."""
    finish_reason: str | None
    """The API's own word for why the answer ended: Chat ``finish_reason``, Anthropic
    ``stop_reason``, Responses ``status`` (or ``incomplete_details.reason`` when incomplete)."""
    response_id: str | None = None
    model: str | None = None


class Rejected(msgspec.Struct, frozen=True):
    reason: str
    """One line naming the path and the rule broken."""
    usage: Usage
    """What the provider reported before or despite the rejection: paid tokens are ledgered once."""
    derivation: Derivation
    finish_reason: str | None = None
    response_id: str | None = None
    model: str | None = None


Outcome = Accepted | Rejected


class _Reject(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def normalize_body(body: bytes | str) -> Outcome:
    """Parse a response body (strict JSON: no duplicate keys, no lone surrogates) and normalize it."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if not data.strip():
        return _rejected("response body is empty")
    try:
        value = LineDecoder().decode(data)
    except ProfileViolation as error:
        return _rejected(f"response body is not JSON: {error}")
    return normalize_response(value)


def normalize_response(body: Any) -> Outcome:
    """Normalize the decoded body of one Chat Completions response."""
    derivation, usage_problem = _read_usage(body)
    metadata = _metadata(body)
    try:
        choice = _first_choice(body)
        message = _assistant_message(choice.get("message", MISSING))
        finish_reason = choice.get("finish_reason")
        stop_reason = _stop_reason(finish_reason, message)
    except _Reject as rejection:
        return Rejected(reason=rejection.reason, usage=derivation.usage, derivation=derivation, **metadata)
    if usage_problem is not None:
        return Rejected(reason=usage_problem, usage=derivation.usage, derivation=derivation, **metadata)
    return Accepted(
        message=message,
        stop_reason=stop_reason,
        usage=derivation.usage,
        derivation=derivation,
        dropped=dropped_paths(body, derivation),
        **metadata,
    )


def _rejected(reason: str) -> Rejected:
    return Rejected(reason=reason, usage=Usage(), derivation=UsageDerivation())


def _metadata(body: Any) -> dict[str, Any]:
    if type(body) is not dict:
        return {}
    choices = body.get("choices")
    first = choices[0] if type(choices) is list and choices and type(choices[0]) is dict else {}
    finish = first.get("finish_reason")
    return {
        "finish_reason": finish if type(finish) is str else None,
        "response_id": body["id"] if type(body.get("id")) is str else None,
        "model": body["model"] if type(body.get("model")) is str else None,
    }


# -- the message --------------------------------------------------------------


def _first_choice(body: Any) -> dict[str, Any]:
    if type(body) is not dict:
        raise _Reject(f"response is {kind(body)}, not an object")
    error = body.get("error")
    if error is not None:
        raise _Reject(f"provider reported an error: {error_text(error)}")
    choices = body.get("choices", MISSING)
    if choices is MISSING or choices is None:
        raise _Reject("response has no choices")
    if type(choices) is not list:
        raise _Reject(f"choices is {kind(choices)} (expected an array)")
    if not choices:
        raise _Reject("choices is empty")
    choice = choices[0]
    if type(choice) is not dict:
        raise _Reject(f"choices[0] is {kind(choice)} (expected an object)")
    return choice


def _assistant_message(value: Any) -> AssistantMessage:
    where = "choices[0].message"
    if value is MISSING:
        raise _Reject(f"{where} is missing")
    if type(value) is not dict:
        raise _Reject(f"{where} is {kind(value)} (expected an object)")
    role = value.get("role", MISSING)
    if role != "assistant":
        shown = "missing" if role is MISSING else f"{short(role)}"
        raise _Reject(f"{where}.role is {shown} (expected \"assistant\")")
    content = value.get("content", MISSING)
    if content is MISSING:
        raise _Reject(f"{where}.content is missing (expected a string or null)")
    if content is not None and type(content) is not str:
        raise _Reject(f"{where}.content is {kind(content)} (expected a string or null)")
    calls = _tool_calls(value.get("tool_calls"))
    if not calls:
        return AssistantMessage(content=content)
    return AssistantMessage(content=content, tool_calls=calls)


def _tool_calls(value: Any) -> list[ToolCall]:
    where = "choices[0].message.tool_calls"
    if value is None:
        return []
    if type(value) is not list:
        raise _Reject(f"{where} is {kind(value)} (expected an array or null)")
    if not value:
        raise _Reject(f"{where} is an empty array (expected null, absent, or at least one call)")
    calls = [_tool_call(call, f"{where}[{index}]") for index, call in enumerate(value)]
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call.id in seen:
            raise _Reject(f"{where}[{index}].id {short(call.id)} repeats an earlier call id")
        seen.add(call.id)
    return calls


def _tool_call(value: Any, where: str) -> ToolCall:
    if type(value) is not dict:
        raise _Reject(f"{where} is {kind(value)} (expected an object)")
    call_id = value.get("id")
    if type(call_id) is not str or not call_id:
        raise _Reject(f"{where}.id is {_describe(call_id)} (expected a non-empty string)")
    if value.get("type") != "function":
        raise _Reject(f"{where}.type is {_describe(value.get('type', MISSING))} (expected \"function\")")
    function = value.get("function")
    if type(function) is not dict:
        raise _Reject(f"{where}.function is {_describe(function)} (expected an object)")
    name = function.get("name")
    if type(name) is not str or not name:
        raise _Reject(f"{where}.function.name is {_describe(name)} (expected a non-empty string)")
    arguments = function.get("arguments", MISSING)
    if type(arguments) is not str:
        raise _Reject(f"{where}.function.arguments is {_describe(arguments)} (expected a string of JSON text)")
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def _stop_reason(finish_reason: Any, message: AssistantMessage) -> StopReason:
    has_calls = message.tool_calls is not msgspec.UNSET
    if finish_reason == "length":
        return "length"
    if finish_reason in ("tool_calls", "function_call"):
        if not has_calls:
            raise _Reject(f"finish_reason {finish_reason} but the message carries no tool calls")
        return "toolUse"
    if finish_reason is None or finish_reason == "stop":
        return "toolUse" if has_calls else "stop"
    if finish_reason == "content_filter":
        raise _Reject("finish_reason content_filter: the provider withheld the answer")
    if finish_reason == "error":
        raise _Reject("finish_reason error: the provider failed while generating")
    if type(finish_reason) is not str:
        raise _Reject(f"finish_reason is {kind(finish_reason)} (expected a string or null)")
    raise _Reject(f"finish_reason {short(finish_reason)} is not one the seam knows (stop, length, tool_calls)")


# -- usage --------------------------------------------------------------------


def _read_usage(body: Any) -> tuple[UsageDerivation, str | None]:
    """The derivation (unreadable counters count as 0) and the first problem found, if any."""
    usage = body.get("usage") if type(body) is dict else None
    if usage is None:
        return UsageDerivation(), None
    if type(usage) is not dict:
        return UsageDerivation(), f"usage is {kind(usage)} (expected an object)"
    problems: list[str] = []
    prompt = _counter(usage, "prompt_tokens", "usage.prompt_tokens", problems)
    completion = _counter(usage, "completion_tokens", "usage.completion_tokens", problems)
    details = usage.get("prompt_tokens_details")
    if details is not None and type(details) is not dict:
        problems.append(f"usage.prompt_tokens_details is {kind(details)} (expected an object)")
        details = None
    details = details or {}
    cache_read = 0
    source: CacheSource | None = None
    if details.get("cached_tokens") is not None:
        cache_read = _counter(details, "cached_tokens", "usage.prompt_tokens_details.cached_tokens", problems)
        source = "prompt_tokens_details.cached_tokens"
    elif usage.get("prompt_cache_hit_tokens") is not None:
        cache_read = _counter(usage, "prompt_cache_hit_tokens", "usage.prompt_cache_hit_tokens", problems)
        source = "prompt_cache_hit_tokens"
    cache_write = _counter(details, "cache_write_tokens", "usage.prompt_tokens_details.cache_write_tokens", problems)
    cost = usage.get("cost")
    derivation = UsageDerivation(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cache_read=cache_read,
        cache_read_source=source,
        cache_write=cache_write,
        cost=float(cost) if isinstance(cost, int | float) and type(cost) is not bool else None,
    )
    return derivation, problems[0] if problems else None


def _counter(container: dict[str, Any], key: str, where: str, problems: list[str]) -> int:
    value = container.get(key)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        problems.append(f"{where} is {_describe(value)} (expected a non-negative integer)")
        return 0
    if value > MAX_SAFE_INTEGER:
        problems.append(f"{where} is {value}, beyond the largest count the journal can hold")
        return 0
    return value


# -- what was not kept --------------------------------------------------------

_KEPT_CALL: Final = {"id": None, "type": None, "function": {"name": None, "arguments": None}}


def dropped_paths(body: Any, derivation: UsageDerivation) -> list[str]:
    """The JSON paths of every member the canonical result was not built from, shallowest first."""
    kept_usage: dict[str, Any] = {"prompt_tokens": None, "completion_tokens": None}
    details: dict[str, Any] = {"cache_write_tokens": None}
    if derivation.cache_read_source == "prompt_tokens_details.cached_tokens":
        details["cached_tokens"] = None
    elif derivation.cache_read_source == "prompt_cache_hit_tokens":
        kept_usage["prompt_cache_hit_tokens"] = None
    kept_usage["prompt_tokens_details"] = details
    message = body["choices"][0]["message"]
    calls = message.get("tool_calls")
    kept_message: dict[str, Any] = {"role": None, "content": None}
    if calls is not None:
        kept_message["tool_calls"] = [_KEPT_CALL] * len(calls)
    shape = {"choices": [{"message": kept_message, "finish_reason": None}], "usage": kept_usage}
    return unkept_paths(body, shape)


DROPPED: Final = object()
"""In a kept shape: a member of which nothing is kept (listed whole)."""


def unkept_paths(value: Any, kept: Any, path: str = "") -> list[str]:
    """The JSON paths of members of ``value`` outside the ``kept`` shape, in document order, shallowest first.

    In a shape, ``None`` keeps a member whole, a dict or a list keeps the
    members it names, and :data:`DROPPED` keeps nothing of it.
    """
    out: list[str] = []
    _walk(value, kept, path, out)
    return out


def _walk(value: Any, kept: Any, path: str, out: list[str]) -> None:
    if kept is None:
        return
    if kept is DROPPED:
        out.append(path)
        return
    if type(value) is dict and type(kept) is dict:
        for key, member in value.items():
            child = f"{path}.{key}" if path else key
            if key in kept:
                _walk(member, kept[key], child, out)
            else:
                out.append(child)
    elif type(value) is list and type(kept) is list:
        for index, item in enumerate(value):
            child = f"{path}[{index}]"
            if index < len(kept):
                _walk(item, kept[index], child, out)
            else:
                out.append(child)


# -- wording ------------------------------------------------------------------


def _describe(value: Any) -> str:
    if value is MISSING:
        return "missing"
    if type(value) is str:
        return "an empty string" if not value else short(value)
    return kind(value)
