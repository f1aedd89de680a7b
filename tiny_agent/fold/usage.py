"""Usage facts (session-v2 §10): only ever added to the totals; they may name a finished operation, and
any number may name the same owner.  Pure."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold import contract
from tiny_agent.fold.contract import INVALID_FACT, INVALID_REFERENCE, fail, require_keys, require_object, require_uuid, show
from tiny_agent.fold.core import FoldCore
from tiny_agent.journal.facts import UsageFact
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.transcript import Usage


def usage_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    require_keys(fact, contract.USAGE_FACT_KEYS, "usage fact")
    books = fold.books
    operation_id = fact.get("operationId")
    if type(operation_id) is not str or operation_id not in books.operations:
        require_uuid(operation_id, "usage operationId")
        fail(INVALID_REFERENCE, f"usage operationId {operation_id} names no operation")
    has_attempt = "attemptId" in fact
    if has_attempt == ("toolStartedId" in fact):
        fail(INVALID_FACT, "usage fact needs exactly one of attemptId and toolStartedId")
    if has_attempt:
        owner_id = fact["attemptId"]
        attempt = books.attempts.get(owner_id) if type(owner_id) is str else None
        if attempt is None or attempt.operation_id != operation_id:
            require_uuid(owner_id, "usage attemptId")
            fail(INVALID_REFERENCE, f"usage attemptId {owner_id} is not an attempt of operation {operation_id}")
    else:
        owner_id = fact["toolStartedId"]
        started = books.tool_calls.get(owner_id) if type(owner_id) is str else None
        if started is None or started.operationId != operation_id:
            require_uuid(owner_id, "usage toolStartedId")
            fail(INVALID_REFERENCE, f"usage toolStartedId {owner_id} is not a tool of operation {operation_id}")
    usage = require_object(fact.get("usage"), "usage")
    require_keys(usage, fold.profile.usage_keys, "usage")
    totals = fold.state.usage
    for name in contract.USAGE_COUNTERS:
        if name == "reasoning" and name not in usage:
            break
        total, value = getattr(totals, name) or 0, usage.get(name)
        if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
            fail(INVALID_FACT, f"usage.{name} is not a safe non-negative integer: {show(value)}")
        if total + value > MAX_SAFE_INTEGER:
            fail(INVALID_FACT, f"usage.{name} overflows the session total")
    added = Usage(**usage)
    fold.state.usage = totals + added
    if has_attempt:
        _counted(fold, owner_id, added)


def fast_usage(fold: FoldCore, fact: UsageFact, fact_id: str) -> bool:
    books = fold.books
    operation_id = fact.operationId
    if fact.attemptId is not UNSET:
        attempt = books.attempts.get(fact.attemptId)
        owner = None if attempt is None or fact.toolStartedId is not UNSET else attempt.operation_id
    else:
        started = books.tool_calls.get(fact.toolStartedId) if fact.toolStartedId is not UNSET else None
        owner = None if started is None else started.operationId
    if owner != operation_id or operation_id not in books.operations:
        return False
    usage = fact.usage
    if usage.reasoning is not UNSET and fold.profile.version == 2:
        return False
    added = fold.state.usage + usage
    if max(added.input, added.output, added.cacheRead, added.cacheWrite, added.reasoning or 0) > MAX_SAFE_INTEGER:
        return False
    fold.state.usage = added
    if fact.attemptId is not UNSET:
        _counted(fold, fact.attemptId, usage)
    return True


def _counted(fold: FoldCore, attempt_id: str, usage: Usage) -> None:
    """The usage of the answer that ends the context is the provider's count of it (``lastCount``)."""
    state = fold.state
    last = state.entries.get(state.contextBoundary) if state.contextBoundary is not None else None
    if last is not None and last.attemptId == attempt_id and usage.prompt_total:
        state.lastCount = (usage.prompt_total + usage.output, len(state.transcript), len(state.activeContext))
