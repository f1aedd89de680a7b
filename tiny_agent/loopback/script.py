"""What the loopback server is told to answer: :class:`Reply`, and the wire plan that puts its body on the socket, a
pure function of the reply and its seed (docs/loopback.md, *The script*, *Pieces*).  Pure: no I/O."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from tiny_agent.loopback.answers import StreamItem, encode_events
from tiny_agent.wire.registry import Api

Framing = Literal["length", "chunked", "close"]
"""How the end of a body is told: ``Content-Length``, ``Transfer-Encoding: chunked``, or closing the connection."""

EVENT_STREAM: Final = "text/event-stream"


class Pieces(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a streamed body is cut and paced (docs/loopback.md, "Pieces")."""

    seed: int = 0
    smallest: int = 1
    largest: int = 40
    pause_chance: float = 0.3
    pause: float = 0.002
    split_awkwardly: bool = True


class Reply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One scripted answer (the fields are docs/loopback.md's table).  Defaults: ``200``, a whole JSON body."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    delay: float = 0.0
    hang_up: bool = False
    api: Api | None = None
    pieces: Pieces | None = None
    framing: Framing | None = None
    """None: ``length`` for a whole body, ``chunked`` for one sent in pieces."""
    break_off_after: int | None = None
    stall_after: int | None = None
    stall_for: float = 0.0

    @property
    def chosen_framing(self) -> Framing:
        if self.framing is not None:
            return self.framing
        return "length" if self.pieces is None else "chunked"

    @property
    def sent_body(self) -> bytes:
        """The body bytes that reach the client: all of them, or those before the break-off."""
        return self.body if self.break_off_after is None else self.body[: self.break_off_after]


def streamed(
    body: bytes | Sequence[StreamItem],
    *,
    seed: int = 0,
    pieces: Pieces | None = None,
    api: Api | None = None,
    delay: float = 0.0,
    break_off_after: int | None = None,
    stall_after: int | None = None,
    stall_for: float = 0.0,
    framing: Framing = "chunked",
) -> Reply:
    """An event stream (exact bytes, or events written out with ``\\n``) in irregular pieces; ``pieces`` wins over ``seed``."""
    return Reply(
        body=body if isinstance(body, bytes) else encode_events(body),
        content_type=EVENT_STREAM,
        delay=delay,
        api=api,
        pieces=pieces if pieces is not None else Pieces(seed=seed),
        framing=framing,
        break_off_after=break_off_after,
        stall_after=stall_after,
        stall_for=stall_for,
    )


Model = Callable[[Any], Reply]
"""Computes a reply from the decoded JSON body of the request."""


Step = Reply | Model
Script = Sequence[Step]


class Write(msgspec.Struct, frozen=True):
    """One write to the socket, and how long to wait after it."""

    data: bytes
    pause_after: float = 0.0


class WirePlan(msgspec.Struct, frozen=True):
    writes: list[Write]
    """The body bytes in the order and pieces they are written (framing bytes not included)."""
    broken_off: bool
    """The connection is closed after the last write, before the body is complete."""

    @property
    def sizes(self) -> list[int]:
        return [len(write.data) for write in self.writes]


def wire_plan(reply: Reply) -> WirePlan:
    """The writes that put ``reply.body`` on the wire: pieces, pauses, stall and break-off."""
    body, pieces = reply.body, reply.pieces
    end = len(body) if reply.break_off_after is None else max(0, min(reply.break_off_after, len(body)))
    cuts = set(_cuts(body, pieces)) if pieces is not None else set()
    stall_at = reply.stall_after if reply.stall_after is not None and 0 <= reply.stall_after <= end else None
    cuts.update(cut for cut in (stall_at, end) if cut is not None)
    # Pauses come from a generator of their own, so changing the pause chance does not change the sizes.
    pauses = random.Random(-1 if pieces is None else pieces.seed * 7919 + 1)
    writes: list[Write] = []
    start = 0
    for cut in sorted(position for position in cuts if 0 <= position <= end):
        if cut == start and cut != stall_at:
            continue
        pause = pieces.pause if pieces is not None and pauses.random() < pieces.pause_chance else 0.0
        writes.append(Write(data=body[start:cut], pause_after=reply.stall_for if cut == stall_at else pause))
        start = cut
    return WirePlan(writes=[write for write in writes if write.data or write.pause_after], broken_off=end < len(body))


def piece_sizes(body: bytes, pieces: Pieces) -> list[int]:
    """The sizes ``body`` is cut into (no stall, no break-off)."""
    return wire_plan(Reply(body=body, pieces=pieces)).sizes


def _cuts(body: bytes, pieces: Pieces) -> list[int]:
    rng = random.Random(pieces.seed)
    smallest = max(1, pieces.smallest)
    largest = max(smallest, pieces.largest)
    cuts: list[int] = []
    position = rng.randint(smallest, largest)
    while position < len(body):
        cuts.append(position)
        position += rng.randint(smallest, largest)
    if pieces.split_awkwardly:
        # One cut after the first byte of a multi-byte UTF-8 character, one between a CR and its LF.
        leads = [index + 1 for index, byte in enumerate(body) if byte >= 0xC0 and index + 1 < len(body)]
        line_ends = [found.start() + 1 for found in re.finditer(rb"\r\n", body)]
        cuts.extend(rng.choice(candidates) for candidates in (leads, line_ends) if candidates)
    return cuts
