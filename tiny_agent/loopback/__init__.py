"""A scripted server for the three wire APIs on 127.0.0.1, for the demo and for tests (docs/loopback.md).

``answers`` builds bodies and streams from one neutral answer, ``script`` says how a reply goes on the wire,
``capture`` keeps and checks requests, ``models`` compute replies, ``server`` serves them,
``demo`` is the demo's script.  The top layer but the CLI: it may import anything below it.
"""

from tiny_agent.loopback.answers import (
    Answer,
    Call,
    Comment,
    Event,
    StreamShape,
    Tokens,
    encode_events,
    error_body,
    event_stream,
    whole_body,
)
from tiny_agent.loopback.capture import fingerprint
from tiny_agent.loopback.demo import DEMO_MODEL, DEMO_PROMPT, demo_bodies, demo_script
from tiny_agent.loopback.models import EndlessToolCaller, ToolLoopModel
from tiny_agent.loopback.script import EVENT_STREAM, Pieces, Reply, piece_sizes, streamed, wire_plan
from tiny_agent.loopback.server import LoopbackServer
from tiny_agent.wire.registry import APIS, Api

__all__ = [
    "APIS",
    "DEMO_MODEL",
    "DEMO_PROMPT",
    "EVENT_STREAM",
    "Answer",
    "Api",
    "Call",
    "Comment",
    "EndlessToolCaller",
    "Event",
    "LoopbackServer",
    "Pieces",
    "Reply",
    "StreamShape",
    "Tokens",
    "ToolLoopModel",
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
