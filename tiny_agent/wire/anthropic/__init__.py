"""Anthropic Messages (``POST /messages``): the request, the seam and stream reassembly."""

from __future__ import annotations

from tiny_agent.wire.anthropic import request, seam, stream
from tiny_agent.wire.seam import WireApi

API = WireApi("anthropic-messages:v1", request.anthropic_request, seam, stream.reassemble_anthropic_stream)
