"""Chat Completions (``POST /chat/completions``): the request, the seam, stream reassembly, quirk adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tiny_agent.wire.chat import adapters, request, seam, stream
from tiny_agent.wire.seam import Change, Outcome, Reject, WireApi, decode_body

API = WireApi("chat-completions:v1", request.chat_request, seam, stream.reassembly, adapters.apply)


def normalize_chat(body: bytes | str, adapter_names: Sequence[str]) -> tuple[Outcome, list[Change]]:
    """Decode a stored body strictly, adapt it, and run the unchanged seam (a body that is not JSON is not adapted)."""
    try:
        value: Any = decode_body(body)
    except Reject as rejection:
        return API.rejected(rejection.reason), []
    adapted, changes = adapters.apply(value, adapter_names)
    return API.normalize(adapted), changes
