"""What the loopback server is told to answer: :class:`Reply`, how its body is cut and paced, and the wire APIs.

A reply is fixed bytes plus instructions for putting them on the wire: a
status and headers, a delay before answering, a hang-up instead of an answer,
or a body sent in irregular pieces (a stream), optionally breaking off or
stalling part-way.  :func:`wire_plan` turns a reply into the exact pieces
and pauses the server writes, so what goes over the socket is a pure function
of the script (and the seed): a test can predict, and check, every byte.

Pure: no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from tiny_agent.loopback.events import StreamItem, encode_events
from tiny_agent.wire.registry import Api

Framing = Literal["length", "chunked", "close"]
"""How the end of a body is told: ``Content-Length``, ``Transfer-Encoding: chunked``, or closing the connection."""

EVENT_STREAM: Final = "text/event-stream"


class Pieces(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a streamed body is cut into pieces and paced: sizes and pauses drawn from a seeded RNG."""

    seed: int = 0
    smallest: int = 1
    largest: int = 40
    pause_chance: float = 0.3
    """The chance of a pause after a piece (the client then sees that piece in a read of its own)."""
    pause: float = 0.002
    """Seconds of each pause: short, so long streams stay fast."""
    split_awkwardly: bool = True
    """Also cut inside one multi-byte UTF-8 character and inside one CRLF, when the body holds any."""


class Reply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One scripted answer.  Defaults: ``200``, a whole JSON body sent with ``Content-Length``."""

    status: int = 200
    body: bytes = b""
    """Exactly the bytes of the body (for a stream, of the whole ``text/event-stream`` body)."""
    content_type: str | None = "application/json"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """More response headers, e.g. ``{"Retry-After": "2"}``."""
    delay: float = 0.0
    """Seconds to wait before answering (to make clients time out)."""
    hang_up: bool = False
    """Close the connection without any response."""
    api: Api | None = None
    """The API this reply is for: a request on another API's route is answered 400 and is a violation."""
    pieces: Pieces | None = None
    """Send the body in irregular pieces (a stream); None sends it whole."""
    framing: Framing | None = None
    """None: ``length`` for a whole body, ``chunked`` for one sent in pieces."""
    break_off_after: int | None = None
    """Close the connection after this many body bytes (the rest is never sent)."""
    stall_after: int | None = None
    """After this many body bytes, send nothing for ``stall_for`` seconds without closing, then go on."""
    stall_for: float = 0.0

    @property
    def chosen_framing(self) -> Framing:
        if self.framing is not None:
            return self.framing
        return "length" if self.pieces is None else "chunked"

    @property
    def sent_body(self) -> bytes:
        """The body bytes that reach the client: all of them, or those before the break-off."""
        if self.break_off_after is None:
            return self.body
        return self.body[: self.break_off_after]


def streamed(
    body: bytes | Sequence[StreamItem],
    *,
    seed: int = 0,
    pieces: Pieces | None = None,
    api: Api | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
    break_off_after: int | None = None,
    stall_after: int | None = None,
    stall_for: float = 0.0,
    framing: Framing = "chunked",
) -> Reply:
    """An event stream sent in irregular pieces (``pieces`` wins over ``seed`` when both are given).

    ``body`` is the exact bytes of the stream, or events and comments to write out (with ``\\n`` line ends).
    """
    return Reply(
        status=status,
        body=body if isinstance(body, bytes) else encode_events(body),
        content_type=EVENT_STREAM,
        headers=dict(headers or {}),
        api=api,
        pieces=pieces if pieces is not None else Pieces(seed=seed),
        framing=framing,
        break_off_after=break_off_after,
        stall_after=stall_after,
        stall_for=stall_for,
    )


Model = Callable[[Any], Reply]
"""Computes a reply from the decoded JSON body of the request."""


class ScriptedModel:
    """A model that answers one API: the server checks the route before asking it (see :mod:`.models`)."""

    api: Api

    def reply(self, body: Any) -> Reply:
        raise NotImplementedError

    def __call__(self, body: Any) -> Reply:
        return self.reply(body)


Step = Reply | Model
Script = Sequence[Step]


def expected_api(step: Step) -> Api | None:
    """The API a step says it is for, before any reply is computed."""
    if isinstance(step, Reply):
        return step.api
    if isinstance(step, ScriptedModel):
        return step.api
    return None


# == the wire plan ================================================================


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
    body = reply.body
    end = len(body) if reply.break_off_after is None else max(0, min(reply.break_off_after, len(body)))
    cuts = set(_cuts(body, reply.pieces)) if reply.pieces is not None else set()
    stall_at = reply.stall_after if reply.stall_after is not None and 0 <= reply.stall_after <= end else None
    if stall_at is not None:
        cuts.add(stall_at)
    cuts.add(end)
    rng = random.Random(_pause_seed(reply.pieces))
    writes: list[Write] = []
    start = 0
    for cut in sorted(position for position in cuts if 0 <= position <= end):
        if cut == start and cut != stall_at:
            continue
        pause = _pause(rng, reply.pieces)
        if cut == stall_at:
            pause = reply.stall_for
        writes.append(Write(data=body[start:cut], pause_after=pause))
        start = cut
    writes = [write for write in writes if write.data or write.pause_after]
    return WirePlan(writes=writes, broken_off=end < len(body))


def piece_sizes(body: bytes, pieces: Pieces) -> list[int]:
    """The sizes ``body`` is cut into (no stall, no break-off)."""
    return wire_plan(Reply(body=body, pieces=pieces)).sizes


def _cuts(body: bytes, pieces: Pieces) -> list[int]:
    rng = random.Random(pieces.seed)
    smallest = max(1, pieces.smallest)
    largest = max(smallest, pieces.largest)
    cuts: list[int] = []
    position = 0
    while True:
        position += rng.randint(smallest, largest)
        if position >= len(body):
            break
        cuts.append(position)
    if pieces.split_awkwardly:
        cuts.extend(_awkward_cuts(body, rng))
    return cuts


def _awkward_cuts(body: bytes, rng: random.Random) -> list[int]:
    """One cut after the first byte of a multi-byte UTF-8 character, one between a CR and its LF (chosen at random)."""
    cuts: list[int] = []
    leads = [index for index, byte in enumerate(body) if byte >= 0xC0 and index + 1 < len(body)]
    if leads:
        cuts.append(rng.choice(leads) + 1)
    line_ends = _crlf_positions(body)
    if line_ends:
        cuts.append(rng.choice(line_ends) + 1)
    return cuts


def _crlf_positions(body: bytes) -> list[int]:
    positions: list[int] = []
    found = body.find(b"\r\n")
    while found != -1:
        positions.append(found)
        found = body.find(b"\r\n", found + 2)
    return positions


def _pause_seed(pieces: Pieces | None) -> int:
    # A stream of its own, so changing the pause chance does not change the sizes.
    return -1 if pieces is None else pieces.seed * 7919 + 1


def _pause(rng: random.Random, pieces: Pieces | None) -> float:
    if pieces is None:
        return 0.0
    return pieces.pause if rng.random() < pieces.pause_chance else 0.0
