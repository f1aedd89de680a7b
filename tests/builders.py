"""Build valid journals for tests through the real writer (v3) or as plain lines (v2)."""

from __future__ import annotations

import itertools
from pathlib import Path

from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.facts import (
    AssistantEntry,
    EntryFact,
    ErrorInfo,
    HeaderLine,
    OperationFinished,
    RawFact,
    RawResponse,
    RecordFact,
    RunStarted,
    StartedToolResultEntry,
    StepAttempt,
    StepFailed,
    ToolResult,
    ToolStarted,
    UsageFact,
    UserEntry,
)
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.state import ConfigurationSnapshot, ToolDigest
from tiny_agent.journal.transcript import AssistantMessage, FunctionCall, ToolCall, ToolMessage, Usage, UserMessage
from tiny_agent.stores.journal import JournalWriter

ZERO_DIGEST = "sha256:" + "0" * 64
SNAPSHOT = ConfigurationSnapshot(
    model="test/model",
    systemPromptDigest=ZERO_DIGEST,
    tools=[ToolDigest(name="read", definitionDigest=ZERO_DIGEST)],
    adapterIdentity="openrouter:chat-completions:v1",
    routingIdentity="openrouter:test/model",
    outputOptionsDigest=ZERO_DIGEST,
)
SNAPSHOT_DIGEST = canonical_digest(SNAPSHOT)


class Clock:
    """A deterministic millisecond clock for reproducible journals."""

    def __init__(self, start: int = 1_787_371_200_000) -> None:
        self._ticks = itertools.count(start, 7)

    def __call__(self) -> int:
        return next(self._ticks)


def header(session_id: str | None = None, version: int = 3, cwd: str = "/workspace") -> HeaderLine:
    return HeaderLine(
        version=version,
        id=session_id or uuid7(),
        createdAt=1_787_371_200_000,
        cwd=cwd,
        provider="openrouter",
        model="test/model",
        environmentIdentity="fixture",
    )


def new_writer(path: Path, version: int = 3, cwd: str = "/workspace", session_id: str | None = None) -> JournalWriter:
    return JournalWriter.create(path, header(session_id, version=version, cwd=cwd), durability="process", clock=Clock())


