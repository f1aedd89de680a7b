"""Steps and attempts: ``stepAttempt`` (§9.3), ``stepFailed`` (§9.4), configuration snapshots (§13), ``raw`` (v3).

Pure.  The fast twin takes a run's first attempt at a step under a snapshot already validated;
retries, compaction steps and new snapshots take the reference rule.
"""

from __future__ import annotations

import re
from typing import Any, Final

from msgspec import UNSET, UnsetType

from tiny_agent.fold import contract
from tiny_agent.fold.books import AttemptBook, Configuration
from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSITION,
    check_body,
    fail,
    is_digest,
    is_safe_int,
    is_word,
    one_of,
    require_error,
    require_keys,
    require_object,
    require_text,
    require_uuid,
    show,
)
from tiny_agent.fold.core import FoldCore, Operation, first_pending, kind_of, newest
from tiny_agent.journal.canonical import canonical_json, sha256_digest
from tiny_agent.journal.facts import CUT_BY_PEER, StepAttempt
from tiny_agent.journal.state import (
    ConfigurationSnapshot,
    GitState,
    InstructionDigest,
    LatestAttempt,
    RunOperation,
    SentOptions,
    StepFailure,
    StepKind,
    ToolDigest,
)

# -- stepAttempt (§9.3) ------------------------------------------------------


