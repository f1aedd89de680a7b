"""Whole bodies, event streams and error bodies for the three wire APIs, built from one neutral :class:`Answer` (a
stream and its whole body normalize alike; docs/loopback.md, *Building replies*).  Pure: no I/O."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from tiny_agent.wire.registry import Api

CREATED: Final = 1764700000
KEEP_ALIVE: Final = "OPENROUTER PROCESSING"
_SIGNATURE: Final = "EqQBCgIYAhIMbG9vcGJhY2sgc2lnbmF0dXJlGgxsb29wYmFjaw=="


class Event(msgspec.Struct, frozen=True):
    data: str
    """Written as one ``data:`` line per line of it."""
    event: str | None = None


class Comment(msgspec.Struct, frozen=True):
    """A ``:`` line, as keep-alives are (``: OPENROUTER PROCESSING``)."""

    text: str


StreamItem = Event | Comment
Items = list[StreamItem]
Streamed = tuple[Items, Items, Items]
"""The events, the closing events of a complete stream, and those of a stream that ends in an error."""


def encode_events(items: Sequence[StreamItem], line_end: str = "\n") -> bytes:
    """The ``text/event-stream`` body (the inverse of :mod:`tiny_agent.wire.sse`): each item's lines, then a blank line."""
    return b"".join(_encoded(item, line_end) for item in items)


def _encoded(item: StreamItem, line_end: str) -> bytes:
    if isinstance(item, Comment):
        lines = [f":{item.text and ' ' + item.text}"]
    else:
        lines = [f"event: {item.event}"] if item.event is not None else []
        lines.extend(f"data: {line}" for line in item.data.split("\n"))
    return (line_end.join(lines) + line_end + line_end).encode()


