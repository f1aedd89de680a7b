"""OpenAI Responses (``POST /responses``, stateless): the request, the seam and stream reassembly."""

from __future__ import annotations

from tiny_agent.wire.responses import request, seam, stream
from tiny_agent.wire.seam import WireApi

API = WireApi("openai-responses:v1", request.responses_request, seam, stream.reassemble_responses_stream)
