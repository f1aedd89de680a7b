"""Replies for tests, dirty the way real providers are.

The first helpers build Chat Completions whole bodies (what the agent tests
have always used).  The rest build a reply for any of the three wire APIs,
whole or streamed, from one :class:`~tiny_agent.loopback.Answer`, so a test
can run the same conversation over each API:

    server = LoopbackServer([replies.stream("anthropic", replies.one_call()), replies.whole("anthropic", replies.text_answer())])

The bodies themselves are built by :mod:`tiny_agent.loopback.answers`
(the scripted models there need them too).
"""

from __future__ import annotations

import json
from typing import Any

from tiny_agent.loopback import (
    EVENT_STREAM,
    Answer,
    Api,
    Call,
    Pieces,
    Reply,
    StreamShape,
    Tokens,
    error_body,
    event_stream,
    streamed,
    whole_body,
)

# -- Chat Completions, whole bodies (the agent tests' helpers) ----------------------


def body(message: dict[str, Any], finish: str | None = "stop", usage: dict[str, Any] | None = None, **extra: Any) -> bytes:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish,
        "native_finish_reason": finish,
        "logprobs": None,
        "message": message,
    }
    value: dict[str, Any] = {
        "id": "gen-test",
        "object": "chat.completion",
        "created": 1764700000,
        "model": "test/model",
        "choices": [choice],
    }
    value["usage"] = (
        usage
        if usage is not None
        else {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}, "cost": 0.0001}
    )
    value.update(extra)
    return json.dumps(value, separators=(",", ":")).encode()


def answer(text: str, **extra: Any) -> Reply:
    return Reply(
        body=body({"role": "assistant", "content": text, "refusal": None, "reasoning": "thinking...", "annotations": []}, **extra)
    )


def calls(*calls: tuple[str, str], finish: str = "tool_calls", ids: list[str] | None = None, **extra: Any) -> Reply:
    tool_calls = [
        {
            "index": index,
            "id": (ids or [])[index] if ids else f"call_{index}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        for index, (name, arguments) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "refusal": None, "reasoning": "let me look", "tool_calls": tool_calls}
    return Reply(body=body(message, finish=finish, **extra))


def read(path: str = "README.md") -> Reply:
    return calls(("read", json.dumps({"path": path})))


# -- any API: answers ---------------------------------------------------------------

CACHED = Tokens(input=300, output=25, cache_read=1200, cache_write=0, reasoning=7)
"""Usage with a cache hit (Responses reports no cache write, so this leaves it 0 for every API to agree)."""

CACHE_WRITE = Tokens(input=80, output=12, cache_read=0, cache_write=900)
"""A first request that writes the cache (Chat via OpenRouter's counter, and Anthropic)."""


def text_answer(text: str = "It prints hi — in ünïcode ✓.", *, tokens: Tokens = Tokens(), reasoning: str | None = None) -> Answer:
    return Answer(text=text, tokens=tokens, reasoning=reasoning)


def one_call(name: str = "read", arguments: str = '{"path":"README.md"}', *, text: str | None = None) -> Answer:
    return Answer(text=text, calls=(Call(name, arguments),))


def parallel_calls() -> Answer:
    """Two calls in one turn, their arguments long enough to arrive in many pieces."""
    return Answer(
        calls=(
            Call("read", '{"path":"docs/agent.md"}'),
            Call("write", '{"path":"notes/ünïcode ✓.md","content":"# Notes\\n\\nline one\\nline two\\n"}'),
        )
    )


def thinking(text: str = "Done.", reasoning: str = "The user wants a summary; one line will do.") -> Answer:
    """An answer with reasoning (Chat ``reasoning``, Anthropic ``thinking``, Responses ``reasoning``): the seams drop it."""
    return Answer(text=text, reasoning=reasoning, tokens=CACHED)


# -- any API: replies ---------------------------------------------------------------


def whole(api: Api, value: Answer, **fields: Any) -> Reply:
    """The whole body a non-streamed request gets; ``fields`` are more :class:`Reply` fields (status, headers, delay...)."""
    return Reply(body=whole_body(api, value), api=api, **fields)


def stream(api: Api, value: Answer, *, seed: int = 0, shape: StreamShape = StreamShape(), **wire: Any) -> Reply:
    """The equivalent event stream, sent in irregular pieces; ``wire`` goes to :func:`streamed` (break_off_after...)."""
    return streamed(event_stream(api, value, shape), seed=seed, api=api, **wire)


def failure(api: Api, status: int, message: str = "upstream overloaded", *, retry_after: str | None = None) -> Reply:
    """An error status with the API's own error body, optionally with ``Retry-After``."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status=status, body=error_body(api, status, message), api=api, headers=headers)


def sse_reply(body: bytes, *, seed: int = 0, pieces: Pieces | None = None) -> Reply:
    """Exact event-stream bytes, in pieces (for hand-written streams)."""
    return Reply(body=body, content_type=EVENT_STREAM, pieces=pieces or Pieces(seed=seed))
