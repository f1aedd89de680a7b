"""An in-memory provider for fast tests of the driver: answers from a script, no sockets, no threads."""

from __future__ import annotations

from typing import Literal

import msgspec

from tiny_agent.providers.http import Received, TransportError, WireRequest


class FakeReply(msgspec.Struct, frozen=True):
    """A scripted response: its status, content type and body pieces, optionally breaking off after them."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    chunks: tuple[bytes, ...] = ()
    """When given, the body as these pieces (a stream); ``body`` is then ignored."""
    breaks_off: Literal["timeout", "connect", "protocol"] | None = None
    """Raise this transport failure after the pieces (before any when ``status`` is 0)."""
    retry_after: str | None = None


class FakeProvider:
    """Answers from a script, in order, and remembers every request; no sockets, no threads."""

    def __init__(self, script: list[FakeReply]) -> None:
        self._script = list(script)
        self.requests: list[WireRequest] = []

    def send(self, request: WireRequest, received: Received) -> None:
        self.requests.append(request)
        if not self._script:
            raise TransportError("protocol", "the fake provider's script has no more replies")
        reply = self._script.pop(0)
        if reply.status == 0:
            raise TransportError(reply.breaks_off or "connect", "scripted failure before any response")
        received.start(reply.status, reply.content_type, reply.retry_after)
        for piece in reply.chunks or (reply.body,):
            received.add(piece)
        if reply.breaks_off is not None:
            received.incomplete = f"scripted {reply.breaks_off} after {len(received.body())} bytes"

    def close(self) -> None:
        self._script.clear()
