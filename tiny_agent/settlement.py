"""How a provider response settles its model attempt: an assistant entry, or a failed step.

One decision, taken the same way live, on resume (settling from a stored
``raw`` fact) and in audit's drift check, so the three can never disagree.

Pure: no I/O.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from tiny_agent.facts import RawResponse
from tiny_agent.normalize import Accepted, normalize_body
from tiny_agent.reducer import is_blank
from tiny_agent.transcript import AssistantMessage, StopReason, Usage


class Settlement(msgspec.Struct, frozen=True):
    """What a response settles its attempt into: an assistant message, or a failure (with its usage)."""

    usage: Usage
    message: AssistantMessage | None = None
    stop_reason: StopReason | None = None
    failure: tuple[str, str] | None = None
    """(code, one-line reason) when the step fails."""


def settlement(raw: RawResponse) -> Settlement:
    """Decide how a response settles its attempt (the same live, on resume, and in audit's drift check).

    A response the seam rejects, an HTTP error, an empty ``stop`` answer and a
    ``length`` answer without calls fail the step, keeping whatever usage the
    provider reported; anything else becomes the assistant entry.
    """
    if raw.body is UNSET:
        return Settlement(usage=Usage(), failure=("bad_response", f"HTTP {raw.status}: the response body is not UTF-8 text"))
    outcome = normalize_body(raw.body)
    if not 200 <= raw.status < 300:
        detail = outcome.reason if not isinstance(outcome, Accepted) else "unexpected body"
        return Settlement(usage=outcome.usage, failure=("http_error", f"HTTP {raw.status}: {detail}"))
    if not isinstance(outcome, Accepted):
        return Settlement(usage=outcome.usage, failure=("rejected_response", outcome.reason))
    message = outcome.message
    if outcome.stop_reason == "stop" and (message.content is None or is_blank(message.content)):
        return Settlement(usage=outcome.usage, failure=("empty_response", "the model stopped without an answer (empty content)"))
    if outcome.stop_reason == "length" and message.tool_calls is UNSET:
        reason = "the model's answer was cut off by its token limit (finish_reason length)"
        return Settlement(usage=outcome.usage, failure=("length_without_calls", reason))
    return Settlement(usage=outcome.usage, message=message, stop_reason=outcome.stop_reason)
