"""Server-Sent Events framing: a ``text/event-stream`` body into its events (the rules: docs/normalize.md, "Reassembly").

:class:`SseDecoder` frames bytes as they arrive, in any split (the live view); :func:`parse_events`
frames a whole body and yields exactly the same events.  Pure: no I/O.
"""

from __future__ import annotations

import codecs
from typing import Final

import msgspec

_BOM: Final = "\ufeff"

DONE: Final = "[DONE]"
"""The data of the event that ends a stream (Chat Completions; OpenRouter sends it after Responses streams too)."""


class SseEvent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    data: str
    event: str | None = None


class SseDecoder:
    """Incremental framing; bytes that are not UTF-8 are replaced (the live view's: the journal keeps the bytes)."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._data: list[str] = []
        self._event: str | None = None
        self._pending: list[str] = []
        """Text after the last complete line end, in pieces joined only when a line end arrives (a long line
        fed in small chunks is not copied again with every chunk); may end with a CR that a LF could still join."""
        self._started = False
        self.done = False

    def feed(self, data: bytes) -> list[SseEvent]:
        return self.text(self._utf8.decode(data))

    def text(self, text: str) -> list[SseEvent]:
        if self.done:
            return []
        if not self._started and text:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        pending = self._pending
        holding_cr = bool(pending) and pending[-1].endswith("\r")
        if not holding_cr and "\n" not in text and "\r" not in text:
            if text:
                pending.append(text)
            return []
        pending.append(text)
        buffered = "".join(pending)
        # A trailing CR may be the first half of a CRLF: keep it for the next chunk.
        hold_cr = buffered.endswith("\r")
        if hold_cr:
            buffered = buffered[:-1]
        # str.splitlines also splits on \x0b, \x0c, \x1c-\x1e, \x85, \u2028 and
        # \u2029, which SSE does not; normalise the three real line ends first.
        lines = buffered.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        rest = lines.pop() + ("\r" if hold_cr else "")
        self._pending = [rest] if rest else []
        events: list[SseEvent] = []
        for line in lines:
            if self._line(line, events):
                break
        return events

    def close(self) -> list[SseEvent]:
        """The end of the body: a lone CR still held is a line end; an unfinished event is dropped."""
        events = self.text(self._utf8.decode(b"", final=True))
        pending = "".join(self._pending)
        self._pending = []
        if pending.endswith("\r") and not self.done:
            self._line(pending[:-1], events)
        return events

    def _line(self, line: str, events: list[SseEvent]) -> bool:
        """Take one line (without its end); True once it completed ``data: [DONE]``."""
        if not line:
            if self._data:
                events.append(SseEvent(data="\n".join(self._data), event=self._event or None))
                self.done = events[-1].data == DONE
            self._data = []
            self._event = None
            return self.done
        if line.startswith(":"):
            return False
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return False


def parse_events(text: str) -> list[SseEvent]:
    decoder = SseDecoder()
    return decoder.text(text) + decoder.close()


def stream_events(stream: bytes | str) -> tuple[list[SseEvent], int] | str:
    """A whole body's events and its size in bytes; or why it is not text (only bytes up to ``[DONE]`` need be)."""
    if isinstance(stream, str):
        return parse_events(stream), len(stream.encode("utf-8", "surrogatepass"))
    try:
        return parse_events(stream.decode("utf-8")), len(stream)
    except UnicodeDecodeError as error:
        events = parse_events(stream[: error.start].decode("utf-8"))
        if events and events[-1].data == DONE:
            return events, len(stream)
        return f"stream is not UTF-8 text (byte {error.start})"


_SSE_FIELDS: Final = ("data:", "event:", "id:", "retry:", ":")


def looks_like_sse(body: str | bytes) -> bool:
    """Whether a body is an event stream, judged by its content (a field or comment first), not its content type."""
    text = body if isinstance(body, str) else body.decode("utf-8", "replace")
    stripped = text.lstrip("\ufeff \t\r\n")
    return stripped.startswith(_SSE_FIELDS)
