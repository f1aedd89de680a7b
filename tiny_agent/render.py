"""Plain-text views of a reduced session for people (``tiny-agent replay``).

Pure: takes a state, returns lines.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator

from msgspec import UNSET

from tiny_agent.state import CompactionOperation, EntryRecord, RunOperation, SessionState
from tiny_agent.transcript import AssistantMessage, Message, ToolMessage, Usage, UserMessage

_INDENT = "    "


def transcript_lines(state: SessionState) -> Iterator[str]:
    """The transcript in order, compaction points marked where they fell."""
    header = state.header
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(header.createdAt / 1000))
    yield f"session {header.id} · v{state.version} · {header.provider} · {header.model}"
    yield f"created {created} in {header.cwd}"
    call_names: dict[str, str] = {}
    for record in state.entries.values():
        yield ""
        if record.message is None:
            yield f"── compaction {record.id}: the model's context restarts from a summary here ──"
            continue
        yield from _message_lines(record.transcriptIndex + 1, record, record.message, call_names)


def _message_lines(number: int, record: EntryRecord, message: Message, call_names: dict[str, str]) -> Iterator[str]:
    kind = type(message)
    if kind is UserMessage:
        yield f"#{number} user"
        yield from _body(message.content)
    elif kind is AssistantMessage:
        stop = f" → {record.stopReason}" if record.stopReason else ""
        yield f"#{number} assistant{stop}"
        if message.content:  # type: ignore[union-attr]
            yield from _body(message.content)  # type: ignore[union-attr]
        elif message.tool_calls is UNSET:  # type: ignore[union-attr]
            yield f"{_INDENT}(empty answer)"
        for call in message.calls:  # type: ignore[union-attr]
            call_names[call.id] = call.function.name
            yield f"{_INDENT}▸ {call.function.name}({call.function.arguments})  [{call.id}]"
    elif kind is ToolMessage:
        name = call_names.get(message.tool_call_id, "?")  # type: ignore[union-attr]
        yield f"#{number} tool {name} [{message.tool_call_id}]"  # type: ignore[union-attr]
        yield from _body(message.content if message.content else "(empty result)")


def _body(text: str) -> Iterator[str]:
    for line in text.split("\n"):
        yield textwrap.indent(line, _INDENT) if line else ""


def footer_lines(state: SessionState, file_size: int) -> Iterator[str]:
    yield ""
    yield "─" * 60
    messages = len(state.transcript)
    yield f"{state.factCount} facts · {messages} messages · {len(state.activeContext)} in the model's context"
    yield f"usage: {usage_summary(state.usage)}"
    yield f"operation: {operation_summary(state)}"
    if state.version >= 3:
        yield "integrity: " + ("sealed (clean close)" if state.sealed else "open tail (live, or crashed before a clean close)")
    torn = file_size - state.repairedLength
    if torn > 0:
        yield (
            f"warning: torn tail of {torn} bytes after the last newline was ignored "
            f"(an interrupted write; `tiny-agent resume` moves it to a sidecar file)"
        )


def usage_summary(usage: Usage) -> str:
    rate = usage.cache_hit_rate
    hit = "n/a" if rate is None else f"{rate:.1%}"
    return (
        f"input {usage.input:,} · output {usage.output:,} · cache read {usage.cacheRead:,} · "
        f"cache write {usage.cacheWrite:,} · cache hit rate {hit}"
    )


def operation_summary(state: SessionState) -> str:
    operation = state.operation
    if type(operation) is RunOperation:
        parts = [f"open run {operation.operationId}"]
    elif type(operation) is CompactionOperation:
        parts = [f"open compaction {operation.operationId}"]
    else:
        return "idle"
    step = operation.step
    if step is UNSET:
        parts.append("no step started yet")
    elif step.status == "attempting":
        raw = ", response on record" if step.rawId is not UNSET else ", no response on record"
        parts.append(f"attempt {step.attempt} of step {step.stepId} open{raw}")
    elif step.status == "settled":
        ended = f" ({step.stopReason})" if step.stopReason is not UNSET else ""
        parts.append(f"step {step.stepId} settled{ended}")
    else:
        parts.append(f"step {step.stepId} failed")
    if type(operation) is RunOperation:
        pending = [call.toolName for call in operation.toolCalls if call.status == "pending"]
        if pending:
            parts.append(f"{len(pending)} tool call(s) pending ({', '.join(pending)})")
    if operation.abortRequested:
        parts.append("abort requested")
    return " · ".join(parts) + " — run `tiny-agent resume` to finish it"