class RunWriter:
    """Writes the facts of runs through a JournalWriter, the way the agent loop does."""

    def __init__(self, writer: JournalWriter) -> None:
        self.writer = writer
        self.operation_id = ""
        self.step_id = ""
        self.attempt_id = ""

    def start(self, prompt: str) -> str:
        user_id = uuid7()
        self.operation_id = uuid7()
        self.writer.commit(
            [
                EntryFact(id=user_id, entry=UserEntry(message=UserMessage(content=prompt))),
                RecordFact(id="", record=RunStarted(operationId=self.operation_id, inputEntryId=user_id)),
            ]
        )
        return user_id

    def attempt(self, attempt: int = 1) -> None:
        if attempt == 1:
            self.step_id = uuid7()
        self.attempt_id = uuid7()
        step = self.writer.state.operation.step if attempt == 2 else None
        context = step.contextThroughEntryId if step is not None else self.writer.state.contextBoundary
        self.writer.commit(
            [
                RecordFact(
                    id="",
                    record=StepAttempt(
                        operationId=self.operation_id,
                        stepId=self.step_id,
                        attemptId=self.attempt_id,
                        stepKind="assistant",
                        attempt=attempt,
                        contextThroughEntryId=context,  # type: ignore[arg-type]
                        configurationSnapshot=SNAPSHOT,
                        configurationDigest=SNAPSHOT_DIGEST,
                    ),
                )
            ]
        )

    def raw(self, body: str, status: int = 200) -> None:
        self.writer.commit(
            [
                RawFact(
                    id="",
                    operationId=self.operation_id,
                    attemptId=self.attempt_id,
                    raw=RawResponse(status=status, contentType="application/json", body=body),
                )
            ]
        )

    def answer(self, content: str, usage: Usage | None = None) -> str:
        return self._settle(AssistantMessage(content=content), "stop", usage)

    def call_tools(self, calls: list[tuple[str, str]], usage: Usage | None = None, ids: list[str] | None = None) -> str:
        call_ids = ids or [f"call_{index}_{uuid7()[-6:]}" for index in range(len(calls))]
        tool_calls = [
            ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=args))
            for call_id, (name, args) in zip(call_ids, calls, strict=True)
        ]
        return self._settle(AssistantMessage(content=None, tool_calls=tool_calls), "toolUse", usage)

    def _settle(self, message: AssistantMessage, stop_reason: str, usage: Usage | None) -> str:
        entry_id = uuid7()
        facts = [
            EntryFact(
                id=entry_id,
                entry=AssistantEntry(
                    stepId=self.step_id, attemptId=self.attempt_id, stopReason=stop_reason, message=message  # type: ignore[arg-type]
                ),
            ),
            UsageFact(id="", operationId=self.operation_id, attemptId=self.attempt_id, usage=usage or Usage(12, 3, 4, 0)),
        ]
        self.writer.commit(facts)  # type: ignore[arg-type]
        return entry_id

    def fail_step(self) -> None:
        self.writer.commit(
            [
                RecordFact(
                    id="",
                    record=StepFailed(
                        operationId=self.operation_id,
                        stepId=self.step_id,
                        attemptId=self.attempt_id,
                        error=ErrorInfo(code="model_error", message="provider request failed"),
                    ),
                )
            ]
        )

    def run_tool(self, assistant_entry_id: str, index: int, output: str, *, finish: bool = True) -> str:
        entry = self.writer.state.entries[assistant_entry_id]
        call = entry.message.tool_calls[index]  # type: ignore[union-attr]
        started_id = uuid7()
        result_id = uuid7()
        self.writer.commit(
            [
                RecordFact(
                    id=started_id,
                    record=ToolStarted(
                        operationId=self.operation_id,
                        stepId=self.step_id,
                        assistantEntryId=assistant_entry_id,
                        toolIndex=index,
                        toolCallId=call.id,
                        toolName=call.function.name,
                        arguments={"path": "README.md"},
                        replay="safe",
                        replayKey="builtin:read:v1",
                        environmentIdentity="fixture",
                        resultEntryId=result_id,
                    ),
                )
            ]
        )
        if finish:
            self.writer.commit(
                [
                    EntryFact(
                        id=result_id,
                        entry=StartedToolResultEntry(
                            stepId=self.step_id,
                            toolStartedId=started_id,
                            toolName=call.function.name,
                            message=ToolMessage(content=output, tool_call_id=call.id),
                            result=ToolResult(type="success"),
                        ),
                    )
                ]
            )
        return started_id

    def finish(self, final_entry_id: str) -> None:
        self.writer.commit(
            [
                RecordFact(
                    id="",
                    record=OperationFinished(
                        operationId=self.operation_id,
                        operationKind="run",
                        outcome="completed",
                        completion="normal",
                        finalEntryId=final_entry_id,
                    ),
                )
            ]
        )


def write_tool_session(
    path: Path, runs: int = 2, version: int = 3, close: bool = True, session_id: str | None = None
) -> JournalWriter:
    """A journal of ``runs`` completed runs, each reading one file and then answering."""
    writer = new_writer(path, version, session_id=session_id)
    run = RunWriter(writer)
    for number in range(runs):
        run.start(f"What does file {number} say? Ünïcode ✓ \"quoted\" \\ back\\slash")
        run.attempt()
        if version >= 3:
            run.raw('{"id":"gen-1","choices":[{"message":{"role":"assistant","content":null}}]}')
        asked = run.call_tools([("read", '{"path":"README.md"}')])
        run.run_tool(asked, 0, f"# file {number}\nline two\ttabbed\n")
        run.attempt()
        if version >= 3:
            run.raw('{"id":"gen-2","choices":[{"message":{"role":"assistant","content":"It says hi."}}]}')
        answer = run.answer(f"File {number} says hi.")
        run.finish(answer)
    if close:
        writer.close()
    return writer
