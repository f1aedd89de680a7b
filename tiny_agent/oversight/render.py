"""Plain-text views of a reduced session for people (``tiny-agent replay``).

Pure: takes a state, returns lines.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

from msgspec import UNSET

from tiny_agent.fold.core import kind_of
from tiny_agent.journal.partial import entries_in_order
from tiny_agent.journal.state import AppliedEntry, CompactionOperation, RunOperation, SessionState, outcome_summary
from tiny_agent.journal.transcript import AssistantMessage, Message, ToolMessage, Usage, UserMessage

if TYPE_CHECKING:  # types only: rendering never reads a journal itself
    from tiny_agent.journal.facts import CompactionEntry
    from tiny_agent.oversight.audit import AttemptAudit, AuditReport, CompactionAudit
    from tiny_agent.providers.selection import ProfileListing
    from tiny_agent.stores.listing import Listed

_INDENT = "    "


FOLD_LINES: Final = 40
"""Tool results longer than this many lines show their first and last lines (``--full`` shows all)."""
FOLD_KEEP: Final = 8


def transcript_lines(
    state: SessionState, *, full: bool = False, compactions: Mapping[str, CompactionEntry] | None = None
) -> Iterator[str]:
    """The transcript in order, compaction points marked where they fell.

    Streams: each entry is let go once its lines are made, and a lean state's older entries are read from its
    checkpoint a frame at a time (:func:`~tiny_agent.journal.partial.entries_in_order`), so what is held besides
    the state is one frame and the numbers of the entries compactions name, never the transcript.
    """
    header = state.header
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(header.createdAt / 1000))
    yield f"session {header.id} · v{state.version} · {header.provider} · {header.model}"
    yield f"created {created} in {header.cwd}"
    yield from lineage_lines(state)
    details = compactions or {}
    named = {detail.compactedThroughEntryId for detail in details.values()}
    numbers: dict[str, int] = {}
    call_names: dict[str, str] = {}
    for entry in entries_in_order(state.entries):
        yield ""
        if entry.id in named:
            numbers[entry.id] = entry.transcriptIndex + 1
        if entry.message is None:
            yield f"── compaction {entry.id}: the model's context restarts from a summary here ──"
            detail = details.get(entry.id)
            if detail is not None:
                yield from _compaction_lines(numbers.get(detail.compactedThroughEntryId, 0), detail, full)
            continue
        if type(entry.message) is AssistantMessage:
            # A tool message answers a call of the assistant message before it (the role rule, session-v2 §12):
            # names of earlier calls are never looked up again.
            call_names.clear()
        yield from _message_lines(entry.transcriptIndex + 1, entry, entry.message, call_names, full)


def lineage_lines(state: SessionState) -> Iterator[str]:
    """Where the session came from, if it was forked or upgraded (`tiny-agent verify` checks the link)."""
    parent = state.parent
    if parent is not None:
        yield (
            f"forked from session {parent.session} after its line {parent.line}: what comes before that point "
            f"is the parent's (`tiny-agent verify` checks the link)"
        )
    origin = state.origin
    if origin is not None:
        yield f"upgraded from the v2 journal {origin.path} (a copy of its first {origin.length:,} bytes, left as they were)"


def _message_lines(
    number: int, entry: AppliedEntry, message: Message, call_names: dict[str, str], full: bool
) -> Iterator[str]:
    match message:
        case UserMessage():
            yield f"#{number} user"
            yield from _body(message.content)
        case AssistantMessage():
            stop = f" → {entry.stopReason}" if entry.stopReason else ""
            yield f"#{number} assistant{stop}"
            if message.content:
                yield from _body(message.content)
            elif message.tool_calls is UNSET:
                yield f"{_INDENT}(empty answer)"
            for call in message.calls:
                call_names[call.id] = call.function.name
                yield f"{_INDENT}▸ {call.function.name}({call.function.arguments})  [{call.id}]"
        case ToolMessage():
            name = call_names.get(message.tool_call_id, "?")
            yield f"#{number} tool {name} [{message.tool_call_id}]"
            text = message.content if message.content else "(empty result)"
            yield from _folded(text, full)


def _compaction_lines(last: int, entry: CompactionEntry, full: bool) -> Iterator[str]:
    """What a compaction replaced: the messages it summarised (through #``last``), the ones it kept, and the summary."""
    kept = len(entry.retainedTail)
    kept_range = "none" if not kept else f"#{last + 1}" + (f"–#{last + kept}" if kept > 1 else "")
    yield f"{_INDENT}summarises the conversation through #{last}; keeps {kept_range} verbatim"
    yield f"{_INDENT}summary:"
    yield from _folded(textwrap.indent(entry.summary or "(empty)", _INDENT), full)


def _folded(text: str, full: bool = False) -> Iterator[str]:
    """A long text as its first and last lines, saying how many are hidden (``full``: all of it)."""
    if full or text.count("\n") < FOLD_LINES:
        yield from _body(text)
        return
    lines = text.split("\n")
    yield from _body("\n".join(lines[:FOLD_KEEP]))
    yield f"{_INDENT}… {len(lines) - 2 * FOLD_KEEP} lines hidden (--full shows them)"
    yield from _body("\n".join(lines[-FOLD_KEEP:]))


def _body(text: str) -> Iterator[str]:
    for line in text.split("\n"):
        yield textwrap.indent(line, _INDENT) if line else ""


def counted(number: int, noun: str) -> str:
    """``1 message``, ``2 messages``, ``1,024 sessions``: a count with its noun in the right number."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def footer_lines(state: SessionState, file_size: int, name: str | None = None) -> Iterator[str]:
    """The replay's footer; ``name`` is how commands it suggests name the session (default: its id)."""
    yield ""
    yield "─" * 60
    messages = counted(len(state.transcript), "message")
    yield f"{counted(state.factCount, 'fact')} · {messages} · {len(state.activeContext)} in the model's context"
    yield f"usage: {usage_summary(state.usage)}"
    yield f"operation: {operation_summary(state)}"
    git = state.lastSnapshot.git if state.lastSnapshot is not None else UNSET
    if git is not UNSET:
        yield f"git: {git_summary(git.commit, git.dirty)} (at the newest model request)"
    outcome = outcome_summary(state, name)
    if outcome is not None:
        yield f"last run: {outcome}"
    if state.version >= 3:
        yield "integrity: " + ("sealed (clean close)" if state.sealed else "open tail (live, or crashed before a clean close)")
    torn = file_size - state.repairedLength
    if torn > 0:
        yield (
            f"warning: torn tail of {torn} bytes after the last newline was ignored "
            f"(an interrupted write; `tiny-agent resume` moves it to a sidecar file)"
        )


def git_summary(commit: str, dirty: bool) -> str:
    return f"commit {commit[:12]}, " + ("with uncommitted changes" if dirty else "clean")


def usage_summary(usage: Usage) -> str:
    """Session totals: what the responses reported (``n/a`` when none reported any)."""
    if usage == Usage():
        return "n/a (no response reported usage)"
    return f"{usage_counts(usage)} · cache hit rate {rate_text(usage.cache_hit_rate)}"


def rate_text(rate: float | None) -> str:
    """A cache hit rate: ``40.9%``, or ``n/a`` where there was no prompt token."""
    return "n/a" if rate is None else f"{rate:.1%}"


def usage_counts(usage: Usage | None) -> str:
    """``input 1,200 · output 40 (reasoning 12) · cache read 800 · cache write 0``, or ``n/a (not reported)``."""
    if usage is None:
        return "n/a (not reported)"
    reasoning = "" if usage.reasoning is UNSET else f" (reasoning {usage.reasoning:,})"
    return (
        f"input {usage.input:,} · output {usage.output:,}{reasoning} · cache read {usage.cacheRead:,} · "
        f"cache write {usage.cacheWrite:,}"
    )


def operation_summary(state: SessionState) -> str:
    operation = state.operation
    if type(operation) is not RunOperation and type(operation) is not CompactionOperation:
        return "idle"
    parts = [f"open {kind_of(operation)} {operation.operationId}"]
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


# -- audit ------------------------------------------------------------------------


def audit_lines(report: AuditReport) -> Iterator[str]:
    """The audit for people: each attempt, the dropped fields, totals, tools, and the verdict."""
    yield f"audit of {report.path} (session {report.session}, v{report.version}, {len(report.attempts)} model attempts)"
    for attempt in report.attempts:
        yield ""
        yield from _attempt_lines(attempt)
    if report.dropped:
        yield ""
        yield "fields the seam dropped (kept only in the raw responses)"
        width = max(len(str(count)) for count in report.dropped.values())
        for path, count in report.dropped.items():
            yield f"  {count:>{width}}×  {path}"
    if report.compactions:
        yield ""
        yield "compactions (tokens as the provider reported them, else estimated at four characters each)"
        for item in report.compactions:
            piece = f"  piece {item.piece} of {item.pieces}" if item.pieces > 1 else ""
            yield (
                f"  line {item.line}{piece}  {item.messagesBefore} messages ({compaction_tokens(item, 'before')}) → "
                f"{item.messagesAfter} ({compaction_tokens(item, 'after')}): a summary of {item.summaryChars:,} "
                f"characters and {kept_tail(item)}"
            )
    yield ""
    yield "totals"
    yield f"  usage      {usage_summary(report.usage)}"
    yield f"  cost       {_money(report.cost)} (as the provider reported it)"
    if report.models:
        yield "  per model"
        models: list[list[str]] = [["model", "attempts", "input", "output", "cacheRead", "cacheWrite", "cost"]]
        for name, totals in report.models.items():
            usage = totals.usage
            counters = [f"{usage.input:,}", f"{usage.output:,}", f"{usage.cacheRead:,}", f"{usage.cacheWrite:,}"]
            models.append([name, str(totals.attempts), *counters, _money(totals.cost or None)])
        yield from _table(models, indent="    ")
    if report.tools:
        yield ""
        yield "tools"
        tools: list[list[str]] = [["tool", "call", "replay", "outcome"]]
        for tool in report.tools:
            replay = f"{tool.replay} ({tool.replayKey})" if tool.replay else "not executed"
            tools.append([tool.toolName, tool.toolCallId, replay, tool.outcome])
        yield from _table(tools, indent="  ")
        for tool in report.tools:
            if tool.mcp:
                yield f"  {tool.toolName} [{tool.toolCallId}] on the wire:"
                yield from (f"    {line}" for line in tool.mcp)
                kept = (tool.kept or "").replace("\n", " ⏎ ")
                yield f"    kept in the transcript: {kept[:200] + '…' if len(kept) > 200 else kept}"
    if report.mcp:
        yield ""
        yield "MCP sessions (start-up and shutdown)"
        yield from (f"  {line}" for line in report.mcp)
    if report.instructions:
        yield ""
        yield "project instructions offered (docs/tools.md)"
        offered = [["file", "sha256", "from attempt"]]
        offered += [[item.path, item.digest, str(item.firstAttempt)] for item in report.instructions]
        yield from _table(offered, indent="  ")
    if report.git:
        yield ""
        yield from (f"git: {git_summary(item.commit, item.dirty)}, from attempt {item.firstAttempt}" for item in report.git)
    yield ""
    drifted = [attempt.number for attempt in report.attempts if attempt.drift]
    if drifted:
        numbers = ", ".join(str(number) for number in drifted)
        yield (
            f"verdict: DRIFT in attempt(s) {numbers}: the journal's canonical entries differ from what "
            "today's seam makes of the stored responses"
        )
    else:
        yield "verdict: no drift — every stored response normalizes today to exactly what the journal kept"


def _attempt_lines(attempt: AttemptAudit) -> Iterator[str]:
    retry = f" (retry {attempt.attempt - 1})" if attempt.attempt > 1 else ""
    yield f"attempt {attempt.number}{retry} · step {attempt.stepId} · model {attempt.model}"
    response = attempt.response
    if response is not None:
        ident = response.responseId or "(no id)"
        finish = response.finishReason if response.finishReason is not None else "(none)"
        yield (
            f"  response  {ident} · HTTP {response.status} · {response.contentType or 'no content type'} · "
            f"{response.bytes:,} bytes · line {response.line}"
        )
        adapters = f" · adapters {', '.join(response.adapters)}" if response.adapters else ""
        yield f"  api       {response.api}{adapters}"
        stream = response.stream
        if stream is not None:
            carried = f"; not carried: {', '.join(stream.not_carried[:6])}" if stream.not_carried else ""
            yield f"  stream    {stream.events} events · {stream.bytes:,} bytes reassembled into one body{carried}"
        for change in response.adapted:
            yield f"  adapted   {change}"
        if response.redactions:
            yield f"  redacted  {response.redactions} secret occurrence(s) replaced by [REDACTED] before the body was journaled"
        if response.incomplete:
            yield f"  ended     early: {response.incomplete}"
        yield f"  seam      finish_reason {finish} → {response.seam}"
        if response.derivation:
            cost = f" · cost {_money(response.cost)}" if response.cost is not None else ""
            yield f"  usage     {response.derivation}{cost}"
        for line in response.hosted:
            yield f"  hosted    {line}"
        if response.dropped:
            yield f"  dropped   {', '.join(response.dropped)}"
    outcome = attempt.settled if attempt.stopReason is None else f"{attempt.settled} ({attempt.stopReason})"
    if attempt.failure:
        outcome += f": {attempt.failure}"
    yield f"  journal   {outcome}"
    yield f"  request   {attempt.requestMessages} messages after the system prompt · {attempt.requestDigest}"
    for note in attempt.notes:
        yield f"  note      {note}"
    for difference in attempt.drift:
        yield f"  DRIFT     {difference}"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def _table(rows: Sequence[Sequence[str]], indent: str) -> Iterator[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        yield indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


# -- sessions -------------------------------------------------------------------------


def sessions_table(rows: list[Listed], *, show_cwd: bool = False) -> Iterator[str]:
    """``tiny-agent sessions`` for people: one line per session, newest first."""
    head = ["handle", "created (UTC)", "model", "status", "runs", "tokens", "first prompt"]
    # A lineage column only when some session was forked or upgraded: most stores have none.
    show_lineage = any(row.lineage for row in rows)
    table: list[list[str]] = [[*head[:2], "directory", *head[2:]] if show_cwd else list(head)]
    if show_lineage:
        table[0].append("lineage")
    for row in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(row.created / 1000)) if row.created else "?"
        prompt = _clip((row.prompt or row.error or "").replace("\n", " "), 48)
        # A run whose responses reported no usage has no token count, not a count of 0 (as replay's n/a).
        tokens = "n/a" if row.runs and not row.tokens else f"{row.tokens:,}"
        cells = [row.handle or row.session[:13], created, row.model or "?", row.status, str(row.runs), tokens, prompt]
        if show_cwd:
            cells.insert(2, _clip(row.cwd or "?", 32))
        if show_lineage:
            cells.append(_clip(row.lineage or "", 48))
        table.append(cells)
    yield from _table(table, indent="")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def providers_table(rows: list[ProfileListing]) -> Iterator[str]:
    """``tiny-agent providers``: each profile, its API and base URL, and whether its key is set."""
    table: list[list[str]] = [["provider", "api", "base URL", "default model", "key variable", "key"]]
    for row in rows:
        key = "set" if row.key_present else ("not needed" if row.key_variable is None else "not set")
        cells = [row.name, row.api, row.base_url or "(give --base-url)", row.model or "(give -m)", row.key_variable or "-", key]
        table.append(cells)
    yield from _table(table, indent="")


def compaction_tokens(item: CompactionAudit, when: Literal["before", "after"]) -> str:
    tokens, counted = (item.tokensBefore, item.beforeCounted) if when == "before" else (item.tokensAfter, item.afterCounted)
    return f"{tokens:,} tokens, reported" if counted else f"~{tokens:,} tokens, estimated"


def kept_tail(item: CompactionAudit) -> str:
    """``10 kept from #41 (~1,027 tokens)``: the messages a compaction kept verbatim."""
    return f"{item.kept} kept from #{item.keptFrom} (~{item.keptTokens:,} tokens)" if item.keptFrom else "none kept"
