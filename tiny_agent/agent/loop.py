"""The agent loop: drive a session until it is idle, by asking the planner and doing what it says.

A live run and a recovery are the same loop (docs/agent.md): each turn asks
:func:`tiny_agent.agent.recovery.plan_recovery` for the next action, builds it with
:mod:`tiny_agent.agent.transactions` and commits, so a response on record is never requested twice.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final, Literal

import msgspec
from msgspec import UNSET

from tiny_agent.agent import compaction, transactions
from tiny_agent.agent.recovery import (
    CUT_OFF,
    EMPTY_ANSWER,
    MODEL_ERROR,
    RETRYABLE_STATUSES,
    STEP_LIMIT_CODE,
    AppendSynthetic,
    Blocked,
    CloseAttempt,
    Finish,
    Plan,
    SettleFromRaw,
    StartStep,
    StartTool,
    blocked_reason,
    committable,
    explain,
    plan_recovery,
)
from tiny_agent.agent.runtime import Policy, Runtime, build_runtime
from tiny_agent.agent.settlement import settlement, summary_settlement
from tiny_agent.fold.version import PROFILES
from tiny_agent.journal.facts import CUT_BY_PEER, Fact, RawFact, RawResponse
from tiny_agent.journal.secrets import redact_bytes
from tiny_agent.journal.state import (
    CompactionOperation,
    IdleOperation,
    LatestAttempt,
    RunOperation,
    SessionState,
    ToolCallState,
    refusal_note,
    refused,
)
from tiny_agent.journal.transcript import AssistantMessage
from tiny_agent.providers.http import Received, TransportError, raw_response
from tiny_agent.stores import failpoints
from tiny_agent.stores.journal import JournalWriter, find_raw_in

Status = Literal["completed", "failed", "aborted", "blocked", "idle"]
Signal = Literal["interrupt", "terminate"]


class DriveResult(msgspec.Struct):
    status: Status
    final: str | None = None
    """The final answer of a completed run, or the cut-off or empty answer a run failed for."""
    reason: str | None = None
    """Why a run failed or is blocked, in one line; for a completed run, the writes it was refused (or None)."""
    actions: int = 0
    """How many planned actions this drive carried out (0: there was nothing to do)."""
    stopped_by: Signal | None = None
    """A signal (Ctrl-C, SIGTERM) stopped it, as opposed to an abort asked for up front."""
    cut_off: bool = False
    """The final answer was cut off by the token limit (``final`` holds what there is; the run failed)."""
    step_limit: bool = False
    """The run stopped at the step limit."""
    refused: bool = False
    """The model declined to answer: ``final`` is its refusal (stopReason ``refusal``)."""
    unreachable: bool = False
    """Every attempt of a step failed to reach the provider: the run stays open (``status`` blocked) for ``resume``."""

    @property
    def interrupted(self) -> bool:
        return self.stopped_by is not None


class Driver:
    """Drives one session's journal to idle (or to a block)."""

    def __init__(
        self, writer: JournalWriter, runtime: Runtime, report: Callable[[str], None] | None = None, *, verbose: bool = False
    ) -> None:
        self.writer = writer
        self.runtime = runtime
        if runtime.mcp is not None:  # MCP messages go to this journal; the session's earlier approvals are recalled
            runtime.mcp.attach(lambda facts: self.writer.commit(list(facts), "mcp"), writer.state)
        self.report = report or (lambda line: None)
        self.verbose = verbose
        """Progress lines name steps, entries and responses by id (else by their number in the run)."""
        self.stopped_by: Signal | None = None
        self._reconciling = False
        self._phase: tuple[Literal["model", "tool", "compact"], str | None] = ("model", None)
        self._final: str | None = None
        self._failure: str | None = None
        self._last_outcome: str | None = None
        self._last_raw: tuple[str, RawResponse] | None = None
        """The newest raw fact this process committed, so settling it needs no read of the journal."""
        self._last_received: Received | None = None
        self._retry_reason: str | None = None
        """Why the next attempt is a retry (shown with the wait)."""
        self._cut_off = False
        self._step_limit = False
        self._unreachable = False
        step = _open_step(writer.state)
        self._attempts_before = {step.stepId: step.attempt} if step is not None and step.status == "attempting" else {}
        """Attempts an open step had before this process: each run or resume makes up to ``--retries`` + 1 more."""

    @property
    def state(self) -> SessionState:
        return self.writer.state

    # -- entry points -----------------------------------------------------------

    def run(self, prompt: str) -> DriveResult:
        """Accept a prompt as a new run (durably), then drive it to the end; compacts first, or between steps, when the
        context outgrows the model's window (docs/compaction.md)."""
        if self.runtime.context_full(self.state, prompt):
            self.report(f"compacting first: {self.runtime.fullness(self.state, prompt)}")
            compacted = self.compact()
            if compacted.status not in ("completed", "idle"):
                return compacted
        return self._continue(self._phase_loop(transactions.begin_run(prompt), "run-started"))

    def drive(self) -> DriveResult:
        """Finish whatever is open (a crash's leftovers), and a continuation that was due."""
        return self._continue(self._phase_loop())

    def compact(self) -> DriveResult:
        """Compact the idle session: all but a kept tail (``--keep-tokens``) summarised, in pieces when it does
        not fit one summary request; after a context-length error that taught the window, once more in pieces."""
        sizing, relearnt, done = self.runtime.sizing, False, 0
        final = compaction.tail_cut(self.state, sizing.keep_chars(self.runtime.compacting.keep_tokens))
        if final is None:
            self.report("nothing to compact: the context has no turn to summarise")
            return DriveResult(status="idle")
        while True:
            state, known = self.state, (sizing.window, sizing.chars_per_token)
            try:
                end = compaction.next_piece(state, sizing, self.runtime.summary_fixed_chars(), final)
            except compaction.Unfit as unfit:
                return DriveResult(status="failed", reason=f"cannot compact: {unfit}")
            self.report(compaction.describe_piece(state, end, final))
            cut, piece = compaction.Cut.at(transactions.message_ids(state), end), done + 1 if done or end < final else None
            result = self._phase_loop(transactions.begin_compaction(state, cut, piece), "compaction-started")
            if result.status == "completed" and end == final:
                return result
            done += result.status == "completed"
            failure = self.state.lastStepFailure
            if result.status != "completed":
                if relearnt or self.stopped_by or failure is None or failure.code != compaction.CONTEXT_LENGTH_EXCEEDED:
                    return result
                if not sizing.learn(failure.message) and known == (sizing.window, sizing.chars_per_token):
                    return result
                relearnt = True
                self.report(f"the summary request did not fit {sizing.describe()}: compacting again in pieces that do")

    # -- the loop ------------------------------------------------------------------

    def _continue(self, result: DriveResult) -> DriveResult:
        """While the last run stopped to compact (or hit the provider's context limit once): compact, continue."""
        retried_context_length = False
        while result.status == "failed" and not self.stopped_by:
            due = compaction.continuation_due(self.state)
            if due == compaction.CONTEXT_LENGTH_EXCEEDED and retried_context_length:
                # Compacting again cannot help: what every request carries already overflows with the summary.
                self.report(
                    "still too long after compacting: the summary with the system prompt, project instructions and tool "
                    "declarations is over the window (--no-project-instructions or a shorter --system make them smaller)"
                )
                return result
            if due is None:
                return result
            if not self.runtime.compacting.auto:
                self.report("not compacting: --no-auto-compact (`tiny-agent compact` makes room, then go on)")
                return result
            retried_context_length = retried_context_length or due == compaction.CONTEXT_LENGTH_EXCEEDED
            compacted = self._compact_unless_done(due)
            if compacted.status != "completed":
                return result if compacted.status == "idle" else compacted
            self.report("continuing the task in a new run after the compaction")
            result = self._phase_loop(transactions.begin_run(compaction.CONTINUE_PROMPT), "run-started")
        return result

    def _compact_unless_done(self, due: str) -> DriveResult:
        """The compaction a continuation needs, unless one is done and the context fits (a resume)."""
        state, failure = self.state, self.state.lastStepFailure
        last = state.lastOutcome
        if last is not None and (last.kind, last.outcome) == ("compaction", "completed") and not self.runtime.context_full(state):
            return DriveResult(status="completed")
        if due == compaction.CONTEXT_LENGTH_EXCEEDED and failure is not None:
            self.runtime.sizing.learn(failure.message)
            self.report(f"compacting: the provider says the context does not fit {self.runtime.sizing.describe()}")
        else:
            self.report(f"compacting: {self.runtime.fullness(state)}")
        return self.compact()

    def _phase_loop(self, first: list[Fact] | None = None, label: str = "") -> DriveResult:
        """One operation (with ``first``, the transaction that starts it) driven to idle, with a fresh outcome."""
        self._final = None
        self._failure = None
        self._last_outcome = None
        self._cut_off = self._step_limit = self._unreachable = False
        actions = 0
        with self._signals_handled():
            if first is not None:
                try:
                    self.writer.commit(first, label)
                except KeyboardInterrupt:
                    self._after_interrupt()
            while True:
                try:
                    result = self._turn(actions)
                    if result is not None:
                        return result
                    actions += 1
                except KeyboardInterrupt:
                    self._after_interrupt()

    def _turn(self, actions: int) -> DriveResult | None:
        """One planned action; the result once there is nothing more to do."""
        state = self.state
        if type(state.operation) is not RunOperation and type(state.operation) is not CompactionOperation:
            return self._idle_result(actions)
        if self._unreachable:
            return DriveResult(status="blocked", reason=self._failure, actions=actions, unreachable=True)
        current = self.runtime.current(state)
        plan = committable(plan_recovery(state, msgspec.structs.replace(current, maxAttempts=self._max_attempts())), state)
        if type(plan) is Blocked:
            why = blocked_reason(plan, state, self.runtime.configuration_for(state))
            return DriveResult(status="blocked", reason=why, actions=actions)
        own = type(plan) is SettleFromRaw and self._last_raw is not None and self._last_raw[0] == plan.rawId
        if not own:  # settling the response this process just received is routine, not a recovery worth a line
            self.report(explain(plan, state, verbose=self.verbose))
        self._act(plan)
        return None

    def _max_attempts(self) -> int:
        """The attempts the open step may have by the end of this drive (within the journal's limit)."""
        step = _open_step(self.state)
        before = 0 if step is None else self._attempts_before.get(step.stepId, 0)
        return min(self.runtime.policy.max_attempts + before, PROFILES[self.state.version].max_attempt)

    # -- the actions -----------------------------------------------------------

    def _act(self, plan: Plan) -> None:
        match plan:
            case StartStep():
                self._start_step(plan)
            case SettleFromRaw():
                self._settle_from_raw(plan)
            case StartTool():
                self._start_tool(plan)
            case AppendSynthetic():
                self._append_synthetic(plan)
            case CloseAttempt():
                error, why = plan.error, " (SIGTERM)" if self.stopped_by == "terminate" else ""
                self.writer.commit(transactions.fail_step(self.state, error.code, error.message + why, None), "step-failed")
            case Finish():
                self._finish(plan)
            case Blocked():
                raise AssertionError("a blocked plan is never acted on")

    def _start_step(self, plan: StartStep) -> None:
        provider = self.runtime.provider()  # a configuration problem stops here, before anything is written
        if plan.attempt > 1:
            self._wait_before_retry(plan.attempt)
        facts = transactions.step_attempt(self.state, self.runtime.configuration_for(self.state), plan)
        self.writer.commit(facts, "step-attempt")
        self._phase = ("model", None)
        request = self.runtime.request(self.state)
        request = msgspec.structs.replace(request, body=redact_bytes(request.body)[0])  # what goes back to a model
        display = self.runtime.display
        received = Received(on_bytes=display.model_bytes if display is not None else None)
        self._last_received = received
        if display is not None:
            display.model_started(self.runtime.api, request.stream)
        try:
            provider.send(request, received)
        except TransportError as error:
            self._transport_failed(error, plan.attempt)
            return
        except KeyboardInterrupt:
            self._keep_partial(received)
            raise
        finally:
            if display is not None:
                display.model_finished()
        self._commit_raw(received)
        self._note_retryable(received, plan.attempt)

    def _transport_failed(self, error: TransportError, attempt: int) -> None:
        """No response at all: retry while attempts remain (the planner says so); when none remain, the attempt stays
        open for ``resume`` if no connection could be made (nothing was sent), else the step fails."""
        message = error.message
        if error.retryable and attempt < self._max_attempts():
            self._retry_reason = message
        elif error.kind == "connect":
            self._unreachable = True
            self._failure = f"the provider could not be reached in {attempt} attempts ({message})"
        else:
            self._failure = message
            self.writer.commit(transactions.fail_step(self.state, f"provider_{error.kind}", message, None), "step-failed")

    def _note_retryable(self, received: Received, attempt: int) -> None:
        status, cut = received.status, (received.incomplete or "").startswith(CUT_BY_PEER)
        if (cut or status in RETRYABLE_STATUSES) and attempt < self._max_attempts():
            self._retry_reason = "the response was cut off" if cut else f"HTTP {status}"

    def _wait_before_retry(self, attempt: int) -> None:
        policy = self.runtime.policy
        seconds = None if self._last_received is None else self._last_received.retry_wait(policy.retry_after_cap)
        if seconds is None:
            seconds = min(policy.retry_wait * 2 ** (attempt - 2), policy.retry_wait_cap) * random.uniform(0.5, 1.0)
        why = self._retry_reason or "the previous attempt got no usable answer"
        self.report(f"{why}; waiting {seconds:.1f} s before attempt {attempt} of {self._max_attempts()}")
        self._retry_reason = None
        time.sleep(seconds)

    def _keep_partial(self, received: Received) -> None:
        """Ctrl-C during a request: what arrived is still journaled (the abort is already on record)."""
        if not received.has_response:
            return
        received.incomplete = received.incomplete or INCOMPLETE[self.stopped_by or "interrupt"]
        self._commit_raw(received)

    def _commit_raw(self, received: Received) -> None:
        """Journal the response as received (the writer replaces secrets by a marker, and counts them)."""
        if received.status is None:
            raise ValueError("no response arrived")
        raw = raw_response(
            received.status, received.content_type, received.body(), received.incomplete, received.content_encoding
        )
        fact = self.writer.commit(transactions.raw_response(self.state, raw), "raw")[0]
        if not isinstance(fact, RawFact):
            raise AssertionError("a raw transaction starts with its raw fact")
        self._last_raw = (fact.id, fact.raw)

    def _settle_from_raw(self, plan: SettleFromRaw) -> None:
        """Turn the attempt's stored response into its settling transaction (the same live and on resume)."""
        raw = self._stored_raw(plan.rawId)
        if isinstance(self.state.operation, CompactionOperation):
            self._settle_summary(raw)
            return
        decided = settlement(raw, self._adapter_identity())
        if decided.failure is not None:
            self._failure = decided.failure[1] + self._exhausted(raw)
        facts, label = transactions.settle(self.state, decided)
        self.writer.commit(facts, label)
        self.runtime.sizing.settled(decided.usage if label == "settle" else None, decided.failure)

    def _settle_summary(self, raw: RawResponse) -> None:
        """A compaction's summary becomes the compaction entry, with the retained tail; anything else fails its step."""
        decided = summary_settlement(raw, self._adapter_identity())
        if decided.summary is None:
            code, reason = decided.failure or ("bad_summary", "no summary")
            self._failure = f"the compaction failed: {reason}"
            self.writer.commit(transactions.fail_step(self.state, code, reason, decided.usage), "step-failed")
            self.runtime.sizing.settled(None, decided.failure)
            return
        self.writer.commit(transactions.settle_compaction(self.state, decided.summary, decided.usage), "compaction")

    def _exhausted(self, raw: RawResponse) -> str:
        """Say so when a "try again later" answer fails the step because no attempt is left."""
        step, cut = _open_step(self.state), raw.incomplete is not UNSET and raw.incomplete.startswith(CUT_BY_PEER)
        if not (cut or raw.status in RETRYABLE_STATUSES) or step is None:
            return ""
        return f" (attempts exhausted: {step.attempt} of {self._max_attempts()})"

    def _adapter_identity(self) -> str:
        """The open attempt's: a stored response is re-derived the way it was first derived."""
        return transactions.open_step(self.state).configurationSnapshot.adapterIdentity

    def _stored_raw(self, raw_id: str) -> RawResponse:
        if self._last_raw is not None and self._last_raw[0] == raw_id:
            return self._last_raw[1]
        stored = find_raw_in(self.writer.chunks(), raw_id)
        if stored is None:
            raise RuntimeError(f"raw fact {raw_id} is not in {self.writer.path.name}")
        return stored.raw

    def _start_tool(self, plan: StartTool) -> None:
        started = self._started(_required(plan.toolStartedId)) if plan.mode == "replay" else self._announce_tool(plan)
        if started is None:
            return
        self._phase = ("tool", started.toolCallId)
        failpoints.maybe_crash(f"before-tool:{started.toolName}")
        outcome = self.runtime.toolbox.execute(started.toolName, started.arguments, started.toolStartedId)
        failpoints.maybe_crash(f"after-tool:{started.toolName}")
        if not outcome.ok:
            self.report(f"  {started.toolName} (call {started.toolIndex}): {outcome.content.partition(chr(10))[0]}")
        self.writer.commit(transactions.tool_result(started, outcome.content, outcome.ok), "tool-result")

    def _announce_tool(self, plan: StartTool) -> ToolCallState | None:
        """Commit ``toolStarted`` for a call about to run; None (and a synthetic answer) when its arguments do not fit."""
        problem = self.runtime.toolbox.validate(plan.toolName, plan.arguments)
        if problem is not None:
            self.report(f"  not running {plan.toolName}: {problem}")
            answer = transactions.pre_execution_result(
                self.state, assistant_entry_id=plan.assistantEntryId, tool_index=plan.toolIndex, reason="invalidArguments"
            )
            self.writer.commit([answer], "synthetic")
            return None
        declaration = self.runtime.configuration.declaration(plan.toolName)
        if declaration is None:
            raise AssertionError("the planner only starts declared tools")
        facts = transactions.tool_started(self.state, plan, declaration, self.runtime.configuration.environment_identity)
        self.writer.commit(facts, "tool-started")
        return self._started(facts[0].id)

    def _started(self, tool_started_id: str) -> ToolCallState:
        operation = self.state.operation
        calls = operation.toolCalls if type(operation) is RunOperation else []
        found = next((started for started in calls if started.toolStartedId == tool_started_id), None)
        if found is not None:
            return found
        raise RuntimeError(f"toolStarted {tool_started_id} is not in the open run")

    def _append_synthetic(self, plan: AppendSynthetic) -> None:
        facts: list[Fact] = [
            transactions.interrupted_result(self._started(_required(result.toolStartedId)))
            if result.reason == "interrupted"
            else transactions.pre_execution_result(
                self.state, assistant_entry_id=result.assistantEntryId, tool_index=result.toolIndex, reason=result.reason
            )
            for result in plan.results
        ]
        self.writer.commit(facts, "synthetic")

    def _finish(self, plan: Finish) -> None:
        state, error = self.state, None if plan.error is UNSET else plan.error
        if plan.completion == "normal" or error in (CUT_OFF, EMPTY_ANSWER):
            answer = _settled_message(state)
            self._final = answer.content if answer is not None else None
            self._cut_off = error == CUT_OFF
        self._step_limit = error is not None and error.code == STEP_LIMIT_CODE
        if error is not None and error != MODEL_ERROR:
            self._failure = error.message
        elif plan.outcome == "failed" and self._failure is None and state.lastStepFailure is not None:
            self._failure = state.lastStepFailure.message
        self.writer.commit(transactions.finish(state, plan), "finish")
        self._last_outcome = plan.outcome

    # -- interruption ------------------------------------------------------------

    @contextmanager
    def _signals_handled(self) -> Iterator[None]:
        previous = {number: signal.signal(number, self._on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._reconciling:
            self.report("  (already stopping: reconciling the journal first)")
            return
        self.stopped_by = "terminate" if signum == signal.SIGTERM else "interrupt"
        display = self.runtime.display
        if display is not None:
            display.interrupted()  # the notice starts a line of its own, not after the streamed text (and the ^C)
        self.abort()
        raise KeyboardInterrupt

    def abort(self) -> None:
        """Durably request an abort of the open operation (``resume --abort``, or a signal) before cancelling."""
        operation = self.state.operation
        if isinstance(operation, IdleOperation) or operation.abortRequested:
            return
        phase, call_id = ("compact", None) if type(operation) is CompactionOperation else self._phase
        self.writer.commit(transactions.request_abort(self.state, phase, call_id), "abort")
        self.report("abort requested: recorded before cancelling what was in flight")

    def _after_interrupt(self) -> None:
        if self.stopped_by is None:
            self.stopped_by = "interrupt"
        self._reconciling = True
        self.abort()

    # -- bookkeeping -------------------------------------------------------------

    def _idle_result(self, actions: int) -> DriveResult:
        outcome = self._last_outcome
        if outcome == "completed":
            state = self.state
            declined = refused(state.lastOutcome, state)
            return DriveResult("completed", self._final, refusal_note(state), actions, refused=declined)
        if outcome == "aborted" or self.stopped_by is not None:
            why = {"interrupt": "stopped by the user (Ctrl-C)", "terminate": "stopped by SIGTERM", None: "aborted as asked"}
            return DriveResult(status="aborted", reason=why[self.stopped_by], actions=actions, stopped_by=self.stopped_by)
        if outcome == "failed" or self._failure:
            reason = self._failure or "the model step failed"
            return DriveResult("failed", self._final, reason, actions, cut_off=self._cut_off, step_limit=self._step_limit)
        return DriveResult(status="idle", actions=actions)


INCOMPLETE: Final = {"interrupt": "interrupted by the user", "terminate": "terminated (SIGTERM)"}
"""What a raw fact's ``incomplete`` says when a signal stopped the response."""


def _settled_message(state: SessionState) -> AssistantMessage | None:
    """The assistant message that settled the open run's newest step."""
    step = _open_step(state)
    entry = None if step is None or step.settledEntryId is UNSET else state.entries.get(step.settledEntryId)
    return entry.message if entry is not None and type(entry.message) is AssistantMessage else None


def _open_step(state: SessionState) -> LatestAttempt | None:
    step = getattr(state.operation, "step", UNSET)
    return None if step is UNSET else step


def _required(value: str | msgspec.UnsetType) -> str:
    if value is UNSET:
        raise AssertionError("the planner always sets this member for this action")
    return value


__all__ = ["DriveResult", "Driver", "Policy", "Runtime", "build_runtime"]
