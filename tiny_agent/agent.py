"""The agent loop: drive a session until it is idle, by asking the planner and doing what it says.

A live run and a recovery are the same loop.  ``run`` commits
``[user entry, runStarted]`` and drives; ``resume`` just drives.  Each turn
asks :func:`tiny_agent.recovery.plan_recovery` for the next action on the
current state, materializes it with the builders of
:mod:`tiny_agent.transactions`, and commits.  So a session interrupted anywhere is
continued by exactly the code that would have continued it live, and a
response already on record is settled from the journal, never requested
twice.

Ctrl-C first commits ``abortRequested`` (from the signal handler, which
cannot interrupt a commit: commits hold SIGINT off), then cancels whatever was
in flight; the loop then reconciles the session as the planner directs and
finishes it ``aborted``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET

from tiny_agent import transactions
from tiny_agent.configuration import Configuration, environment_identity
from tiny_agent.facts import Fact, RawResponse
from tiny_agent.journal import JournalWriter, find_raw
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
from tiny_agent.state import CompactionOperation, RunOperation, SessionState, ToolCallState
from tiny_agent.toolbox import ToolBox
from tiny_agent.transcript import ChatMessage, SystemMessage

if TYPE_CHECKING:
    from tiny_agent.provider import ChatClient, ProviderConfig

Status = Literal["completed", "failed", "aborted", "blocked", "idle"]


class DriveResult(msgspec.Struct):
    status: Status
    final: str | None = None
    """The final answer of a completed run."""
    reason: str | None = None
    """Why a run failed or is blocked, in one line."""
    actions: int = 0
    """How many planned actions this drive carried out (0: there was nothing to do)."""
    interrupted: bool = False
    """Ctrl-C stopped it (as opposed to an abort asked for up front)."""


class Runtime:
    """What driving a session needs besides its journal: configuration, tools, and a provider on demand."""

    def __init__(
        self,
        configuration: Configuration,
        toolbox: ToolBox,
        connect: Callable[[], ChatClient] | None,
    ) -> None:
        self.configuration = configuration
        self.toolbox = toolbox
        self._connect = connect
        self._client: ChatClient | None = None

    def current(self) -> CurrentConfiguration:
        return CurrentConfiguration(
            configurationDigest=self.configuration.digest,
            environmentIdentity=self.configuration.environment_identity,
            tools=list(self.configuration.tools),
        )

    def client(self) -> ChatClient:
        """The provider client, created on first use (a recovery may never need one)."""
        if self._client is None:
            if self._connect is None:
                raise RuntimeError("this drive has no provider configured")
            self._client = self._connect()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class Driver:
    """Drives one session's journal to idle (or to a block)."""

    def __init__(self, writer: JournalWriter, runtime: Runtime, report: Callable[[str], None] | None = None) -> None:
        self.writer = writer
        self.runtime = runtime
        self.report = report or (lambda line: None)
        self.interrupted = False
        self._reconciling = False
        self._phase: tuple[str, str | None] = ("model", None)
        self._final: str | None = None
        self._failure: str | None = None
        self._last_outcome: str | None = None

    @property
    def state(self) -> SessionState:
        return self.writer.state

    # -- entry points -----------------------------------------------------------

    def run(self, prompt: str) -> DriveResult:
        """Accept a prompt as a new run (durably), then drive it to the end."""
        with self._interruptible():
            self._commit(transactions.begin_run(prompt), "run-started")
        return self.drive()

    def drive(self) -> DriveResult:
        actions = 0
        with self._interruptible():
            while True:
                state = self.state
                if type(state.operation) not in (RunOperation, CompactionOperation):
                    return self._idle_result(actions)
                plan = plan_recovery(state, self.runtime.current())
                if type(plan) is Blocked:
                    return DriveResult(status="blocked", reason=describe_block(plan.reason), actions=actions)
                self.report(explain(plan, state))
                try:
                    self._act(plan)
                except KeyboardInterrupt:
                    self._after_interrupt()
                actions += 1

    def abort(self) -> None:
        """Durably request an abort of the open operation (for ``resume --abort``)."""
        self._request_abort()

    # -- the actions -----------------------------------------------------------

    def _act(self, plan: Plan) -> None:
        kind = type(plan)
        if kind is StartStep:
            self._start_step(plan)  # type: ignore[arg-type]
        elif kind is SettleFromRaw:
            self._settle_from_journal(plan)  # type: ignore[arg-type]
        elif kind is StartTool:
            self._start_tool(plan)  # type: ignore[arg-type]
        elif kind is AppendSynthetic:
            self._append_synthetic(plan)  # type: ignore[arg-type]
        elif kind is CloseAttempt:
            error = plan.error  # type: ignore[union-attr]
            self._commit(transactions.fail_step(self.state, error.code, error.message, None), "step-failed")
        elif kind is Finish:
            self._finish(plan)  # type: ignore[arg-type]
        else:
            raise AssertionError(f"unhandled plan {plan!r}")

    def _start_step(self, plan: StartStep) -> None:
        client = self.runtime.client()  # a configuration problem stops here, before anything is written
        state = self.state
        facts = transactions.step_attempt(
            state,
            self.runtime.configuration,
            attempt=plan.attempt,
            context_through=plan.contextThroughEntryId,
            step_id=None if plan.stepId is UNSET else plan.stepId,
        )
        self._commit(facts, "step-attempt")
        self._phase = ("model", None)
        from tiny_agent.provider import ProviderError

        try:
            raw = client.complete(self._request_messages(), self._wire_tools())
        except ProviderError as error:
            self._failure = error.message
            self._commit(transactions.fail_step(self.state, f"provider_{error.kind}", error.message, None), "step-failed")
            return
        self._commit(transactions.raw_response(self.state, raw), "raw")
        self._settle(raw)

    def _settle_from_journal(self, plan: SettleFromRaw) -> None:
        stored = find_raw(self.writer.path, plan.rawId)
        if stored is None:
            raise RuntimeError(f"raw fact {plan.rawId} is not in {self.writer.path.name}")
        self._settle(stored.raw)

    def _settle(self, raw: RawResponse) -> None:
        """Turn the attempt's response into its settling transaction (the same live and on resume)."""
        facts, label = transactions.settle(self.state, raw)
        if label == "step-failed":
            self._failure = facts[0].record.error.message  # type: ignore[union-attr]
        self._commit(facts, label)

    def _start_tool(self, plan: StartTool) -> None:
        if plan.mode == "replay":
            started = self._started(plan.toolStartedId)  # type: ignore[arg-type]
        else:
            problem = self.runtime.toolbox.validate(plan.toolName, plan.arguments)
            if problem is not None:
                self.report(f"  not running {plan.toolName}: {problem}")
                answer = transactions.pre_execution_result(
                    self.state, assistant_entry_id=plan.assistantEntryId, tool_index=plan.toolIndex, reason="invalidArguments"
                )
                self._commit([answer], "synthetic")
                return
            declaration = self.runtime.configuration.declaration(plan.toolName)
            assert declaration is not None, "the planner only starts declared tools"
            facts = transactions.tool_started(
                self.state,
                assistant_entry_id=plan.assistantEntryId,
                tool_index=plan.toolIndex,
                arguments=plan.arguments,
                declaration=declaration,
                environment=self.runtime.configuration.environment_identity,
            )
            self._commit(facts, "tool-started")
            started = self._started(facts[0].id)
        self._phase = ("tool", started.toolCallId)
        from tiny_agent import failpoints

        failpoints.maybe_crash(f"before-tool:{started.toolName}")
        outcome = self.runtime.toolbox.execute(started.toolName, started.arguments)
        failpoints.maybe_crash(f"after-tool:{started.toolName}")
        self._commit(transactions.tool_result(started, outcome.content, outcome.ok), "tool-result")

    def _started(self, tool_started_id: str) -> ToolCallState:
        operation = self.state.operation
        for started in operation.toolCalls:  # type: ignore[union-attr]
            if started.toolStartedId == tool_started_id:
                return started
        raise RuntimeError(f"toolStarted {tool_started_id} is not in the open run")

    def _append_synthetic(self, plan: AppendSynthetic) -> None:
        state = self.state
        facts: list[Fact] = []
        for result in plan.results:
            if result.reason == "interrupted":
                facts.append(transactions.interrupted_result(self._started(result.toolStartedId)))  # type: ignore[arg-type]
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
            final = state.entries[plan.finalEntryId]  # type: ignore[index]
            if final.stopReason == "length":
                # Not committable as completed (session-v2 §18 P5): the answer was cut off.
                self._failure = "the model's answer was cut off by its token limit"
                self._commit(transactions.finish(state, "failed", error=("length_without_calls", self._failure)), "finish")
                self._last_outcome = "failed"
                return
            self._final = final.message.content  # type: ignore[union-attr]
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

    def _request_messages(self) -> list[ChatMessage]:
        system = self.runtime.configuration.system_prompt
        context: list[ChatMessage] = list(self.state.activeContext)
        return [SystemMessage(content=system), *context] if system else context

    def _wire_tools(self) -> list[dict[str, Any]]:
        return [spec.to_wire() for spec in self.runtime.toolbox.specs()]

    # -- interruption ------------------------------------------------------------

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self._reconciling:
            self.report("  (already stopping: reconciling the journal first)")
            return
        self.interrupted = True
        self._request_abort()
        raise KeyboardInterrupt

    def _request_abort(self) -> None:
        operation = self.state.operation
        if type(operation) not in (RunOperation, CompactionOperation) or operation.abortRequested:  # type: ignore[union-attr]
            return
        phase, call_id = self._phase
        if type(operation) is CompactionOperation:
            phase, call_id = "compact", None
        self._commit(transactions.request_abort(self.state, phase, call_id), "abort")
        self.report("abort requested: recorded before cancelling what was in flight")

    def _after_interrupt(self) -> None:
        self.interrupted = True
        self._reconciling = True
        if type(self.state.operation) not in (RunOperation, CompactionOperation):
            return
        if not self.state.operation.abortRequested:  # type: ignore[union-attr]
            self._request_abort()

    # -- bookkeeping -------------------------------------------------------------

    def _commit(self, facts: list[Fact], label: str) -> None:
        self.writer.commit(facts, label)

    def _idle_result(self, actions: int) -> DriveResult:
        outcome = self._last_outcome
        if outcome == "completed":
            return DriveResult(status="completed", final=self._final, actions=actions)
        if outcome == "aborted" or self.interrupted:
            reason = "stopped by the user (Ctrl-C)" if self.interrupted else "aborted as asked"
            return DriveResult(status="aborted", reason=reason, actions=actions, interrupted=self.interrupted)
        if outcome == "failed" or self._failure:
            return DriveResult(status="failed", reason=self._failure or "the model step failed", actions=actions)
        return DriveResult(status="idle", actions=actions)


def build_runtime(
    provider: ProviderConfig, *, system_prompt: str, cwd: Path, allow_bash: bool = False
) -> Runtime:
    """The runtime for a session driven from ``cwd`` against ``provider``."""
    toolbox = ToolBox(cwd, allow_bash=allow_bash)
    configuration = Configuration(
        model=provider.model,
        system_prompt=system_prompt,
        tools=[spec.declaration() for spec in toolbox.specs()],
        routing_identity=provider.routing_identity,
        environment_identity=environment_identity(cwd),
    )

    def connect() -> ChatClient:
        from tiny_agent.provider import ChatClient

        return ChatClient(provider)

    return Runtime(configuration, toolbox, connect)
