"""A scripted server for the three wire APIs on 127.0.0.1, for the demo and for tests.

It speaks plain HTTP/1.1 through the standard library, answers
``POST /v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` from a
script of replies (or a model computing them from the request), streams
event-stream bodies in irregular pieces, and records every request it got —
credentials as fingerprints only — so tests can assert what a client sent,
how often, and which rule of its API it broke.

- :mod:`.script` — :class:`Reply`, :class:`Pieces`, :func:`streamed`, the wire plan;
- :mod:`.events` — :class:`Event`, :class:`Comment`, :func:`encode_events`;
- :mod:`.answers` — whole bodies and event streams for each API from one :class:`Answer`;
- :mod:`.capture` — :class:`RecordedRequest`, :func:`fingerprint`;
- :mod:`.validation` — each API's request rules, :class:`Violation`;
- :mod:`.models` — :class:`ToolLoopModel`, :class:`EndlessToolCaller`;
- :mod:`.server` — :class:`LoopbackServer`;
- :mod:`.demo` — the demo's script.

Run ``python -m tiny_agent.loopback --port 8765`` to serve the demo script by hand.
docs/loopback.md is the guide for test writers.
"""

from tiny_agent.loopback.answers import (
    Answer,
    Call,
    StreamShape,
    Tokens,
    error_body,
    event_stream,
    whole_body,
)
from tiny_agent.loopback.capture import RecordedRequest, fingerprint
from tiny_agent.loopback.demo import DEMO_MODEL, DEMO_PROMPT, demo_bodies, demo_script
from tiny_agent.loopback.events import Comment, Event, StreamItem, encode_events
from tiny_agent.loopback.models import EndlessToolCaller, ToolLoopModel
from tiny_agent.loopback.script import (
    EVENT_STREAM,
    Pieces,
    Reply,
    Script,
    ScriptedModel,
    piece_sizes,
    streamed,
    wire_plan,
)
from tiny_agent.loopback.server import ROUTES, LoopbackServer, SentReply
from tiny_agent.loopback.validation import Violation
from tiny_agent.wire.registry import APIS, Api

__all__ = [
    "APIS",
    "DEMO_MODEL",
    "DEMO_PROMPT",
    "EVENT_STREAM",
    "ROUTES",
    "Answer",
    "Api",
    "Call",
    "Comment",
    "EndlessToolCaller",
    "Event",
    "LoopbackServer",
    "Pieces",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptedModel",
    "SentReply",
    "StreamItem",
    "StreamShape",
    "Tokens",
    "ToolLoopModel",
    "Violation",
    "demo_bodies",
    "demo_script",
    "encode_events",
    "error_body",
    "event_stream",
    "fingerprint",
    "piece_sizes",
    "streamed",
    "whole_body",
    "wire_plan",
]
