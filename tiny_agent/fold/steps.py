"""Steps and attempts: ``stepAttempt`` (session-v2 §9.3), ``stepFailed`` (§9.4), configuration snapshots (§13).

Pure.  The fast path takes a run's first attempt at a step under a snapshot
it has already validated; retries, compaction steps and new snapshots take
the reference path.  How many attempts a step may have is the version
profile's (v2: two; v3: transport retries up to its limit).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from tiny_agent.fold.books import AttemptBook, Configuration, OperationBook, RunBook
from tiny_agent.fold.contract import (
    IDENTITY,
    INSTRUCTION_KEYS,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSITION,
    SNAPSHOT_KEYS,
    STEP_ATTEMPT_KEYS,
    STEP_FAILED_KEYS,
    STEP_KIND_WORDS,
    TOOL_DIGEST_KEYS,
    fail,
    is_digest,
    is_safe_int,
    is_step_kind,
    one_of,
    require_error,
    require_keys,
    require_object,
    require_text,
    require_uuid,
    show,
    unknown_key,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.typed import StepAttemptWire
from tiny_agent.journal.canonical import canonical_json, sha256_digest
from tiny_agent.journal.state import (
    ConfigurationSnapshot,
    InstructionDigest,
    LatestAttempt,
    StepFailure,
    StepKind,
    ToolDigest,
)


class StepRules(FoldCore):
    # -- stepAttempt (§9.3) ------------------------------------------------------

    def _step_attempt(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= STEP_ATTEMPT_KEYS:
            unknown_key(record, STEP_ATTEMPT_KEYS, "stepAttempt record")
        operation = self._lookup_operation(record.get("operationId"), "stepAttempt operationId")
        number = record.get("attempt")
        if not is_safe_int(number, 1):
            fail(INVALID_FACT, f"stepAttempt attempt is not a safe integer >= 1: {show(number)}")
        if number == 1:
            step_id = self._reserve(record.get("stepId"), IDENTITY, "stepAttempt stepId")
        else:
            step_id = require_uuid(record.get("stepId"), "stepAttempt stepId")
        attempt_id = self._reserve(record.get("attemptId"), IDENTITY, "stepAttempt attemptId")
        step_kind = record.get("stepKind")
        limit = self.profile.max_attempt
        if number > limit:
            fail(INVALID_FACT, f"stepAttempt attempt {number} exceeds the {limit} attempts a v{self.version} step may have")
        if not is_step_kind(step_kind):
            fail(INVALID_FACT, f"stepAttempt stepKind is not {one_of(STEP_KIND_WORDS)}: {show(step_kind)}")
        expected_kind = "assistant" if type(operation) is RunBook else "compaction"
        if step_kind != expected_kind:
            fail(INVALID_TRANSITION, f"a {operation.kind} operation cannot take a {step_kind} step")
        context_id = record.get("contextThroughEntryId")
        if type(context_id) is not str or context_id not in self.state.entries:
            require_uuid(context_id, "stepAttempt contextThroughEntryId")
            fail(INVALID_REFERENCE, f"contextThroughEntryId {context_id} names no entry")
        if number == 1 and context_id != self.state.contextBoundary:
            fail(
                INVALID_TRANSITION,
                f"attempt 1 must see the context through {self.state.contextBoundary}, not {context_id}",
            )
        digest = record.get("configurationDigest")
        configuration = self._configuration(record.get("configurationSnapshot"), digest)
        if digest != configuration.digest:
            if not is_digest(digest):
                fail(INVALID_FACT, "configurationDigest is not a sha256 digest")
            fail(INVALID_FACT, f"configurationDigest is not the digest of the snapshot ({configuration.digest})")
        if number == 1:
            self._check_new_step(operation)
        else:
            self._check_retry(operation, step_id, step_kind, number, context_id, digest)
        self._open_attempt(operation, attempt_id, step_id, step_kind, number, context_id, configuration)

    def _fast_step_attempt(self, record: StepAttemptWire, fact_id: str) -> bool:
        operation = self._current
        step_id = record.step_id
        attempt_id = record.attempt_id
        context_id = record.context_through_entry_id
        # The context boundary is always an applied entry, so a context equal
        # to it names one (the reference path checks that first).
        if (
            type(operation) is not RunBook
            or operation.state.operationId != record.operation_id
            or context_id != self.state.contextBoundary
            or step_id == attempt_id
            or not self._reservable(step_id, fact_id)
            or not self._reservable(attempt_id, fact_id)
        ):
            return False
        # A snapshot equal to one already validated under the claimed digest is
        # valid and has that digest; an unseen one takes the reference path once.
        configuration = self._configurations.get(record.configuration_digest)
        if configuration is None or configuration.snapshot != record.configuration_snapshot:
            return False
        step = operation.state.step
        if step is not UNSET and (step.status != "settled" or step.stopReason != "toolUse" or operation.pending):
            return False
        self._reserved[step_id] = IDENTITY
        self._reserved[attempt_id] = IDENTITY
        self._open_attempt(operation, attempt_id, step_id, "assistant", 1, context_id, configuration)
        return True

    def _check_new_step(self, operation: OperationBook) -> None:
        step = operation.state.step
        if step is UNSET:
            return
        if step.status != "settled":
            fail(INVALID_TRANSITION, f"a new step cannot start while step {step.stepId} is {step.status}")
        if type(operation) is not RunBook:
            fail(INVALID_TRANSITION, "a compaction has exactly one step")
        if step.stopReason != "toolUse":
            fail(INVALID_TRANSITION, f"a new step cannot follow a step that ended with {step.stopReason}")
        if operation.pending:
            fail(INVALID_TRANSITION, f"a new step cannot start while tool call {operation.first_pending()} is pending")

    def _check_retry(
        self, operation: OperationBook, step_id: str, step_kind: str, number: int, context_id: str, digest: str
    ) -> None:
        """Attempt ``number`` > 1 continues the step's open attempt ``number - 1`` and closes it."""
        earlier = self._step_attempts.get(step_id, [])
        what = f"attempt {number} of step {step_id}"
        if len(earlier) != number - 1:
            fail(INVALID_TRANSITION, f"{what} needs exactly {number - 1} earlier attempts, not {len(earlier)}")
        previous = earlier[-1]
        if previous.number != number - 1 or not previous.open:
            fail(INVALID_TRANSITION, f"{what} needs attempt {number - 1} still open")
        if previous.step_kind != step_kind or previous.operation_id != operation.state.operationId:
            fail(INVALID_TRANSITION, f"{what} changes the step kind or operation")
        if previous.context_through != context_id:
            fail(INVALID_TRANSITION, f"{what} must repeat attempt {number - 1}'s contextThroughEntryId")
        if previous.digest != digest:
            fail(INVALID_TRANSITION, f"{what} must repeat attempt {number - 1}'s configurationDigest")
        previous.open = False

    def _open_attempt(
        self,
        operation: OperationBook,
        attempt_id: str,
        step_id: str,
        step_kind: StepKind,
        number: int,
        context_id: str,
        configuration: Configuration,
    ) -> None:
        operation_id = operation.state.operationId
        digest = configuration.digest
        step = LatestAttempt(
            operation_id,
            step_id,
            attempt_id,
            number,
            step_kind,
            "attempting",
            context_id,
            configuration.snapshot,
            digest,
        )
        attempt = AttemptBook(
            attempt_id, operation_id, step_id, step_kind, number, context_id, digest, configuration.tool_names, step
        )
        self._attempts[attempt_id] = attempt
        if number == 1:
            self._step_attempts[step_id] = [attempt]
        else:
            self._step_attempts[step_id].append(attempt)
        operation.latest_step_id = step_id
        operation.state.step = step
        state = self.state
        state.lastSnapshot = configuration.snapshot
        if number == 1:
            state.runSteps += 1

    def _configuration(self, value: object, claimed_digest: object) -> Configuration:
        """Validate a configuration snapshot (§13.1) and digest it (§13.2), once per distinct snapshot.

        Sessions reuse one snapshot for step after step, so the last snapshot
        seen under a claimed digest is remembered and an equal one (a C-level
        dict comparison) skips validation and hashing.
        """
        snapshot = require_object(value, "configurationSnapshot")
        known = self._configurations.get(claimed_digest) if type(claimed_digest) is str else None
        if known is not None and known.source == snapshot:
            return known
        configuration = new_configuration(snapshot, self.profile.snapshot_keys)
        self._configurations[configuration.digest] = configuration
        return configuration

    # -- stepFailed (§9.4) ---------------------------------------------------------

    def _step_failed(self, record: dict[str, Any], fact_id: str) -> None:
        require_keys(record, STEP_FAILED_KEYS, "stepFailed record")
        operation = self._lookup_operation(record.get("operationId"), "stepFailed operationId")
        attempt_id = require_uuid(record.get("attemptId"), "stepFailed attemptId")
        require_error(record.get("error"), "stepFailed error")
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            fail(INVALID_REFERENCE, f"stepFailed names unknown attempt {attempt_id}")
        if attempt.operation_id != operation.state.operationId:
            fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to another operation")
        if attempt.step_id != record.get("stepId"):
            fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}")
        if not attempt.open:
            fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
        attempt.open = False
        attempt.failed = True
        attempt.step.status = "failed"
        error = record["error"]
        self.state.lastStepFailure = StepFailure(code=error["code"], message=error["message"], rawId=attempt.raw_id)


