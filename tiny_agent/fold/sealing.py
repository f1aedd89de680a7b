"""The v3 kinds: ``raw`` facts (the provider's response as received), ``mcp`` facts and ``seal`` facts (the chain).

Pure.  These kinds exist only where the version profile lists them (v3); in
a v2 journal they are unknown kinds, on both paths.  Each reference rule sits
next to its fast twin.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSITION,
    MCP_FACT_KEYS,
    MCP_MESSAGE_KEYS,
    RAW_FACT_KEYS,
    RAW_KEYS,
    SEAL_FACT_KEYS,
    Fault,
    fail,
    is_digest,
    is_safe_int,
    is_text,
    require_keys,
    require_object,
    require_text,
    require_uuid,
    show,
    unknown_key,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.typed import RawFactWire, SealFactWire


class SealRules(FoldCore):
    # -- raw (v3) ----------------------------------------------------------------------

    def _raw_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        require_keys(fact, RAW_FACT_KEYS, "raw fact")
        if self._facts_in_line != 2 or self._fact_index != 0:
            fail(INVALID_FACT, "a raw fact must be its own transaction (followed only by its seal)")
        operation = self._lookup_operation(fact.get("operationId"), "raw operationId")
        attempt_id = require_uuid(fact.get("attemptId"), "raw attemptId")
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.operation_id != operation.state.operationId:
            fail(INVALID_REFERENCE, f"raw attemptId {attempt_id} is not an attempt of this operation")
        if not attempt.open:
            fail(INVALID_TRANSITION, f"raw fact for attempt {attempt_id}, which is no longer open")
        if attempt.raw_id is not None:
            fail(INVALID_TRANSITION, f"attempt {attempt_id} already has its raw fact {attempt.raw_id}")
        status = check_raw_response(fact.get("raw"))
        # An open attempt is always its operation's latest: ``step`` is the state's current step.
        attempt.raw_id = fact_id
        attempt.step.rawId = fact_id
        attempt.step.rawStatus = status

    def _fast_raw(self, fact: RawFactWire, fact_id: str) -> bool:
        operation = self._current
        operation_id = fact.operation_id
        attempt = self._attempts.get(fact.attempt_id)
        if (
            self._facts_in_line != 2
            or self._fact_index != 0
            or operation is None
            or operation.state.operationId != operation_id
            or attempt is None
            or attempt.operation_id != operation_id
            or not attempt.open
            or attempt.raw_id is not None
        ):
            return False
        attempt.raw_id = fact_id
        attempt.step.rawId = fact_id
        attempt.step.rawStatus = fact.raw.status
        return True

    # -- seal (v3) ---------------------------------------------------------------------

    def _seal_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= SEAL_FACT_KEYS:
            unknown_key(fact, SEAL_FACT_KEYS, "seal fact")
        if self._fact_index != self._facts_in_line - 1:
            fail(INVALID_FACT, "a seal must be the last fact of its transaction")
        chain = fact.get("chain")
        if chain != self.chain:
            if not is_digest(chain):
                fail(INVALID_FACT, "seal chain is not a sha256 digest")
            raise Fault(
                "SEAL_MISMATCH",
                f"seal chain does not match lines 1-{self.lines - 1}: a committed line was changed, "
                "removed, added or reordered after it was sealed",
            )

    def _fast_seal(self, fact: SealFactWire, fact_id: str) -> bool:
        return self._fact_index == self._facts_in_line - 1 and fact.chain == self.chain


def check_raw_response(value: object) -> int:
    """The ``raw`` object's rules (session-v3, and the ``contentEncoding`` / ``redactions`` / ``incomplete`` members)."""
    raw = require_object(value, "raw")
    require_keys(raw, RAW_KEYS, "raw")
    status = raw.get("status")
    if type(status) is not int or not is_safe_int(status):
        fail(INVALID_FACT, "raw.status is not a safe non-negative integer")
    if "contentType" not in raw or (raw["contentType"] is not None and type(raw["contentType"]) is not str):
        fail(INVALID_FACT, "raw.contentType is not a string or null")
    check_body(raw, "raw")
    return status


def mcp_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    """v3 ``mcp``: MCP messages as they crossed the wire (docs/journal.md); they change no state."""
    require_keys(fact, MCP_FACT_KEYS, "mcp fact")
    require_text(fact.get("server"), "mcp server")
    if "toolStartedId" in fact:
        started_id = require_uuid(fact["toolStartedId"], "mcp toolStartedId")
        started = fold._tool_started.get(started_id)
        if started is None:
            fail(INVALID_REFERENCE, f"mcp toolStartedId {started_id} names no toolStarted record")
        if started.status != "pending":
            fail(INVALID_TRANSITION, f"mcp fact for tool call {started_id}, which is already answered")
    messages = fact.get("messages")
    if type(messages) is not list or not messages:
        fail(INVALID_FACT, "mcp messages is not a non-empty array")
    for message in messages:
        body = require_object(message, "mcp message")
        require_keys(body, MCP_MESSAGE_KEYS, "mcp message")
        if body.get("direction") not in ("send", "recv"):
            fail(INVALID_FACT, f"mcp message direction is not send or recv: {show(body.get('direction'))}")
        for name in ("method", "url"):
            if name in body:
                require_text(body[name], f"mcp message {name}")
        if "status" in body and not is_safe_int(body["status"]):
            fail(INVALID_FACT, "mcp message status is not a safe non-negative integer")
        if "contentType" in body and body["contentType"] is not None and type(body["contentType"]) is not str:
            fail(INVALID_FACT, "mcp message contentType is not a string or null")
        check_body(body, "mcp message")


def check_body(raw: dict[str, Any], what: str) -> None:
    """Exactly one of ``body`` and ``bodyBase64``; the optional ``redactions`` and ``incomplete``."""
    has_text = "body" in raw
    if has_text == ("bodyBase64" in raw):
        fail(INVALID_FACT, f"{what} needs exactly one of body and bodyBase64")
    body = raw["body"] if has_text else raw["bodyBase64"]
    if type(body) is not str:
        fail(INVALID_FACT, f"{what} body is not a string")
    if not has_text:
        try:
            base64.b64decode(body, validate=True)
        except binascii.Error:
            fail(INVALID_FACT, f"{what}.bodyBase64 is not valid base64")
    if "contentEncoding" in raw and not is_text(raw["contentEncoding"]):  # raw only: mcp messages have no such member
        fail(INVALID_FACT, f"{what}.contentEncoding is not a non-empty string: {show(raw['contentEncoding'])}")
    if "redactions" in raw and not is_safe_int(raw["redactions"], 1):
        fail(INVALID_FACT, f"{what}.redactions is not a safe integer >= 1: {show(raw['redactions'])}")
    if "incomplete" in raw and not is_text(raw["incomplete"]):
        fail(INVALID_FACT, f"{what}.incomplete is not a non-empty string: {show(raw['incomplete'])}")
