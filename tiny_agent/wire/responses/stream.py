"""OpenAI Responses streams: the body is the ``response`` its terminal event carries (docs/normalize.md).

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from typing import Any, Final

from tiny_agent.wire.seam import (
    MISSING,
    Reassembly,
    Reject,
    describe,
    error_text,
    reassemble_with,
    require_object,
    unkept_paths,
)

_TERMINAL_STATUS: Final = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
"""The events that carry the whole response, and the status each must carry."""


class _Terminal:
    def __init__(self) -> None:
        self.latest: dict[str, Any] | None = None
        """The most recent ``response`` any event carried (a cut stream's usage comes from it)."""
        self.index: int | None = None
        self.not_carried: list[str] = []

    def event(self, value: dict[str, Any], where: str, index: int) -> None:
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

    def body(self, events: int) -> dict[str, Any]:
        if self.index is None or self.latest is None:
            ended = "stream ended without response.completed, response.incomplete or response.failed"
            raise Reject(f"{ended} (after {events} complete events)")
        return self.latest

    def partial_body(self) -> dict[str, Any] | None:
        return self.latest


def reassemble_responses_stream(stream: bytes | str) -> Reassembly:
    return reassemble_with(_Terminal(), stream)
