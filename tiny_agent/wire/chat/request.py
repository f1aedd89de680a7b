"""Chat Completions requests from the canonical transcript.

The canonical messages already are Chat Completions messages (the transcript
mirrors this wire format), so the body is the transcript itself behind the
system prompt: ``{"model", "messages", "tools"}``, byte for byte what the
agent has always sent, plus ``max_tokens`` and the stream flags when asked.
Responses are normalized by :mod:`tiny_agent.wire.chat.seam`.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.transcript import ChatMessage, Message, SystemMessage
from tiny_agent.wire.request import PLAIN, Messages, RequestOptions, Tools, WireRequest

PATH: Final = "/chat/completions"


class StreamOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    include_usage: bool


class ChatBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The request body; members encode in this order and unset ones are left out."""

    model: str
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | UnsetType = UNSET
    """Each entry is :meth:`ToolSpec.to_wire`, the one definition of a Chat Completions tool."""
    max_tokens: int | UnsetType = UNSET
    stream: Literal[True] | UnsetType = UNSET
    stream_options: StreamOptions | UnsetType = UNSET


def chat_request(model: str, system: str, messages: Messages, tools: Tools, options: RequestOptions = PLAIN) -> WireRequest:
    """The ``POST /chat/completions`` request for this context (the system prompt goes first when non-empty)."""
    body = ChatBody(
        model=model,
        messages=_with_system(system, messages),
        tools=[spec.to_wire() for spec in tools] if tools else UNSET,
        max_tokens=UNSET if options.max_tokens is None else options.max_tokens,
        stream=True if options.stream else UNSET,
        stream_options=StreamOptions(include_usage=True) if options.stream and options.stream_usage else UNSET,
    )
    return WireRequest(path=PATH, body=msgspec.json.encode(body), stream=options.stream)


def _with_system(system: str, messages: Sequence[Message]) -> list[ChatMessage]:
    context: list[ChatMessage] = list(messages)
    if not system:
        return context
    return [SystemMessage(content=system), *context]
