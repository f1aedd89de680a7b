"""OpenAI Responses: stateless requests from the canonical transcript, responses into it.

**Requests.** The whole active context goes as input items every time, with
``store: false``: the journal is the only source of truth, so no server-side
state (``previous_response_id``, stored responses) is ever used.  The system
prompt is ``instructions``; a user message is a ``message`` item of
``input_text``; an assistant message is a ``message`` item of ``output_text``
(when it said anything) followed by one ``function_call`` item per call; a
tool message is a ``function_call_output`` item.

**Responses** (a whole body, or the terminal event of a stream) go through the
same seam as Chat Completions: reject first, rebuild from a whitelist, and
return :class:`~tiny_agent.wire.chat.seam.Accepted` or
:class:`~tiny_agent.wire.chat.seam.Rejected` with a
:class:`~tiny_agent.wire.chat.seam.ResponsesUsageDerivation`.

Pure: no I/O.  The seam never raises for any input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.tools import ToolSpec
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, Message, StopReason, ToolCall, ToolMessage, UserMessage
from tiny_agent.wire.chat.seam import DROPPED, Accepted, Outcome, Rejected, ResponsesUsageDerivation, unkept_paths
from tiny_agent.wire.request import RequestOptions, WireRequest
from tiny_agent.wire.seam import (
    NormalizedStream,
    Reassembly,
    Reject,
    assistant_message,
    counter,
    decode_body,
    describe,
    details_object,
    event_object,
    require_array,
    require_object,
    require_text,
    stream_text,
    text_member,
    usage_object,
)
from tiny_agent.wire.sse import parse_events
from tiny_agent.wire.wording import MISSING, error_text, short

PATH: Final = "/responses"


# == requests =================================================================


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


class ResponsesBody(msgspec.Struct, frozen=True, kw_only=True):
    """The request body; members encode in this order and unset ones are left out."""

    model: str
    instructions: str | UnsetType = UNSET
    input: list[InputItem]
    tools: list[FunctionTool] | UnsetType = UNSET
    max_output_tokens: int | UnsetType = UNSET
    store: Literal[False] = False
    """Always sent: the provider keeps nothing, and no request refers to anything it kept."""
    stream: Literal[True] | UnsetType = UNSET


def responses_request(
    model: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    options: RequestOptions | None = None,
) -> WireRequest:
    """The ``POST /responses`` request for this context, stateless."""
    chosen = options or RequestOptions()
    body = ResponsesBody(
        model=model,
        instructions=system if system else UNSET,
        input=input_items(messages),
        tools=[FunctionTool(spec.name, spec.description, spec.parameters) for spec in tools] if tools else UNSET,
        max_output_tokens=UNSET if chosen.max_tokens is None else chosen.max_tokens,
        stream=True if chosen.stream else UNSET,
    )
    return WireRequest(path=PATH, body=msgspec.json.encode(body), stream=chosen.stream)


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


# == responses ================================================================

_KNOWN_ITEMS: Final = "message, function_call, reasoning"
_KEPT_PART: Final = {"type": None, "text": None}
_KEPT_CALL: Final = {"type": None, "call_id": None, "name": None, "arguments": None}
_KEPT_USAGE: Final = {"input_tokens": None, "input_tokens_details": {"cached_tokens": None}, "output_tokens": None}


def normalize_responses_body(body: bytes | str) -> Outcome:
    """Parse a whole response body (strict JSON) and normalize it."""
    try:
        value = decode_body(body)
    except Reject as rejection:
        return Rejected(reason=rejection.reason, usage=ResponsesUsageDerivation().usage, derivation=ResponsesUsageDerivation())
    return normalize_responses(value)


def normalize_responses(body: Any) -> Outcome:
    """Normalize the decoded body of one Responses response."""
    derivation, usage_problem = read_usage(body)
    metadata = _metadata(body)
    try:
        truncated = _truncated(body)
        message = _rebuild(require_array(body.get("output", MISSING), "output"))
    except Reject as rejection:
        return Rejected(reason=rejection.reason, usage=derivation.usage, derivation=derivation, **metadata)
    if usage_problem is not None:
        return Rejected(reason=usage_problem, usage=derivation.usage, derivation=derivation, **metadata)
    stop_reason: StopReason = "length" if truncated else ("toolUse" if message.tool_calls is not UNSET else "stop")
    return Accepted(
        message=message,
        stop_reason=stop_reason,
        usage=derivation.usage,
        derivation=derivation,
        dropped=dropped_paths(body),
        **metadata,
    )


def _metadata(body: Any) -> dict[str, Any]:
    if type(body) is not dict:
        return {}
    status = body.get("status")
    details = body.get("incomplete_details")
    reason = details.get("reason") if type(details) is dict else None
    finish = reason if status == "incomplete" and type(reason) is str else status
    return {
        "finish_reason": finish if type(finish) is str else None,
        "response_id": text_member(body, "id"),
        "model": text_member(body, "model"),
    }


def _truncated(body: Any) -> bool:
    """Whether a finished answer was cut at the output cap; anything but a finished answer is rejected."""
    if type(body) is not dict:
        raise Reject(f"response is {describe(body)}, not an object")
    error = body.get("error")
    if error is not None:
        raise Reject(f"provider reported an error: {error_text(error)}")
    response_object = body.get("object", MISSING)
    if response_object != "response":
        raise Reject(f'object is {describe(response_object)} (expected "response")')
    status = body.get("status", MISSING)
    if status == "completed":
        return False
    if status == "incomplete":
        reason = _incomplete_reason(body.get("incomplete_details"))
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


def _incomplete_reason(details: Any) -> Any:
    if type(details) is not dict:
        raise Reject(f"incomplete_details is {describe(details)} (expected an object with a reason)")
    return details.get("reason", MISSING)


def _rebuild(output: list[Any]) -> AssistantMessage:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, value in enumerate(output):
        where = f"output[{index}]"
        item = require_object(value, where)
        item_type = item.get("type", MISSING)
        if item_type == "message":
            texts.extend(_message_texts(item, where))
        elif item_type == "function_call":
            calls.append(_tool_call(item, where))
        elif item_type == "reasoning":
            continue
        else:
            raise Reject(f"{where}.type is {describe(item_type)}, not an item the seam knows ({_KNOWN_ITEMS})")
    return assistant_message(texts, calls, "output")


def _message_texts(item: dict[str, Any], where: str) -> list[str]:
    role = item.get("role", MISSING)
    if role != "assistant":
        raise Reject(f'{where}.role is {describe(role)} (expected "assistant")')
    texts: list[str] = []
    for index, value in enumerate(require_array(item.get("content", MISSING), f"{where}.content")):
        part_where = f"{where}.content[{index}]"
        part = require_object(value, part_where)
        part_type = part.get("type", MISSING)
        if part_type == "refusal":
            raise Reject(f"{part_where} is a refusal: the model declined to answer")
        if part_type != "output_text":
            raise Reject(f"{part_where}.type is {describe(part_type)}, not a part the seam knows (output_text, refusal)")
        text = part.get("text", MISSING)
        if type(text) is not str:
            raise Reject(f"{part_where}.text is {describe(text)} (expected a string)")
        texts.append(text)
    return texts


def _tool_call(item: dict[str, Any], where: str) -> ToolCall:
    call_id = require_text(item, "call_id", where)
    name = require_text(item, "name", where)
    arguments = item.get("arguments", MISSING)
    if type(arguments) is not str:
        raise Reject(f"{where}.arguments is {describe(arguments)} (expected a string of JSON text)")
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def read_usage(body: Any) -> tuple[ResponsesUsageDerivation, str | None]:
    """The derivation (unreadable counters count as 0) and the first problem found, if any."""
    problems: list[str] = []
    usage = usage_object(body, "usage", problems)
    details = details_object(usage, "input_tokens_details", "usage.input_tokens_details", problems)
    derivation = ResponsesUsageDerivation(
        input_tokens=counter(usage, "input_tokens", "usage.input_tokens", problems),
        cached_tokens=counter(details, "cached_tokens", "usage.input_tokens_details.cached_tokens", problems),
        output_tokens=counter(usage, "output_tokens", "usage.output_tokens", problems),
    )
    return derivation, problems[0] if problems else None


def dropped_paths(body: dict[str, Any]) -> list[str]:
    """The paths of every member of an accepted body the canonical result was not built from."""
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
        return {"type": None, "role": None, "content": [_KEPT_PART] * len(item["content"])}
    if item["type"] == "function_call":
        return _KEPT_CALL
    return DROPPED


# == streams ==================================================================

_TERMINAL_STATUS: Final = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
"""The events that carry the whole response, and the status each must carry."""


class _Terminal:
    """What a Responses stream is reduced to: the last response snapshot, and the terminal event's index."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] | None = None
        """The most recent ``response`` any event carried (a cut stream's usage comes from it)."""
        self.index: int | None = None
        self.not_carried: list[str] = []

    def event(self, value: dict[str, Any], index: int) -> None:
        where = f"events[{index}]"
        event_type = value["type"]
        if event_type == "error":
            detail = value.get("error") if type(value.get("error")) is dict else value
            raise Reject(f"{where}: stream reported an error: {error_text(detail)}")
        if self.index is not None:
            raise Reject(f"{where} ({event_type}) comes after the terminal event events[{self.index}]")
        response = value.get("response", MISSING)
        if type(response) is dict:
            self.latest = response
        if event_type not in _TERMINAL_STATUS:
            return
        body = require_object(response, f"{where}.response")
        status = body.get("status", MISSING)
        if status != _TERMINAL_STATUS[event_type]:
            raise Reject(f"{where} is {event_type} but its response.status is {describe(status)}")
        self.index = index
        # Every earlier event is superseded by the whole response this one carries.
        if index:
            self.not_carried.append(f"events[0:{index}]")
        self.not_carried.extend(unkept_paths(value, {"type": None, "response": None}, where))