def step_attempt(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    require_keys(record, contract.STEP_ATTEMPT_KEYS, "stepAttempt record")
    operation = fold.lookup_operation(record.get("operationId"), "stepAttempt operationId")
    number = record.get("attempt")
    if not is_safe_int(number, 1):
        fail(INVALID_FACT, f"stepAttempt attempt is not a safe integer >= 1: {show(number)}")
    if number == 1:
        step_id = fold.reserve(record.get("stepId"), contract.IDENTITY, "stepAttempt stepId")
    else:
        step_id = require_uuid(record.get("stepId"), "stepAttempt stepId")
    attempt_id = fold.reserve(record.get("attemptId"), contract.IDENTITY, "stepAttempt attemptId")
    step_kind = record.get("stepKind")
    limit = fold.profile.max_attempt
    if number > limit:
        fail(INVALID_FACT, f"stepAttempt attempt {number} exceeds the {limit} attempts a v{fold.profile.version} step may have")
    if not is_word(step_kind, contract.STEP_KIND_WORDS):
        fail(INVALID_FACT, f"stepAttempt stepKind is not {one_of(contract.STEP_KIND_WORDS)}: {show(step_kind)}")
    kind = kind_of(operation)
    if step_kind != ("assistant" if kind == "run" else "compaction"):
        fail(INVALID_TRANSITION, f"a {kind} operation cannot take a {step_kind} step")
    state = fold.state
    context_id = record.get("contextThroughEntryId")
    if type(context_id) is not str or context_id not in state.entries:
        require_uuid(context_id, "stepAttempt contextThroughEntryId")
        fail(INVALID_REFERENCE, f"contextThroughEntryId {context_id} names no entry")
    if number == 1 and context_id != state.contextBoundary:
        fail(INVALID_TRANSITION, f"attempt 1 must see the context through {state.contextBoundary}, not {context_id}")
    digest = record.get("configurationDigest")
    configuration = _configuration(fold, record.get("configurationSnapshot"), digest)
    if digest != configuration.digest:
        if not is_digest(digest):
            fail(INVALID_FACT, "configurationDigest is not a sha256 digest")
        fail(INVALID_FACT, f"configurationDigest is not the digest of the snapshot ({configuration.digest})")
    if number == 1:
        _check_new_step(fold, operation)
    else:
        _check_retry(fold, operation, step_id, step_kind, number, context_id, digest)
    _open(fold, operation, attempt_id, step_id, step_kind, number, context_id, configuration)


def fast_step_attempt(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    record: StepAttempt = fact.record
    run = fold.state.operation
    step_id = record.stepId
    attempt_id = record.attemptId
    context_id = record.contextThroughEntryId
    # The context boundary is always an applied entry (the reference rule checks that a context names one).
    if (
        record.attempt != 1
        or record.stepKind != "assistant"
        or type(run) is not RunOperation
        or run.operationId != record.operationId
        or context_id != fold.state.contextBoundary
        or step_id == attempt_id
        or not fold.reservable(step_id, fact_id)
        or not fold.reservable(attempt_id, fact_id)
    ):
        return False
    # A snapshot equal to one validated under the claimed digest has it; an unseen one takes the reference rule once.
    books = fold.books
    configuration = books.configurations.get(record.configurationDigest)
    if configuration is None or configuration.snapshot != record.configurationSnapshot:
        return False
    step = run.step
    if step is not UNSET and (step.status != "settled" or step.stopReason != "toolUse" or books.pending):
        return False
    books.reserved[step_id] = contract.IDENTITY
    books.reserved[attempt_id] = contract.IDENTITY
    _open(fold, run, attempt_id, step_id, "assistant", 1, context_id, configuration)
    return True


def _check_new_step(fold: FoldCore, operation: Operation) -> None:
    step = operation.step
    if step is UNSET:
        return
    if step.status != "settled":
        fail(INVALID_TRANSITION, f"a new step cannot start while step {step.stepId} is {step.status}")
    if type(operation) is not RunOperation:
        fail(INVALID_TRANSITION, "a compaction has exactly one step")
    if step.stopReason != "toolUse":
        fail(INVALID_TRANSITION, f"a new step cannot follow a step that ended with {step.stopReason}")
    if fold.books.pending:
        fail(INVALID_TRANSITION, f"a new step cannot start while tool call {first_pending(operation)} is pending")


def _check_retry(
    fold: FoldCore, operation: Operation, step_id: str, step_kind: str, number: int, context_id: str, digest: str
) -> None:
    """Attempt ``number`` > 1 continues the step's open attempt ``number - 1`` and closes it.

    An open attempt is its operation's newest (:class:`AttemptBook`): only a refused retry needs the step's attempts looked up.
    """
    view = operation.step
    previous: AttemptBook | None
    if view is not UNSET and view.stepId == step_id:
        count, previous = view.attempt, fold.books.attempts[view.attemptId]
    else:
        earlier = [attempt for attempt in fold.books.attempts.values() if attempt.step_id == step_id]
        count, previous = len(earlier), (earlier[-1] if earlier else None)
    what = f"attempt {number} of step {step_id}"
    if count != number - 1 or previous is None:
        fail(INVALID_TRANSITION, f"{what} needs exactly {number - 1} earlier attempts, not {count}")
    if previous.number != number - 1 or not previous.open:
        fail(INVALID_TRANSITION, f"{what} needs attempt {number - 1} still open")
    if previous.step_kind != step_kind or previous.operation_id != operation.operationId:
        fail(INVALID_TRANSITION, f"{what} changes the step kind or operation")
    view = newest(operation)
    if view.contextThroughEntryId != context_id:
        fail(INVALID_TRANSITION, f"{what} must repeat attempt {number - 1}'s contextThroughEntryId")
    if view.configurationDigest != digest:
        fail(INVALID_TRANSITION, f"{what} must repeat attempt {number - 1}'s configurationDigest")
    previous.open = False


def _open(
    fold: FoldCore,
    operation: Operation,
    attempt_id: str,
    step_id: str,
    step_kind: StepKind,
    number: int,
    context_id: str,
    configuration: Configuration,
) -> None:
    operation_id = operation.operationId
    digest = configuration.digest
    snapshot = configuration.snapshot
    fold.books.attempts[attempt_id] = AttemptBook(operation_id, step_id, step_kind, number, digest)
    operation.step = LatestAttempt(
        operation_id, step_id, attempt_id, number, step_kind, "attempting", context_id, snapshot, digest
    )
    state = fold.state
    state.lastSnapshot = snapshot
    if number == 1:
        state.runSteps += 1


def _configuration(fold: FoldCore, value: object, claimed_digest: object) -> Configuration:
    """Validate a configuration snapshot (§13.1) and digest it (§13.2), once per distinct snapshot: one equal to the
    last seen under the claimed digest (a C-level dict comparison) skips validation and hashing."""
    snapshot = require_object(value, "configurationSnapshot")
    known = fold.books.configurations.get(claimed_digest) if type(claimed_digest) is str else None
    if known is not None and known.source == snapshot:
        return known
    configuration = new_configuration(snapshot, fold.profile.snapshot_keys)
    fold.books.configurations[configuration.digest] = configuration
    return configuration


def new_configuration(snapshot: dict[str, Any], keys: frozenset[str] = contract.SNAPSHOT_KEYS) -> Configuration:
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
        requestOptions=_request_options(snapshot["requestOptions"]) if "requestOptions" in snapshot else UNSET,
        git=_git(snapshot["git"]) if "git" in snapshot else UNSET,
    )
    digest = sha256_digest(canonical_json(normalized.digested()))
    return Configuration(source=snapshot, snapshot=normalized, digest=digest, tool_names=names)


def _request_options(value: object) -> SentOptions:
    """The v3 ``requestOptions`` object: ``maxTokens`` a positive safe integer, ``toolChoice`` text, ``stream`` a boolean."""
    what = "configurationSnapshot.requestOptions"
    options = require_object(value, what)
    require_keys(options, contract.REQUEST_OPTIONS_KEYS, what)
    if "maxTokens" in options and not is_safe_int(options["maxTokens"], 1):
        fail(INVALID_FACT, f"{what}.maxTokens is not a positive integer: {show(options['maxTokens'])}")
    if "toolChoice" in options:
        require_text(options["toolChoice"], f"{what}.toolChoice")
    if type(options.get("stream", False)) is not bool:
        fail(INVALID_FACT, f"{what}.stream is not a boolean: {show(options['stream'])}")
    return SentOptions(**options)


def _git(value: object) -> GitState:
    """The v3 ``git`` object: exactly ``commit`` (40 or 64 lower-case hex digits) and ``dirty`` (a boolean)."""
    state = require_object(value, "configurationSnapshot.git")
    commit, dirty = state.get("commit"), state.get("dirty")
    if state.keys() != contract.GIT_KEYS or type(dirty) is not bool or type(commit) is not str or not _COMMIT.fullmatch(commit):
        fail(INVALID_FACT, f"configurationSnapshot.git is not {{commit: a hex object name, dirty: a boolean}}: {show(state)}")
    return GitState(commit=commit, dirty=dirty)


_COMMIT: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _digests(snapshot: dict[str, Any], member: str, label: str) -> list[tuple[str, str]]:
    """The array ``snapshot[member]`` of ``{label: text, <digest>: sha256}`` objects, checked, as pairs."""
    items = snapshot.get(member)
    if type(items) is not list:
        fail(INVALID_FACT, f"configurationSnapshot.{member} is not an array")
    keys, digest = (contract.TOOL_DIGEST_KEYS, "definitionDigest") if member == "tools" else (contract.INSTRUCTION_KEYS, "digest")
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


# -- stepFailed (§9.4) ---------------------------------------------------------


def step_failed(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    require_keys(record, contract.STEP_FAILED_KEYS, "stepFailed record")
    operation = fold.lookup_operation(record.get("operationId"), "stepFailed operationId")
    attempt_id = require_uuid(record.get("attemptId"), "stepFailed attemptId")
    require_error(record.get("error"), "stepFailed error")
    attempt = fold.books.attempts.get(attempt_id)
    if attempt is None:
        fail(INVALID_REFERENCE, f"stepFailed names unknown attempt {attempt_id}")
    if attempt.operation_id != operation.operationId:
        fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to another operation")
    if attempt.step_id != record.get("stepId"):
        fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}")
    if not attempt.open:
        fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
    attempt.open = False
    step = newest(operation)
    step.status = "failed"
    error = record["error"]
    raw_id = None if step.rawId is UNSET else step.rawId
    fold.state.lastStepFailure = StepFailure(code=error["code"], message=error["message"], rawId=raw_id)


# -- raw (v3): the provider's response to an open attempt ------------------------------------------


def raw_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    require_keys(fact, contract.RAW_FACT_KEYS, "raw fact")
    if fold.line_facts != 2 or fold.fact_index != 0:
        fail(INVALID_FACT, "a raw fact must be its own transaction (followed only by its seal)")
    operation = fold.lookup_operation(fact.get("operationId"), "raw operationId")
    attempt_id = require_uuid(fact.get("attemptId"), "raw attemptId")
    attempt = fold.books.attempts.get(attempt_id)
    if attempt is None or attempt.operation_id != operation.operationId:
        fail(INVALID_REFERENCE, f"raw attemptId {attempt_id} is not an attempt of this operation")
    if not attempt.open:
        fail(INVALID_TRANSITION, f"raw fact for attempt {attempt_id}, which is no longer open")
    step = newest(operation)
    if step.rawId is not UNSET:
        fail(INVALID_TRANSITION, f"attempt {attempt_id} already has its raw fact {step.rawId}")
    raw = require_object(fact.get("raw"), "raw")
    require_keys(raw, contract.RAW_KEYS, "raw")
    status = raw.get("status")
    if not is_safe_int(status):
        fail(INVALID_FACT, "raw.status is not a safe non-negative integer")
    if "contentType" not in raw or (raw["contentType"] is not None and type(raw["contentType"]) is not str):
        fail(INVALID_FACT, "raw.contentType is not a string or null")
    check_body(raw, "raw")
    step.rawId = fact_id
    step.rawStatus = status
    if str(raw.get("incomplete", "")).startswith(CUT_BY_PEER):
        step.rawCut = True