def new_configuration(snapshot: dict[str, Any], keys: frozenset[str] = SNAPSHOT_KEYS) -> Configuration:
    """Check a snapshot member by member (§13.1; ``keys``: those the version allows); digest its normalized form (§13.2)."""
    require_keys(snapshot, keys, "configurationSnapshot")
    for name in ("model", "adapterIdentity", "routingIdentity"):
        require_text(snapshot.get(name), f"configurationSnapshot.{name}")
    for name in ("systemPromptDigest", "outputOptionsDigest"):
        if not is_digest(snapshot.get(name)):
            fail(INVALID_FACT, f"configurationSnapshot.{name} is not a sha256 digest")
    declared = [ToolDigest(name=name, definitionDigest=digest) for name, digest in _digests(snapshot, "tools", "name")]
    names = frozenset(tool.name for tool in declared)
    if len(names) != len(declared):
        fail(INVALID_FACT, "configurationSnapshot.tools repeats a tool name")
    instructions: list[InstructionDigest] | UnsetType = UNSET
    if "instructions" in snapshot:
        instructions = [InstructionDigest(path=path, digest=sha) for path, sha in _digests(snapshot, "instructions", "path")]
    normalized = ConfigurationSnapshot(
        model=snapshot["model"],
        systemPromptDigest=snapshot["systemPromptDigest"],
        tools=declared,
        adapterIdentity=snapshot["adapterIdentity"],
        routingIdentity=snapshot["routingIdentity"],
        outputOptionsDigest=snapshot["outputOptionsDigest"],
        instructions=instructions,
    )
    return Configuration(
        source=snapshot, snapshot=normalized, digest=sha256_digest(canonical_json(normalized)), tool_names=names
    )


def _digests(snapshot: dict[str, Any], member: str, label: str) -> list[tuple[str, str]]:
    """The array ``snapshot[member]`` of ``{label: text, <digest>: sha256}`` objects, checked, as pairs."""
    items = snapshot.get(member)
    if type(items) is not list:
        fail(INVALID_FACT, f"configurationSnapshot.{member} is not an array")
    keys, digest = (TOOL_DIGEST_KEYS, "definitionDigest") if member == "tools" else (INSTRUCTION_KEYS, "digest")
    pairs = []
    for index, item in enumerate(items):
        what = f"configurationSnapshot.{member}[{index}]"
        value = require_object(item, what)
        require_keys(value, keys, what)
        text = require_text(value.get(label), f"{what}.{label}")
        if not is_digest(value.get(digest)):
            fail(INVALID_FACT, f"{what}.{digest} is not a sha256 digest")
        pairs.append((text, value[digest]))
    return pairs