class Call(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    arguments: str = "{}"
    """The JSON text of the arguments (an object, for Anthropic)."""
    id: str | None = None
    """None: ``call_N`` (``toolu_N`` for Anthropic), N the call's position."""


class Tokens(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Usage in the ledger's terms: ``input`` is net of the cache (Responses has no cache write)."""

    input: int = 100
    output: int = 10
    cache_read: int = 40
    cache_write: int = 0
    reasoning: int = 0


class Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str | None = None
    calls: tuple[Call, ...] = ()
    reasoning: str | None = None
    tokens: Tokens = Tokens()
    truncated: bool = False
    id: str | None = None
    """None: ``gen-loopback`` / ``msg_loopback`` / ``resp_loopback``."""
    model: str = "test/model"


class StreamShape(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """docs/loopback.md, "Building replies", says what each field does to a stream."""

    piece: int = 5
    keep_alives: bool = False
    pings: bool = True
    usage_chunk: bool = True
    ending: Literal["complete", "error", "cut"] = "complete"
    line_end: Literal["\n", "\r\n"] = "\n"
    interleave_calls: bool = False


def call_id(api: Api, position: int) -> str:
    return f"toolu_{position}" if api == "anthropic" else f"call_{position}"


def whole_body(api: Api, answer: Answer) -> bytes:
    return _json(_API[api][0](answer))


def event_stream(api: Api, answer: Answer, shape: StreamShape = StreamShape()) -> bytes:
    items, closing, error = _API[api][1](answer, shape)
    half = max(1, len(items) // 2)
    keep_alive: Items = [Comment(KEEP_ALIVE)] if shape.keep_alives else []
    body = [*keep_alive, *keep_alive, *items[:half], *keep_alive]
    if shape.ending == "complete":
        return encode_events([*body, *items[half:], *closing], shape.line_end)
    if shape.ending == "error":
        return encode_events([*body, *error], shape.line_end)
    unfinished = encode_events(items[half : half + 1] or closing[:1], shape.line_end)
    return encode_events(body, shape.line_end) + unfinished[: max(1, len(unfinished) // 2)]


_ANTHROPIC_ERRORS: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(api: Api, status: int, message: str) -> bytes:
    """The one-line error body each API sends with a 4xx/5xx status."""
    if api == "anthropic":
        return _json({"type": "error", "error": {"type": _ANTHROPIC_ERRORS.get(status, "api_error"), "message": message}})
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return _json({"error": {"message": message, "type": kind, "param": None, "code": status}})


def _data(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json(value: Any) -> bytes:
    return _data(value).encode("utf-8")


def _chopped(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def _ids(api: Api, answer: Answer) -> list[str]:
    return [call.id if call.id is not None else call_id(api, position) for position, call in enumerate(answer.calls)]


def _stop(answer: Answer, stop: str, calls: str, truncated: str) -> str:
    return truncated if answer.truncated else calls if answer.calls else stop


# == Chat Completions ===========================================================


def _chat_usage(tokens: Tokens) -> dict[str, Any]:
    prompt = tokens.input + tokens.cache_read + tokens.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": tokens.output,
        "total_tokens": prompt + tokens.output,
        "prompt_tokens_details": {"cached_tokens": tokens.cache_read, "cache_write_tokens": tokens.cache_write},
        "completion_tokens_details": {"reasoning_tokens": tokens.reasoning},
    }


def _chat_head(answer: Answer, kind: str) -> dict[str, Any]:
    return {"id": answer.id or "gen-loopback", "provider": "Loopback", "model": answer.model, "object": kind, "created": CREATED}


def _chat_calls(answer: Answer, whole: bool) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "id": ident,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments if whole else ""},
        }
        for index, (ident, call) in enumerate(zip(_ids("chat", answer), answer.calls, strict=True))
    ]


def _chat_body(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None, "annotations": []}
    if answer.reasoning is not None:
        message["reasoning"] = answer.reasoning
    if answer.calls:
        message["tool_calls"] = _chat_calls(answer, whole=True)
    finish = _stop(answer, "stop", "tool_calls", "length")
    choice = {"index": 0, "logprobs": None, "finish_reason": finish, "native_finish_reason": finish, "message": message}
    return {**_chat_head(answer, "chat.completion"), "choices": [choice], "usage": _chat_usage(answer.tokens)}


def _chat_stream(answer: Answer, shape: StreamShape) -> Streamed:
    head = _chat_head(answer, "chat.completion.chunk")

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> StreamItem:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish, "logprobs": None}
        return Event(_data({**head, **extra, "choices": [choice]}))

    # OpenAI opens a text answer with an empty string, a tool-call turn with null.
    items = [chunk({"role": "assistant", "content": "" if answer.text is not None else None})]
    for member, text in (("reasoning", answer.reasoning), ("content", answer.text)):
        if text is not None:
            items.extend(chunk({member: piece}) for piece in _chopped(text, shape.piece))
    per_call = [
        [first, *({"index": first["index"], "function": {"arguments": piece}} for piece in _chopped(call.arguments, shape.piece))]
        for first, call in zip(_chat_calls(answer, whole=False), answer.calls, strict=True)
    ]
    turns = itertools.zip_longest(*per_call) if shape.interleave_calls else per_call
    items.extend(chunk({"tool_calls": [piece]}) for turn in turns for piece in turn if piece is not None)
    closing = [chunk({}, _stop(answer, "stop", "tool_calls", "length"))]
    if shape.usage_chunk:
        closing.append(Event(_data({**head, "choices": [], "usage": _chat_usage(answer.tokens)})))
    error = chunk({"content": ""}, "error", error={"code": 502, "message": "Upstream stream ended unexpectedly"})
    return items, [*closing, Event("[DONE]")], [error, Event("[DONE]")]


# == Anthropic Messages =========================================================


def _anthropic_usage(tokens: Tokens, output: int) -> dict[str, Any]:
    return {
        "input_tokens": tokens.input,
        "cache_creation_input_tokens": tokens.cache_write,
        "cache_read_input_tokens": tokens.cache_read,
        "output_tokens": output,
    }


def _anthropic_input(call: Call) -> dict[str, Any]:
    value = json.loads(call.arguments)
    if type(value) is not dict:
        raise ValueError(f"an Anthropic tool_use input is an object, not {call.arguments!r}")
    return value


def _anthropic_body(answer: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": _SIGNATURE})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    for ident, call in zip(_ids("anthropic", answer), answer.calls, strict=True):
        content.append({"type": "tool_use", "id": ident, "name": call.name, "input": _anthropic_input(call)})
    return {
        "id": answer.id or "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": _stop(answer, "end_turn", "tool_use", "max_tokens"),
        "stop_sequence": None,
        "usage": _anthropic_usage(answer.tokens, answer.tokens.output),
    }


def _anthropic_event(value: dict[str, Any]) -> StreamItem:
    return Event(_data(value), event=value["type"])


def _anthropic_stream(answer: Answer, shape: StreamShape) -> Streamed:
    whole = _anthropic_body(answer)  # raises for arguments that are not an object, as the whole body would
    start = {key: value for key, value in whole.items() if key != "usage"}
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(answer.tokens, 1))
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if answer.reasoning is not None:
        thoughts = [{"type": "thinking_delta", "thinking": piece} for piece in _chopped(answer.reasoning, shape.piece)]
        signature = {"type": "signature_delta", "signature": _SIGNATURE}
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, [*thoughts, signature]))
    if answer.text is not None:
        blocks.append(
            ({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _chopped(answer.text, shape.piece)])
        )
    for ident, call in zip(_ids("anthropic", answer), answer.calls, strict=True):
        pieces = ["", *_chopped(call.arguments, shape.piece)]
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        blocks.append(({"type": "tool_use", "id": ident, "name": call.name, "input": {}}, deltas))
    events: list[dict[str, Any]] = []
    for index, (block, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.extend({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas)
        events.append({"type": "content_block_stop", "index": index})
    ping: list[dict[str, Any]] = [{"type": "ping"}] if shape.pings else []
    middle = len(events) // 2
    items = [{"type": "message_start", "message": start}, *ping, *events[:middle], *ping, *events[middle:]]
    stop = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    closing: list[dict[str, Any]] = [
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": answer.tokens.output}},
        {"type": "message_stop"},
    ]
    error: dict[str, Any] = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return [_anthropic_event(item) for item in items], [_anthropic_event(item) for item in closing], [_anthropic_event(error)]


# == OpenAI Responses ===========================================================


def _responses_items(answer: Answer) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        items.append({"id": "rs_loopback", "type": "reasoning", "summary": [{"type": "summary_text", "text": answer.reasoning}]})
    if answer.text is not None:
        part = {"type": "output_text", "annotations": [], "text": answer.text}
        items.append({"id": "msg_loopback", "type": "message", "status": "completed", "role": "assistant", "content": [part]})
    for position, (ident, call) in enumerate(zip(_ids("responses", answer), answer.calls, strict=True)):
        fields = {"status": "completed", "call_id": ident, "name": call.name, "arguments": call.arguments}
        items.append({"id": f"fc_{position}", "type": "function_call", **fields})
    return items


def _responses_object(answer: Answer, done: bool) -> dict[str, Any]:
    tokens = answer.tokens
    usage = {
        "input_tokens": tokens.input + tokens.cache_read,
        "input_tokens_details": {"cached_tokens": tokens.cache_read},
        "output_tokens": tokens.output,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
        "total_tokens": tokens.input + tokens.cache_read + tokens.output,
    }
    return {
        "id": answer.id or "resp_loopback",
        "object": "response",
        "created_at": CREATED,
        "status": _stop(answer, "completed", "completed", "incomplete") if done else "in_progress",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if done and answer.truncated else None,
        "model": answer.model,
        "output": _responses_items(answer) if done else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "tool_choice": "auto",
        "usage": usage if done else None,
    }


def _responses_stream(answer: Answer, shape: StreamShape) -> Streamed:
    numbers = itertools.count()

    def event(kind: str, **members: Any) -> StreamItem:
        return Event(_data({"type": kind, "sequence_number": next(numbers), **members}), event=kind)

    started = _responses_object(answer, done=False)
    items = [event("response.created", response=started), event("response.in_progress", response=started)]
    for output_index, item in enumerate(_responses_items(answer)):
        where = {"item_id": item["id"], "output_index": output_index}
        if item["type"] == "reasoning":
            items.append(event("response.output_item.added", output_index=output_index, item={**item, "summary": []}))
        elif item["type"] == "message":
            part = item["content"][0]
            added = {**item, "status": "in_progress", "content": []}
            items.append(event("response.output_item.added", output_index=output_index, item=added))
            items.append(event("response.content_part.added", **where, content_index=0, part={**part, "text": ""}))
            for piece in _chopped(part["text"], shape.piece):
                items.append(event("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]))
            items.append(event("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[]))
            items.append(event("response.content_part.done", **where, content_index=0, part=part))
        else:
            added = {**item, "status": "in_progress", "arguments": ""}
            items.append(event("response.output_item.added", output_index=output_index, item=added))
            for piece in _chopped(item["arguments"], shape.piece):
                items.append(event("response.function_call_arguments.delta", **where, delta=piece))
            items.append(event("response.function_call_arguments.done", **where, arguments=item["arguments"]))
        items.append(event("response.output_item.done", output_index=output_index, item=item))
    final = _responses_object(answer, done=True)
    closing = [event(f"response.{final['status']}", response=final)]
    message = "The server had an error while processing your request."
    return items, closing, [event("error", code="server_error", message=message, param=None)]


_API: Final[dict[Api, tuple[Callable[[Answer], dict[str, Any]], Callable[[Answer, StreamShape], Streamed]]]] = {
    "chat": (_chat_body, _chat_stream),
    "anthropic": (_anthropic_body, _anthropic_stream),
    "responses": (lambda answer: _responses_object(answer, done=True), _responses_stream),
}
