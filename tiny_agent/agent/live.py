"""What a terminal shows while a run is live: streamed text, tool calls once complete, the wait (docs/provider.md, "Streaming").

Only a view: what is shown is never read back, and it goes out through a :class:`SecretStream`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Protocol, TextIO

from tiny_agent.journal.secrets import SecretStream, redact_text
from tiny_agent.wire.chat.stream import LiveChatView, ShownText, ShownToolCall
from tiny_agent.wire.sse import SseDecoder, SseEvent


class _View(Protocol):
    def push(self, event: SseEvent) -> list[ShownText | ShownToolCall]: ...


class TerminalDisplay:
    """Streams text to ``out`` and notes to ``err``; counts what it printed so the answer is not printed twice."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._decoder: SseDecoder | None = None
        self._view: _View | None = None
        self._ticker: _Ticker | None = None
        self._text = SecretStream()
        self.printed_text = ""
        """The text of the last response shown live (the CLI skips printing it again)."""
        self._line_open = False

    def model_started(self, api: str, streamed: bool) -> None:
        self.printed_text = ""
        self._decoder = SseDecoder() if streamed else None
        views: dict[str, type[_View]] = {"anthropic": _AnthropicView, "responses": _ResponsesView}
        self._view = views.get(api, LiveChatView)() if streamed else None
        self._ticker = _Ticker(self._err)

    def model_bytes(self, chunk: bytes) -> None:
        if self._decoder is None or self._view is None:
            return
        for event in self._decoder.feed(chunk):
            for shown in self._view.push(event):
                self._show(shown)

    def model_finished(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self._print(self._text.finish())
        if self._line_open:
            self._out.write("\n")
            self._out.flush()
            self._line_open = False

    def interrupted(self) -> None:
        """Ctrl-C or SIGTERM: end the line (the streamed text's, or the wait's, which is cleared) before the notice."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker.stop():
            return
        stream = self._out if self._line_open else self._err
        stream.write("\n")
        stream.flush()
        self._line_open = False

    def _show(self, shown: ShownText | ShownToolCall) -> None:
        if self._ticker is not None:
            self._ticker.stop()
        if isinstance(shown, ShownText):
            self._print(self._text.feed(shown.text))
            return
        if self._line_open:
            self._out.write("\n")
            self._line_open = False
        whole = redact_text(shown.arguments)[0]  # before cutting: a cut could leave half a key
        arguments = whole if len(whole) <= 200 else whole[:197] + "..."
        again = " (complete)" if shown.revised else ""
        self._err.write(f"· the model calls {shown.name or '?'}({arguments}){again}\n")
        self._err.flush()

    def _print(self, text: str) -> None:
        if not text:
            return
        self._out.write(text)
        self._out.flush()
        self.printed_text += text
        self._line_open = not text.endswith("\n")


class _Ticker:
    """``waiting for the model… 12 s`` on one stderr line, redrawn each second from when it is made until stopped."""

    def __init__(self, err: TextIO) -> None:
        self._err = err
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="elapsed", daemon=True)
        self._started = time.monotonic()
        self._drawn = False
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(1.0):
            elapsed = time.monotonic() - self._started
            self._err.write(f"\r· waiting for the model… {elapsed:.0f} s")
            self._err.flush()
            self._drawn = True

    def stop(self) -> bool:
        """Stop redrawing; True if the line was drawn (it is cleared)."""
        if self._stopped.is_set():
            return False
        self._stopped.set()
        self._thread.join(timeout=2)
        if self._drawn:
            self._err.write("\r\033[K")
            self._err.flush()
        return self._drawn


def _data(event: SseEvent) -> dict[str, Any] | None:
    try:
        value = json.loads(event.data)
    except ValueError:
        return None
    return value if type(value) is dict else None


class _AnthropicView:
    """Text deltas as they come; a ``tool_use`` block announced at its ``content_block_stop``."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def push(self, event: SseEvent) -> list[ShownText | ShownToolCall]:
        data = _data(event)
        if data is None:
            return []
        kind = data.get("type")
        index = data.get("index")
        if kind == "content_block_start" and type(index) is int:
            block = data.get("content_block")
            if type(block) is dict and block.get("type") == "tool_use":
                self._calls[index] = {"id": block.get("id"), "name": block.get("name"), "pieces": []}
            return []
        if kind == "content_block_delta" and type(index) is int:
            return self._delta(index, data.get("delta"))
        if kind == "content_block_stop" and type(index) is int and index in self._calls:
            call = self._calls.pop(index)
            return [ShownToolCall(index=index, id=_text(call["id"]), name=_text(call["name"]), arguments="".join(call["pieces"]))]
        return []

    def _delta(self, index: int, delta: Any) -> list[ShownText | ShownToolCall]:
        if type(delta) is not dict:
            return []
        if delta.get("type") == "text_delta" and type(delta.get("text")) is str:
            return [ShownText(text=delta["text"])]
        if delta.get("type") == "input_json_delta" and index in self._calls and type(delta.get("partial_json")) is str:
            self._calls[index]["pieces"].append(delta["partial_json"])
        return []


class _ResponsesView:
    """``response.output_text.delta`` as it comes; a function call announced when its item is done."""

    def push(self, event: SseEvent) -> list[ShownText | ShownToolCall]:
        data = _data(event)
        if data is None:
            return []
        kind = data.get("type")
        if kind == "response.output_text.delta" and type(data.get("delta")) is str:
            return [ShownText(text=data["delta"])]
        item = data.get("item")
        if kind == "response.output_item.done" and type(item) is dict and item.get("type") == "function_call":
            index = data.get("output_index")
            return [
                ShownToolCall(
                    index=index if type(index) is int else 0,
                    id=_text(item.get("call_id")),
                    name=_text(item.get("name")),
                    arguments=_text(item.get("arguments")) or "",
                )
            ]
        return []


def _text(value: Any) -> str | None:
    return value if type(value) is str else None
