"""Usage facts (session-v2 §10): the reference rule next to its fast twin.

Pure.  Usage only ever adds to the session totals; it may name a finished
operation, and any number of usage facts may name the same owner.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    USAGE_COUNTERS,
    USAGE_FACT_KEYS,
    USAGE_KEYS,
    fail,
    require_uuid,
    show,
    unknown_key,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.typed import UsageFactWire
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.transcript import Usage


class UsageRules(FoldCore):
    def _usage_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= USAGE_FACT_KEYS:
            unknown_key(fact, USAGE_FACT_KEYS, "usage fact")
        operation_id = fact.get("operationId")
        if type(operation_id) is not str or operation_id not in self._operations:
            require_uuid(operation_id, "usage operationId")
            fail(INVALID_REFERENCE, f"usage operationId {operation_id} names no operation")
        has_attempt = "attemptId" in fact
        if has_attempt == ("toolStartedId" in fact):
            fail(INVALID_FACT, "usage fact needs exactly one of attemptId and toolStartedId")
        if has_attempt:
            owner_id = fact["attemptId"]
            owner = self._attempts.get(owner_id) if type(owner_id) is str else None
            if owner is None or owner.operation_id != operation_id:
                require_uuid(owner_id, "usage attemptId")
                fail(INVALID_REFERENCE, f"usage attemptId {owner_id} is not an attempt of operation {operation_id}")
        else:
            owner_id = fact["toolStartedId"]
            started = self._tool_started.get(owner_id) if type(owner_id) is str else None
            if started is None or started.operationId != operation_id:
                require_uuid(owner_id, "usage toolStartedId")
                fail(INVALID_REFERENCE, f"usage toolStartedId {owner_id} is not a tool of operation {operation_id}")
        usage = fact.get("usage")
        if type(usage) is not dict:
            fail(INVALID_FACT, "usage is not an object")
        if not usage.keys() <= USAGE_KEYS:
            unknown_key(usage, USAGE_KEYS, "usage")
        totals = msgspec.structs.asdict(self.state.usage)
        counters: list[int] = []
        for name in USAGE_COUNTERS:
            value = usage.get(name)
            if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
                fail(INVALID_FACT, f"usage.{name} is not a safe non-negative integer: {show(value)}")
            if totals[name] + value > MAX_SAFE_INTEGER:
                fail(INVALID_FACT, f"usage.{name} overflows the session total")
            counters.append(value)
        self._add_usage(counters[0], counters[1], counters[2], counters[3])

    def _fast_usage(self, fact: UsageFactWire, fact_id: str) -> bool:
        operation_id = fact.operation_id
        if operation_id not in self._operations:
            return False
        attempt_id = fact.attempt_id
        started_id = fact.tool_started_id
        if attempt_id is not UNSET:
            attempt = self._attempts.get(attempt_id)
            if started_id is not UNSET or attempt is None or attempt.operation_id != operation_id:
                return False
        else:
            started = self._tool_started.get(started_id) if started_id is not UNSET else None
            if started is None or started.operationId != operation_id:
                return False
        usage = fact.usage
        totals = self.state.usage
        input_tokens = totals.input + usage.input
        output = totals.output + usage.output
        cache_read = totals.cacheRead + usage.cache_read
        cache_write = totals.cacheWrite + usage.cache_write
        if (
            input_tokens > MAX_SAFE_INTEGER
            or output > MAX_SAFE_INTEGER
            or cache_read > MAX_SAFE_INTEGER
            or cache_write > MAX_SAFE_INTEGER
        ):
            return False
        self.state.usage = Usage(input_tokens, output, cache_read, cache_write)
        return True

    def _add_usage(self, input_tokens: int, output: int, cache_read: int, cache_write: int) -> None:
        totals = self.state.usage
        self.state.usage = Usage(
            totals.input + input_tokens,
            totals.output + output,
            totals.cacheRead + cache_read,
            totals.cacheWrite + cache_write,
        )
