"""The agent loop: drive a session until it is idle, by asking the planner and doing what it says.

A live run and a recovery are the same loop.  ``run`` commits
``[user entry, runStarted]`` and drives; ``resume`` just drives.  Each turn
asks :func:`tiny_agent.recovery.plan_recovery` for the next action on the
current state, materializes it with the builders of
:mod:`tiny_agent.transactions`, and commits.  So a session interrupted anywhere
is continued by exactly the code that would have continued it live, and a
response already on record is settled from the journal, never requested
twice.  Even live, a response is settled through the planner's
``settleFromRaw``: it is journaled raw first, then settled from that record.

Ctrl-C (or SIGTERM) first commits ``abortRequested`` (from the signal handler,
which cannot interrupt a commit: commits hold the signals off), then cancels
whatever was in flight; the loop then reconciles the session as the planner
directs and finishes it ``aborted``.  The whole loop body is covered, so an
interrupt during planning is reconciled too.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from tiny_agent import failpoints, transactions
from tiny_agent.configuration import Configuration, environment_identity
from tiny_agent.facts import Fact, RawResponse
from tiny_agent.journal import JournalWriter, find_raw
from tiny_agent.provider import Provider, ProviderConfig, Received, TransportError, WireRequest
from tiny_agent.recovery import (
    AppendSynthetic,
    Blocked,
    CloseAttempt,
    CurrentConfiguration,
    Finish,
    Plan,
    SettleFromRaw,
    StartStep,
    StartTool,
    describe_block,
    explain,
    plan_recovery,
)
from tiny_agent.settlement import settlement
from tiny_agent.state import CompactionOperation, RunOperation, SessionState, ToolCallState
from tiny_agent.toolbox import ToolBox
from tiny_agent.transcript import ChatMessage, SystemMessage

Status = Literal["completed", "failed", "aborted", "blocked", "idle"]
Signal = Literal["interrupt", "terminate"]


class DriveResult(msgspec.Struct):
    status: Status
    final: str | None = None
    """The final answer of a completed run."""
    reason: str | None = None
    """Why a run failed or is blocked, in one line."""
    actions: int = 0
    """How many planned actions this drive carried out (0: there was nothing to do)."""
    stopped_by: Signal | None = None
    """A signal (Ctrl-C, SIGTERM) stopped it, as opposed to an abort asked for up front."""

    @property
    def interrupted(self) -> bool:
        return self.stopped_by is not None


class Runtime:
    """What driving a session needs besides its journal: configuration, tools, and a provider on demand."""

    def __init__(
        self,
        configuration: Configuration,
        toolbox: ToolBox,
        connect: Callable[[], Provider] | None,
    ) -> None:
        self.configuration = configuration
        self.toolbox = toolbox
        self._connect = connect
        self._provider: Provider | None = None

    def current(self) -> CurrentConfiguration:
        return CurrentConfiguration(
            configurationDigest=self.configuration.digest,
            environmentIdentity=self.configuration.environment_identity,
            tools=list(self.configuration.tools),
        )

    def provider(self) -> Provider:
        """The provider, connected on first use (a recovery may never need one)."""
        if self._provider is None:
            if self._connect is None:
                raise RuntimeError("this drive has no provider configured")
            self._provider = self._connect()
        return self._provider

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()
            self._provider = None


class Driver:
    """Drives one session's journal to idle (or to a block)."""

    def __init__(self, writer: JournalWriter, runtime: Runtime, report: Callable[[str], None] | None = None) -> None:
        self.writer = writer
        self.runtime = runtime
        self.report = report or (lambda line: None)
        self.stopped_by: Signal | None = None
        self._reconciling = False
        self._phase: tuple[Literal["model", "tool", "compact"], str | None] = ("model", None)
        self._final: str | None = None
        self._failure: str | None = None
        self._last_outcome: str | None = None
        self._last_raw: tuple[str, RawResponse] | None = None
        """The newest raw fact this process committed, so settling it needs no read of the journal."""

    @property
    def state(self) -> SessionState:
        return self.writer.state

    # -- entry points -----------------------------------------------------------

    def run(self, prompt: str) -> DriveResult:
        """Accept a prompt as a new run (durably), then drive it to the end."""
        return self._loop(lambda: self._commit(transactions.begin_run(prompt), "run-started"))

    def drive(self) -> DriveResult:
        return self._loop(None)

    def abort(self) -> None:
        """Durably request an abort of the open operation (for ``resume --abort``)."""
        self._request_abort()

    # -- the loop ------------------------------------------------------------------

    def _loop(self, first: Callable[[], None] | None) -> DriveResult:
        actions = 0
        with self._signals_handled():
            if first is not None:
                try:
                    first()
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
        plan = plan_recovery(state, self.runtime.current())
        if type(plan) is Blocked:
            return DriveResult(status="blocked", reason=describe_block(plan.reason), actions=actions)
        if not self._settles_own_response(plan):
            self.report(explain(plan, state))
        self._act(plan)
        return None

    def _settles_own_response(self, plan: Plan) -> bool:
        """Settling the response this process just received is routine, not a recovery worth a line."""
        return type(plan) is SettleFromRaw and self._last_raw is not None and self._last_raw[0] == plan.rawId

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
                error = plan.error
                self._commit(transactions.fail_step(self.state, error.code, error.message, None), "step-failed")
            case Finish():
                self._finish(plan)
            case Blocked():
                raise AssertionError("a blocked plan is never acted on")

    def _start_step(self, plan: StartStep) -> None:
        provider = self.runtime.provider()  # a configuration problem stops here, before anything is written
        facts = transactions.step_attempt(
            self.state,
            self.runtime.configuration,
            attempt=plan.attempt,
            context_through=plan.contextThroughEntryId,
            step_id=None if plan.stepId is UNSET else plan.stepId,
        )
        self._commit(facts, "step-attempt")
        self._phase = ("model", None)
        received = Received()
        try:
            provider.send(self._request(), received)
        except TransportError as error:
            self._failure = error.message
            code = f"provider_{error.kind}"
            self._commit(transactions.fail_step(self.state, code, error.message, None), "step-failed")
            return
        except KeyboardInterrupt:
            self._keep_partial(received)
            raise
        self._commit_raw(received.to_raw())

    def _keep_partial(self, received: Received) -> None:
        """Ctrl-C during a request: what arrived is still journaled (the abort is already on record)."""
        if not received.has_response:
            return
        received.incomplete = received.incomplete or "interrupted by the user"
        self._commit_raw(received.to_raw())

    def _commit_raw(self, raw: RawResponse) -> None:
        facts = transactions.raw_response(self.state, raw)
        self._commit(facts, "raw")
        self._last_raw = (facts[0].id, raw)

    def _settle_from_raw(self, plan: SettleFromRaw) -> None:
        """Turn the attempt's stored response into its settling transaction (the same live and on resume)."""
        decided = settlement(self._stored_raw(plan.rawId))
        if decided.failure is not None:
            self._failure = decided.failure[1]
        facts, label = transactions.settle(self.state, decided)
        self._commit(facts, label)

    def _stored_raw(self, raw_id: str) -> RawResponse:
        if self._last_raw is not None and self._last_raw[0] == raw_id:
            return self._last_raw[1]
        stored = find_raw(self.writer.path, raw_id)
        if stored is None:
            raise RuntimeError(f"raw fact {raw_id} is not in {self.writer.path.name}")
        return stored.raw

    def _start_tool(self, plan: StartTool) -> None:
        if plan.mode == "replay":
            started = self._started(_required(plan.toolStartedId))
        else:
            started_or_none = self._announce_tool(plan)
            if started_or_none is None:
                return
            started = started_or_none
        self._phase = ("tool", started.toolCallId)
        failpoints.maybe_crash(f"before-tool:{started.toolName}")
        outcome = self.runtime.toolbox.execute(started.toolName, started.arguments)
        failpoints.maybe_crash(f"after-tool:{started.toolName}")
        self._commit(transactions.tool_result(started, outcome.content, outcome.ok), "tool-result")

    def _announce_tool(self, plan: StartTool) -> ToolCallState | None:
        """Commit ``toolStarted`` for a call about to run; None (and a synthetic answer) when its arguments do not fit."""
        problem = self.runtime.toolbox.validate(plan.toolName, plan.arguments)
        if problem is not None:
            self.report(f"  not running {plan.toolName}: {problem}")
            answer = transactions.pre_execution_result(
                self.state, assistant_entry_id=plan.assistantEntryId, tool_index=plan.toolIndex, reason="invalidArguments"
            )
            self._commit([answer], "synthetic")
            return None
        declaration = self.runtime.configuration.declaration(plan.toolName)
        if declaration is None:
            raise AssertionError("the planner only starts declared tools")
        facts = transactions.tool_started(
            self.state,
            assistant_entry_id=plan.assistantEntryId,
            tool_index=plan.toolIndex,
            arguments=plan.arguments,
            declaration=declaration,
            environment=self.runtime.configuration.environment_identity,
        )
        self._commit(facts, "tool-started")
        return self._started(facts[0].id)

    def _started(self, tool_started_id: str) -> ToolCallState:
        operation = self.state.operation
        if type(operation) is RunOperation:
            for started in operation.toolCalls:
                if started.toolStartedId == tool_started_id:
                    return started
        raise RuntimeError(f"toolStarted {tool_started_id} is not in the open run")

    def _append_synthetic(self, plan: AppendSynthetic) -> None:
        state = self.state
        facts: list[Fact] = []
        for result in plan.results:
            if result.reason == "interrupted":
                facts.append(transactions.interrupted_result(self._started(_required(result.toolStartedId))))
            else:
                facts.append(
                    transactions.pre_execution_result(
                        state, assistant_entry_id=result.assistantEntryId, tool_index=result.toolIndex, reason=result.reason
                    )
                )
        self._commit(facts, "synthetic")

    def _finish(self, plan: Finish) -> None:
        state = self.state
        if plan.outcome == "completed" and plan.completion == "normal":
            final = state.entries[_required(plan.finalEntryId)]
            if final.stopReason == "length":
                # Not committable as completed (session-v2 §18 P5): the answer was cut off.
                self._failure = "the model's answer was cut off by its token limit"
                self._commit(transactions.finish(state, "failed", error=("length_without_calls", self._failure)), "finish")
                self._last_outcome = "failed"
                return
            message = final.message
            self._final = message.content if message is not None and isinstance(message.content, str) else None
        facts = transactions.finish(
            state,
            plan.outcome,
            completion=None if plan.completion is UNSET else plan.completion,
            final_entry_id=None if plan.finalEntryId is UNSET else plan.finalEntryId,
            error=None if plan.error is UNSET else (plan.error.code, plan.error.message),
        )
        self._commit(facts, "finish")
        self._last_outcome = plan.outcome

    # -- provider request ------------------------------------------------------

    def _request(self) -> WireRequest:
        configuration = self.runtime.configuration
        system = configuration.system_prompt
        context: list[ChatMessage] = list(self.state.activeContext)
        messages = [SystemMessage(content=system), *context] if system else context
        payload: dict[str, Any] = {"model": configuration.model, "messages": messages}
        tools = [spec.to_wire() for spec in self.runtime.toolbox.specs()]
        if tools:
            payload["tools"] = tools
        return WireRequest(path="/chat/completions", body=msgspec.json.encode(payload))

    # -- interruption ------------------------------------------------------------

    @contextmanager
    def _signals_handled(self) -> Iterator[None]:
        previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
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
        self._request_abort()
        raise KeyboardInterrupt

    def _request_abort(self) -> None:
        operation = self.state.operation
        if type(operation) is not RunOperation and type(operation) is not CompactionOperation:
            return
        if operation.abortRequested:
            return
        phase, call_id = self._phase
        if type(operation) is CompactionOperation:
            phase, call_id = "compact", None
        self._commit(transactions.request_abort(self.state, phase, call_id), "abort")
        self.report("abort requested: recorded before cancelling what was in flight")

    def _after_interrupt(self) -> None:
        if self.stopped_by is None:
            self.stopped_by = "interrupt"
        self._reconciling = True
        self._request_abort()

    # -- bookkeeping -------------------------------------------------------------

    def _commit(self, facts: list[Fact], label: str) -> None:
        self.writer.commit(facts, label)

    def _idle_result(self, actions: int) -> DriveResult:
        outcome = self._last_outcome
        if outcome == "completed":
            return DriveResult(status="completed", final=self._final, actions=actions)
        if outcome == "aborted" or self.stopped_by is not None:
            reason = {"interrupt": "stopped by the user (Ctrl-C)", "terminate": "stopped by SIGTERM", None: "aborted as asked"}
            return DriveResult(status="aborted", reason=reason[self.stopped_by], actions=actions, stopped_by=self.stopped_by)
        if outcome == "failed" or self._failure:
            return DriveResult(status="failed", reason=self._failure or "the model step failed", actions=actions)
        return DriveResult(status="idle", actions=actions)


def _required(value: str | msgspec.UnsetType) -> str:
    if value is UNSET:
        raise AssertionError("the planner always sets this member for this action")
    return value


def build_runtime(provider: ProviderConfig, *, system_prompt: str, cwd: Path, allow_bash: bool = False) -> Runtime:
    """The runtime for a session driven from ``cwd`` against ``provider``."""
    toolbox = ToolBox(cwd, allow_bash=allow_bash)
    configuration = Configuration(
        model=provider.model,
        system_prompt=system_prompt,
        tools=[spec.declaration() for spec in toolbox.specs()],
        routing_identity=provider.routing_identity,
        environment_identity=environment_identity(cwd),
    )
    return Runtime(configuration, toolbox, provider.connect)


__all__ = ["DriveResult", "Driver", "Runtime", "build_runtime"]
