"""Response bodies and event streams for the three wire APIs, built from one neutral :class:`Answer`.

For each API, :func:`whole_body` builds the body a non-streamed request gets
and :func:`event_stream` the ``text/event-stream`` body a streamed one gets;
the two are equivalent: the seams normalize them into the same message, stop
reason and usage.  Shapes follow /work/shared/wire-apis.md and the vendors'
documentation, including the parts the seams drop (reasoning, thinking,
signatures, annotations, costs).

Streams carry what real ones do: text and tool-call arguments in many small
deltas (Chat: call pieces keyed by ``index``, optionally interleaved;
Anthropic: ``input_json_delta`` pieces; Responses: argument deltas, then the
terminal event carrying the whole response), a usage chunk (Chat, with
``choices: []``), keep-alive comments, ``ping`` events (Anthropic), and an
ending of choice: complete, an error event part-way, or cut off mid-event.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final, Literal

import msgspec

from tiny_agent.loopback.events import Comment, Event, StreamItem, encode_events
from tiny_agent.wire.registry import Api

CREATED: Final = 1764700000
KEEP_ALIVE: Final = "OPENROUTER PROCESSING"


class Call(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    arguments: str = "{}"
    """The JSON text of the arguments (Anthropic's whole body needs it to be an object)."""
    id: str | None = None
    """None: ``call_N`` (``toolu_N`` for Anthropic), N the call's position."""


class Tokens(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Usage in the ledger's terms; each API reports it its own way (Responses has no cache write)."""

    input: int = 100
    """Prompt tokens net of cache reads and writes."""
    output: int = 10
    cache_read: int = 40
    cache_write: int = 0
    reasoning: int = 0
    """Of ``output``, the tokens spent thinking (reported where the API has a counter for it)."""


class Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str | None = None
    calls: tuple[Call, ...] = ()
    reasoning: str | None = None
    """Thinking the model shows: Chat ``reasoning``, Anthropic ``thinking`` blocks, Responses ``reasoning`` items."""
    tokens: Tokens = Tokens()
    truncated: bool = False
    """Ended at the output cap: ``length``, ``max_tokens``, ``incomplete`` (``max_output_tokens``)."""
    id: str | None = None
    """None: ``gen-loopback`` / ``msg_loopback`` / ``resp_loopback``."""
    model: str = "test/model"


Ending = Literal["complete", "error", "cut"]


class StreamShape(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    piece: int = 5
    """Characters of text or argument JSON per delta."""
    keep_alives: bool = False
    """``: OPENROUTER PROCESSING`` comments before the first event and once in the middle."""
    pings: bool = True
    """Anthropic only: ``ping`` events after ``message_start`` and part-way through."""
    usage_chunk: bool = True
    """Chat only: the usage chunk with ``choices: []`` (what ``stream_options.include_usage`` asks for)."""
    ending: Ending = "complete"
    """``error``: an error event half-way, then the end; ``cut``: half-way, in the middle of an event."""
    line_end: Literal["\n", "\r\n"] = "\n"
    interleave_calls: bool = False
    """Chat only: the pieces of parallel calls take turns, so only their ``index`` keeps them apart."""


def whole_body(api: Api, answer: Answer) -> bytes:
    if api == "chat":
        return _json(_chat_body(answer))
    if api == "anthropic":
        return _json(_anthropic_body(answer))
    return _json(_responses_object(answer, done=True))


def event_stream(api: Api, answer: Answer, shape: StreamShape = StreamShape()) -> bytes:
    if api == "chat":
        items, closing, error = _chat_stream(answer, shape)
    elif api == "anthropic":
        items, closing, error = _anthropic_stream(answer, shape)
    else:
        items, closing, error = _responses_stream(answer, shape)
    return _ended(items, closing, error, shape)


def error_body(api: Api, status: int, message: str) -> bytes:
    """The error body each API sends with a 4xx/5xx status (one line)."""
    if api == "anthropic":
        kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
        return _json(
            {
                "type": "error",
                "error": {"type": kind.get(status, "overloaded_error" if status == 529 else "api_error"), "message": message},
            }
        )
    kind_name = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return _json({"error": {"message": message, "type": kind_name, "param": None, "code": status}})


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _data(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _chopped(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def _call_id(call: Call, position: int, prefix: str) -> str:
    return call.id if call.id is not None else f"{prefix}{position}"


def _ended(items: list[StreamItem], closing: list[StreamItem], error: list[StreamItem], shape: StreamShape) -> bytes:
    """The stream as its ending says: whole, broken by an error event half-way, or cut in the middle of an event."""
    half = max(1, len(items) // 2)
    keep_alive: list[StreamItem] = [Comment(KEEP_ALIVE)] if shape.keep_alives else []
    body = [*keep_alive, *keep_alive, *items[:half], *keep_alive]
    if shape.ending == "complete":
        return encode_events([*body, *items[half:], *closing], shape.line_end)
    if shape.ending == "error":
        return encode_events([*body, *error], shape.line_end)
    unfinished = encode_events(items[half : half + 1] or closing[:1], shape.line_end)
    return encode_events(body, shape.line_end) + unfinished[: max(1, len(unfinished) // 2)]


# == Chat Completions ===========================================================


def _chat_finish(answer: Answer) -> str:
    if answer.truncated:
        return "length"
    return "tool_calls" if answer.calls else "stop"


def _chat_usage(tokens: Tokens) -> dict[str, Any]:
    prompt = tokens.input + tokens.cache_read + tokens.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": tokens.output,
        "total_tokens": prompt + tokens.output,
        "prompt_tokens_details": {"cached_tokens": tokens.cache_read, "cache_write_tokens": tokens.cache_write},
        "completion_tokens_details": {"reasoning_tokens": tokens.reasoning},
    }


def _chat_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {
            "index": position,
            "id": _call_id(call, position, "call_"),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for position, call in enumerate(answer.calls)
    ]


def _chat_body(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None, "annotations": []}
    if answer.reasoning is not None:
        message["reasoning"] = answer.reasoning
    if answer.calls:
        message["tool_calls"] = _chat_calls(answer)
    finish = _chat_finish(answer)
    choice = {"index": 0, "logprobs": None, "finish_reason": finish, "native_finish_reason": finish, "message": message}
    return {
        "id": answer.id or "gen-loopback",
        "provider": "Loopback",
        "model": answer.model,
        "object": "chat.completion",
        "created": CREATED,
        "choices": [choice],
        "usage": _chat_usage(answer.tokens),
    }


def _chat_stream(answer: Answer, shape: StreamShape) -> tuple[list[StreamItem], list[StreamItem], list[StreamItem]]:
    head = {
        "id": answer.id or "gen-loopback",
        "provider": "Loopback",
        "model": answer.model,
        "object": "chat.completion.chunk",
        "created": CREATED,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> StreamItem:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish, "logprobs": None}
        return Event(_data({**head, **extra, "choices": [choice]}))

    # OpenAI opens a text answer with an empty string, a tool-call turn with null.
    items: list[StreamItem] = [chunk({"role": "assistant", "content": "" if answer.text is not None else None})]
    if answer.reasoning is not None:
        items.extend(chunk({"reasoning": piece}) for piece in _chopped(answer.reasoning, shape.piece))
    if answer.text is not None:
        items.extend(chunk({"content": piece}) for piece in _chopped(answer.text, shape.piece))
    items.extend(chunk({"tool_calls": [piece]}) for piece in _chat_call_pieces(answer, shape))
    closing: list[StreamItem] = [chunk({}, _chat_finish(answer))]
    if shape.usage_chunk:
        closing.append(Event(_data({**head, "choices": [], "usage": _chat_usage(answer.tokens)})))
    closing.append(Event("[DONE]"))
    error = chunk({"content": ""}, "error", error={"code": 502, "message": "Upstream stream ended unexpectedly"})
    return items, closing, [error, Event("[DONE]")]


def _chat_call_pieces(answer: Answer, shape: StreamShape) -> list[dict[str, Any]]:
    per_call: list[list[dict[str, Any]]] = []
    for position, call in enumerate(answer.calls):
        first = {
            "index": position,
            "id": _call_id(call, position, "call_"),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        rest = [{"index": position, "function": {"arguments": piece}} for piece in _chopped(call.arguments, shape.piece)]
        per_call.append([first, *rest])
    if not shape.interleave_calls:
        return [piece for pieces in per_call for piece in pieces]
    return list(_round_robin(per_call))


def _round_robin(lists: list[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    longest = max((len(pieces) for pieces in lists), default=0)
    for turn in range(longest):
        for pieces in lists:
            if turn < len(pieces):
                yield pieces[turn]


# == Anthropic Messages =========================================================

_SIGNATURE: Final = "EqQBCgIYAhIMbG9vcGJhY2sgc2lnbmF0dXJlGgxsb29wYmFjaw=="


def _anthropic_stop(answer: Answer) -> str:
    if answer.truncated:
        return "max_tokens"
    return "tool_use" if answer.calls else "end_turn"


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
    for position, call in enumerate(answer.calls):
        content.append(
            {"type": "tool_use", "id": _call_id(call, position, "toolu_"), "name": call.name, "input": _anthropic_input(call)}
        )
    return {
        "id": answer.id or "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": _anthropic_stop(answer),
        "stop_sequence": None,
        "usage": _anthropic_usage(answer.tokens, answer.tokens.output),
    }


def _anthropic_event(value: dict[str, Any]) -> StreamItem:
    return Event(_data(value), event=value["type"])


def _anthropic_stream(answer: Answer, shape: StreamShape) -> tuple[list[StreamItem], list[StreamItem], list[StreamItem]]:
    start = {key: value for key, value in _anthropic_body(answer).items() if key != "usage"}
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(answer.tokens, 1))
    items: list[StreamItem] = [_anthropic_event({"type": "message_start", "message": start})]
    ping = [_anthropic_event({"type": "ping"})] if shape.pings else []
    items.extend(ping)
    blocks = _anthropic_blocks(answer, shape)
    middle = len(blocks) // 2
    items.extend(blocks[:middle] + ping + blocks[middle:])
    closing: list[StreamItem] = [
        _anthropic_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": _anthropic_stop(answer), "stop_sequence": None},
                "usage": {"output_tokens": answer.tokens.output},
            }
        ),
        _anthropic_event({"type": "message_stop"}),
    ]
    error = _anthropic_event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    return items, closing, [error]


def _anthropic_blocks(answer: Answer, shape: StreamShape) -> list[StreamItem]:
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if answer.reasoning is not None:
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _chopped(answer.reasoning, shape.piece)]
        blocks.append(
            (
                {"type": "thinking", "thinking": "", "signature": ""},
                [*deltas, {"type": "signature_delta", "signature": _SIGNATURE}],
            )
        )
    if answer.text is not None:
        blocks.append(
            (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _chopped(answer.text, shape.piece)],
            )
        )
    for position, call in enumerate(answer.calls):
        _anthropic_input(call)
        pieces = ["", *_chopped(call.arguments, shape.piece)]
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        blocks.append(({"type": "tool_use", "id": _call_id(call, position, "toolu_"), "name": call.name, "input": {}}, deltas))
    items: list[StreamItem] = []
    for index, (block, deltas) in enumerate(blocks):
        items.append(_anthropic_event({"type": "content_block_start", "index": index, "content_block": block}))
        items.extend(_anthropic_event({"type": "content_block_delta", "index": index, "delta": delta}) for delta in deltas)
        items.append(_anthropic_event({"type": "content_block_stop", "index": index}))
    return items


# == OpenAI Responses ===========================================================


def _responses_usage(tokens: Tokens) -> dict[str, Any]:
    prompt = tokens.input + tokens.cache_read
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": tokens.cache_read},
        "output_tokens": tokens.output,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
        "total_tokens": prompt + tokens.output,
    }


def _responses_items(answer: Answer) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        items.append({"id": "rs_loopback", "type": "reasoning", "summary": [{"type": "summary_text", "text": answer.reasoning}]})
    if answer.text is not None:
        part = {"type": "output_text", "annotations": [], "text": answer.text}
        items.append({"id": "msg_loopback", "type": "message", "status": "completed", "role": "assistant", "content": [part]})
    for position, call in enumerate(answer.calls):
        call_id = _call_id(call, position, "call_")
        items.append(
            {
                "id": f"fc_{position}",
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items


def _responses_object(answer: Answer, done: bool) -> dict[str, Any]:
    status = "in_progress"
    if done:
        status = "incomplete" if answer.truncated else "completed"
    return {
        "id": answer.id or "resp_loopback",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if done and answer.truncated else None,
        "model": answer.model,
        "output": _responses_items(answer) if done else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "tool_choice": "auto",
        "usage": _responses_usage(answer.tokens) if done else None,
    }


class _Numbered:
    """Responses events carry a ``sequence_number``, counting from 0."""

    def __init__(self) -> None:
        self.next = 0

    def event(self, kind: str, **members: Any) -> StreamItem:
        value = {"type": kind, "sequence_number": self.next, **members}
        self.next += 1
        return Event(_data(value), event=kind)


def _responses_stream(answer: Answer, shape: StreamShape) -> tuple[list[StreamItem], list[StreamItem], list[StreamItem]]:
    numbered = _Numbered()
    started = _responses_object(answer, done=False)
    items = [numbered.event("response.created", response=started), numbered.event("response.in_progress", response=started)]
    for output_index, item in enumerate(_responses_items(answer)):
        items.extend(_responses_item_events(numbered, output_index, item, shape))
    kind = "response.incomplete" if answer.truncated else "response.completed"
    closing = [numbered.event(kind, response=_responses_object(answer, done=True))]
    error = numbered.event(
        "error", code="server_error", message="The server had an error while processing your request.", param=None
    )
    return items, closing, [error]


def _responses_item_events(numbered: _Numbered, output_index: int, item: dict[str, Any], shape: StreamShape) -> list[StreamItem]:
    added = {**item, "status": "in_progress"}
    where = {"item_id": item["id"], "output_index": output_index}
    if item["type"] == "message":
        added["content"] = []
        text = item["content"][0]["text"]
        empty_part = {"type": "output_text", "annotations": [], "text": ""}
        deltas = [
            numbered.event("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
            for piece in _chopped(text, shape.piece)
        ]
        middle = [
            numbered.event("response.content_part.added", **where, content_index=0, part=empty_part),
            *deltas,
            numbered.event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
            numbered.event("response.content_part.done", **where, content_index=0, part=item["content"][0]),
        ]
    elif item["type"] == "function_call":
        added["arguments"] = ""
        deltas = [
            numbered.event("response.function_call_arguments.delta", **where, delta=piece)
            for piece in _chopped(item["arguments"], shape.piece)
        ]
        middle = [*deltas, numbered.event("response.function_call_arguments.done", **where, arguments=item["arguments"])]
    else:
        added.pop("status")
        added["summary"] = []
        middle = []
    first = numbered.event("response.output_item.added", output_index=output_index, item=added)
    return [first, *middle, numbered.event("response.output_item.done", output_index=output_index, item=item)]
