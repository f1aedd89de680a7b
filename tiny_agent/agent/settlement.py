"""How a provider response settles its model attempt: an assistant entry, or a failed step (docs/agent.md).

One pipeline (``wire.registry.derive``, then the rules below), the same live, on resume and in audit, read from the
attempt's recorded ``adapterIdentity``, never today's configuration (docs/architecture.md, step 4).  Pure.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from tiny_agent.agent.compaction import CONTEXT_LENGTH_EXCEEDED
from tiny_agent.fold.contract import is_blank
from tiny_agent.journal.facts import RawResponse
from tiny_agent.journal.transcript import AssistantMessage, StopReason, Usage
from tiny_agent.wire.context_errors import context_error
from tiny_agent.wire.registry import Derivation, derive
from tiny_agent.wire.seam import Accepted, Outcome, Rejected


class Settlement(msgspec.Struct, frozen=True):
    """What a response settles its attempt into: an assistant message, or a failure (with its usage)."""

    usage: Usage | None
    """None when the response reported no usage (no usage fact is written: not zero, not reported)."""
    message: AssistantMessage | None = None
    stop_reason: StopReason | None = None
    failure: tuple[str, str] | None = None
    """(code, one-line reason) when the step fails."""


# -- the settling rules ------------------------------------------------------------


def settlement(raw: RawResponse, adapter_identity: str) -> Settlement:
    """Decide how a response settles its attempt (docs/agent.md, *Settling a response*): an empty or cut-off
    answer is still the assistant entry (the run then ends failed, session-v2 §9.7, §18 P5)."""
    return settle_derived(raw, derive(raw, adapter_identity))


def settle_derived(raw: RawResponse, derivation: Derivation) -> Settlement:
    outcome = derivation.outcome
    if raw.body is UNSET and (derivation.stream is None or derivation.stream.problem is not None):
        return Settlement(usage=None, failure=("bad_response", f"HTTP {raw.status}: the response body is not UTF-8 text"))
    if not 200 <= raw.status < 300:
        text = "" if raw.body is UNSET else raw.body
        code = CONTEXT_LENGTH_EXCEEDED if context_error(raw.status, derivation.body, text) else "http_error"
        return Settlement(usage=outcome.usage, failure=(code, f"HTTP {raw.status}: {_error_detail(text, outcome)}"))
    if raw.incomplete is not UNSET:
        return Settlement(usage=outcome.usage, failure=("incomplete_response", f"the response ended early: {raw.incomplete}"))
    if not isinstance(outcome, Accepted):
        # A stream that had begun can still end by saying the prompt did not fit (Responses' response.failed).
        full = derivation.stream is not None and context_error(raw.status, derivation.body) is not None
        return Settlement(usage=outcome.usage, failure=(CONTEXT_LENGTH_EXCEEDED if full else "rejected_response", outcome.reason))
    message = outcome.message
    if message.content is None and message.tool_calls is UNSET:
        message = msgspec.structs.replace(message, content="")  # an empty answer (the run then fails `empty_answer`)
    return Settlement(usage=outcome.usage, message=message, stop_reason=outcome.stop_reason)


ERROR_BODY_SHOWN = 160
"""Characters of an error body that is not JSON shown in the failure (the whole body is in the raw fact)."""


def _error_detail(body: str, outcome: Outcome) -> str:
    """What an HTTP error said: the seam's reading of a JSON body, else the start of the body (a proxy's page says
    more than "not JSON" would)."""
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError:
        text = " ".join(body.split())
        if not text:
            return "an empty body"
        shown = text if len(text) <= ERROR_BODY_SHOWN else text[:ERROR_BODY_SHOWN] + "…"
        return f"{shown} (the body is not JSON)"
    return outcome.reason if isinstance(outcome, Rejected) else "unexpected body"


class SummarySettlement(msgspec.Struct, frozen=True):
    """What a compaction's summary response settles into: the summary text, or a failure."""

    usage: Usage | None
    summary: str | None = None
    failure: tuple[str, str] | None = None


def summary_settlement(raw: RawResponse, adapter_identity: str) -> SummarySettlement:
    """A summary is an answer with text and no tool calls (none were offered); anything else fails the step."""
    decided = settlement(raw, adapter_identity)
    if decided.failure is not None:
        return SummarySettlement(usage=decided.usage, failure=decided.failure)
    message = decided.message
    if message is None or message.tool_calls is not UNSET or not message.content or is_blank(message.content):
        failure = ("bad_summary", "the summary response has no text, or asks for tools")
        return SummarySettlement(usage=decided.usage, failure=failure)
    if decided.stop_reason == "refusal":  # its words are no summary of the conversation
        return SummarySettlement(usage=decided.usage, failure=("bad_summary", "the model declined to summarise (a refusal)"))
    return SummarySettlement(usage=decided.usage, summary=message.content)