def reassemble_responses_stream(stream: bytes | str) -> Reassembly:
    """A Responses event stream as the one body its terminal event carries."""
    text = stream_text(stream)
    if isinstance(text, str):
        return Reassembly(body=None, problem=text, event_count=0, byte_size=len(stream), not_carried=[])
    source, size = text
    events = parse_events(source)
    terminal = _Terminal()
    try:
        for index, event in enumerate(events):
            terminal.event(event_object(event.data, event.event, f"events[{index}]"), index)
        if terminal.index is None:
            raise Reject(
                f"stream ended without response.completed, response.incomplete or response.failed"
                f" (after {len(events)} complete events)"
            )
    except Reject as rejection:
        return Reassembly(
            body=terminal.latest,
            problem=rejection.reason,
            event_count=len(events),
            byte_size=size,
            not_carried=terminal.not_carried,
        )
    return Reassembly(
        body=terminal.latest, problem=None, event_count=len(events), byte_size=size, not_carried=terminal.not_carried
    )


def normalize_responses_stream(stream: bytes | str) -> NormalizedStream:
    """Reassemble a Responses event stream and normalize the body; a rejected stream keeps the usage that arrived."""
    reassembly = reassemble_responses_stream(stream)
    if reassembly.problem is None:
        return NormalizedStream(outcome=normalize_responses(reassembly.body), reassembly=reassembly)
    derivation, _ = read_usage(reassembly.body)
    rejected = Rejected(reason=reassembly.problem, usage=derivation.usage, derivation=derivation, **_metadata(reassembly.body))
    return NormalizedStream(outcome=rejected, reassembly=reassembly)
