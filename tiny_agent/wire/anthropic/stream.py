"""Anthropic Messages streams rebuilt into the message body (the grammar: docs/normalize.md, "Streams").

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from tiny_agent.wire.seam import (
    DROPPED,
    MISSING,
    Reassembly,
    Reject,
    describe,
    error_text,
    parse_json,
    reassemble_with,
    require_object,
    require_string,
    short,
    unkept_paths,
)

BlockKind = Literal["text", "tool_use", "thinking", "other"]

_CARRIED_DELTAS: Final[dict[str, BlockKind]] = {"text_delta": "text", "input_json_delta": "tool_use"}
"""Deltas the body is built from, and the only block kind each may extend."""
_UNCARRIED_DELTAS: Final[dict[str, BlockKind]] = {
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "citations_delta": "text",
}
"""Deltas the seam would drop anyway: not carried into the body (listed instead), on their own block kind only."""


class _OpenBlock:
    """One content block being reassembled: its start, and its text or JSON pieces (joined once, at the stop)."""

    __slots__ = ("start", "where", "kind", "pieces", "open")

    def __init__(self, start: dict[str, Any], where: str) -> None:
        self.start = start
        self.where = where
        block_type = start.get("type")
        self.kind: BlockKind = "other"
        if block_type == "text" or block_type == "tool_use":
            self.kind = block_type
        elif block_type == "server_tool_use" or block_type == "mcp_tool_use":
            self.kind = "tool_use"  # a hosted call's input arrives as a client call's does
        elif block_type == "thinking" or block_type == "redacted_thinking":
            self.kind = "thinking"
        self.pieces: list[str] = []
        self.open = True

    def finished(self) -> dict[str, Any]:
        block = dict(self.start)
        if self.kind == "text":
            block["text"] = require_string(self.start, "text", self.where) + "".join(self.pieces)
        elif self.kind == "tool_use":
            joined = "".join(self.pieces)
            # No input JSON at all (no delta, or only empty pieces, as for a call
            # without arguments) leaves the start's input, which is then {}.
            if joined:
                block["input"] = parse_json(joined, f"the input_json_delta pieces of {self.where}")
        return block


class _Reassembler:
    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: list[_OpenBlock] = []
        self.stopped = False
        self.not_carried: list[str] = []

    def event(self, value: dict[str, Any], where: str, index: int) -> None:
        event_type = value["type"]
        if event_type == "ping":
            return
        if event_type == "error":
            raise Reject(f"{where}: stream reported an error: {error_text(value.get('error'), 'type')}")
        if self.stopped:
            raise Reject(f"{where} ({event_type}) comes after message_stop")
        if event_type == "message_start":
            self._message_start(value, where)
            return
        message = self.message
        if message is None:
            raise Reject(f"{where} ({event_type}) comes before message_start")
        if event_type == "content_block_start":
            self._block_start(value, where)
        elif event_type == "content_block_delta":
            self._block_delta(value, where)
        elif event_type == "content_block_stop":
            self._open_block(value, where).open = False
            self._carried(value, {"type": None, "index": None}, where)
        elif event_type == "message_delta":
            self._message_delta(message, value, where)
        elif event_type == "message_stop":
            self._message_stop(where)
            self._carried(value, {"type": None}, where)
        else:
            # Anthropic documents that it may add event types: one the seam does
            # not know is not carried (and listed), rather than failing a paid answer.
            self.not_carried.append(where)

    def _carried(self, value: dict[str, Any], kept: dict[str, Any], where: str) -> None:
        self.not_carried.extend(unkept_paths(value, kept, where))

    def _message_start(self, value: dict[str, Any], where: str) -> None:
        if self.message is not None:
            raise Reject(f"{where}: a second message_start")
        message = dict(require_object(value.get("message", MISSING), f"{where}.message"))
        content = message.get("content", MISSING)
        if type(content) is not list or content:
            raise Reject(f"{where}.message.content is {describe(content)} (expected an empty array)")
        self.message = message
        self._carried(value, {"type": None, "message": None}, where)

    def _block_start(self, value: dict[str, Any], where: str) -> None:
        index = value.get("index", MISSING)
        if type(index) is not int or index != len(self.blocks):
            raise Reject(f"{where}.index is {describe(index)} (expected {len(self.blocks)}, the next block)")
        block = require_object(value.get("content_block", MISSING), f"{where}.content_block")
        self.blocks.append(_OpenBlock(block, f"{where}.content_block"))
        self._carried(value, {"type": None, "index": None, "content_block": None}, where)

    def _block_delta(self, value: dict[str, Any], where: str) -> None:
        block = self._open_block(value, where)
        delta = require_object(value.get("delta", MISSING), f"{where}.delta")
        self._carried(value, {"type": None, "index": None, "delta": _kept_delta(block, delta, value, where)}, where)

    def _open_block(self, value: dict[str, Any], where: str) -> _OpenBlock:
        index = value.get("index", MISSING)
        if type(index) is not int or not 0 <= index < len(self.blocks) or not self.blocks[index].open:
            raise Reject(f"{where}.index is {describe(index)}, which names no open content block")
        return self.blocks[index]

    def _message_delta(self, message: dict[str, Any], value: dict[str, Any], where: str) -> None:
        delta = require_object(value.get("delta", MISSING), f"{where}.delta")
        for key in ("stop_reason", "stop_sequence"):
            if key in delta:
                message[key] = delta[key]
        usage = value.get("usage")
        if usage is not None:
            message["usage"] = _merged_usage(message.get("usage"), require_object(usage, f"{where}.usage"))
        self._carried(value, {"type": None, "delta": {"stop_reason": None, "stop_sequence": None}, "usage": None}, where)

    def _message_stop(self, where: str) -> None:
        for index, block in enumerate(self.blocks):
            if block.open:
                raise Reject(f"{where}: message_stop while content block {index} is still open")
        self.stopped = True

    def body(self, events: int) -> dict[str, Any]:
        if self.message is None or not self.stopped:
            raise Reject(f"stream ended without message_stop (after {events} complete events)")
        body = dict(self.message)
        body["content"] = [block.finished() for block in self.blocks]
        return body

    def partial_body(self) -> dict[str, Any] | None:
        return None if self.message is None else dict(self.message)


def _merged_usage(start: Any, delta: dict[str, Any]) -> dict[str, Any]:
    """message_delta's counters are cumulative: each it sends replaces message_start's (a null replaces nothing)."""
    merged = dict(start) if type(start) is dict else {}
    for key, count in delta.items():
        if count is not None:
            merged[key] = count
    return merged


def reassemble_anthropic_stream(stream: bytes | str) -> Reassembly:
    return reassemble_with(_Reassembler(), stream)


def _kept_delta(block: _OpenBlock, delta: dict[str, Any], value: dict[str, Any], where: str) -> Any:
    """What of a content block's ``delta`` is carried (its text or JSON piece, appended to ``block``), else DROPPED."""
    if block.kind == "other":
        return DROPPED  # the seam rejects a block it does not know; its deltas need no reading
    delta_type = delta.get("type", MISSING)
    if type(delta_type) is not str or (delta_type not in _CARRIED_DELTAS and delta_type not in _UNCARRIED_DELTAS):
        raise Reject(f"{where}.delta.type is {describe(delta_type)}, not a delta the seam knows")
    belongs = _CARRIED_DELTAS.get(delta_type) or _UNCARRIED_DELTAS[delta_type]
    if belongs != block.kind:
        started = short(block.start.get("type"))
        raise Reject(f"{where}: {delta_type} for content block {value['index']}, which is a {started} block")
    if delta_type not in _CARRIED_DELTAS:
        return DROPPED
    member = "text" if delta_type == "text_delta" else "partial_json"
    block.pieces.append(require_string(delta, member, f"{where}.delta"))
    return {"type": None, member: None}
