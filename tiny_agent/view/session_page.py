"""The page of one session: header, charts, and the timeline of runs, steps, attempts and tool calls (the panels are in
:mod:`.panels`).  Every value from the journal is hostile input and is escaped (docs/view.md, *Safe to open*).  Pure."""

from __future__ import annotations

import itertools
from html import escape
from typing import Final

from tiny_agent.journal.transcript import Usage
from tiny_agent.oversight.audit import AttemptAudit
from tiny_agent.oversight.cost import Cost, cost_text, unpriced
from tiny_agent.oversight.mcp import one_line
from tiny_agent.oversight.render import compaction_tokens, counted, git_summary, kept_tail, usage_counts, usage_summary
from tiny_agent.view.charts import Bar, bucketed, cost_chart, line_chart, percent, token_bars
from tiny_agent.view.model import AttemptView, OperationView, SessionView, StepView, ToolView, clip
from tiny_agent.view.page import badge, clock, document, duration, facts_table, listing, text, when
from tiny_agent.view.panels import attempt_panel, clip_block

VERDICTS: Final = {
    "ok": ("sealed", "sealed"),
    "open-tail": ("open tail", "open-tail"),
    "unsealed": ("unsealed", "unsealed"),
    "corrupt": ("corrupt", "corrupt"),
    "unreadable": ("unreadable", "corrupt"),
}
OPEN_ALL: Final = 20
"""Sessions with at most this many operations show them all open; bigger ones open only the notable."""
NOTABLE_FOLDED: Final = 100
"""Folded failures, aborts and compactions listed by name, at most."""

TOOLBAR: Final = (
    '<button id="expand" type="button">expand all</button>'
    '<button id="collapse" type="button">collapse all</button>'
    '<button id="problems" type="button" aria-pressed="false">only failures and retries</button>'
)


def session_page(view: SessionView) -> str:
    title = f"tiny-agent session {view.handle or view.header.id}"
    body = "".join([_head(view), _charts(view), _timeline(view), _dropped(view)])
    return document(title, body, toolbar=TOOLBAR)


# -- header -------------------------------------------------------------------------------


def _head(view: SessionView) -> str:
    header = view.header
    verdict = view.verdict
    word, css = VERDICTS[verdict.status]
    report = view.report
    rows = [
        ("id", f"<code>{text(header.id)}</code>"),
        ("handle", f"<code>{text(view.handle or '-')}</code>"),
        ("provider", text(header.provider)),
        ("model", text(header.model)),
        ("created", text(when(header.createdAt)) + " UTC"),
        ("directory", f"<code>{text(header.cwd)}</code>"),
        ("journal", f"<code>{text(view.path)}</code> (v{header.version})"),
        ("status", _status(view)),
        ("last run", _last_run(view)),
        ("integrity", f'{badge(word, css)} <span class="muted">{text(verdict.detail)}</span>'),
        ("attempts", _attempt_counts(view)),
        ("usage", text(usage_summary(report.usage))),
        ("cost", _cost_line(view.cost)),
        ("drift", badge("drift", "drift") + " " + _drifted(view) if report.drift else '<span class="good">none</span>'),
    ]
    if report.instructions:
        offered = [
            f'<code>{text(i.path)}</code> <span class="muted">{text(i.digest)} · attempt {i.firstAttempt} on</span>'
            for i in report.instructions
        ]
        rows.append(("instructions offered", listing(offered)))
    if report.git:
        commits = [
            f'{text(git_summary(g.commit, g.dirty))} <span class="muted">attempt {g.firstAttempt} on</span>' for g in report.git
        ]
        rows.append(("git", listing(commits)))
    return f"<header><h1>Session {text(view.handle or header.id)}</h1>{facts_table(rows)}</header>"


def _status(view: SessionView) -> str:
    operations = view.operations
    if operations and operations[-1].outcome == "open":
        pid = view.verdict.writer_pid
        who = f"live (written by pid {pid})" if pid else "crashed or interrupted: `tiny-agent resume` finishes it"
        return badge("open", "open") + " " + text(f"{operations[-1].kind} {operations[-1].number} unfinished, {who}")
    return badge("idle", "ok")


def _last_run(view: SessionView) -> str:
    run = view.last_run
    if run is None:
        return '<span class="muted">no runs</span>'
    words = [badge(run.outcome, run.outcome)]
    if run.step_limit:
        words.append(badge("step limit", "failed"))
    if run.outcome != "open" and view.report.lastRun:
        words.append(text(view.report.lastRun))  # replay's words
    words.append(f'<a href="#run-{run.number}">run {run.number}</a>')
    return " ".join(words)


def _attempt_counts(view: SessionView) -> str:
    attempts = view.report.attempts
    runs = sum(1 for operation in view.operations if operation.kind == "run")
    compactions = len(view.operations) - runs
    failed = sum(1 for attempt in attempts if attempt.settled in ("failed", "aborted"))
    retried = sum(1 for attempt in attempts if attempt.settled == "retried")
    parts = [f"{counted(len(attempts), 'model attempt')} in {counted(runs, 'run')}"]
    if compactions:
        parts.append(counted(compactions, "compaction"))
    parts.append(f"{retried:,} retried")
    parts.append(f"{failed:,} failed or aborted")
    return text(" · ".join(parts))


def _cost_line(cost: Cost) -> str:
    missing = f' · <span class="warn">no price for {text(unpriced(cost))}</span>' if cost.missing else ""
    return text(cost_text(cost)) + missing


def _drifted(view: SessionView) -> str:
    numbers = [attempt.number for attempt in view.report.attempts if attempt.drift]
    return " ".join(f'<a href="#attempt-{number}">attempt {number}</a>' for number in numbers[:50])


# -- charts -------------------------------------------------------------------------------


def _bar(attempt: AttemptView) -> Bar:
    audited = attempt.audit
    usage = audited.usage or Usage()
    return Bar(
        key=str(audited.number),
        label=f"attempt {audited.number} · {audited.settled} · {audited.model}",
        tokens=(usage.input, usage.cacheRead, usage.cacheWrite, usage.output),
        flag=audited.settled if audited.settled in ("failed", "aborted", "retried") else "",
        cost=attempt.cost,
    )


def _charts(view: SessionView) -> str:
    bars = [_bar(attempt) for attempt in view.attempts]
    if not bars:
        return '<section id="charts"><h2>Usage</h2><p class="note">No model attempts yet.</p></section>'
    shown = bucketed(bars)
    keys = [bar.key for bar in shown]
    parts = ['<section id="charts"><h2>Tokens per attempt</h2>']
    parts.append(token_bars(bars, title="tokens per attempt: input, cache read, cache write, output", css="tokens"))
    parts.append("<h2>Cache hit rate</h2>")
    parts.append(_rate_chart(keys, shown))
    parts.append("<h2>Cost</h2>")
    parts.append(cost_chart(keys, [bar.cost for bar in shown], view.cost, "cumulative cost", cumulative=True))
    parts.append("</section>")
    return "".join(parts)


def _rate_chart(keys: list[str], bars: list[Bar]) -> str:
    running = Usage()
    cumulative: list[float | None] = []
    for bar in bars:
        running = running + Usage(input=bar.tokens[0], cacheRead=bar.tokens[1], cacheWrite=bar.tokens[2])
        cumulative.append(running.cache_hit_rate)
    rates = [bar.hit_rate for bar in bars]
    if all(rate is None for rate in rates):
        return '<p class="note">No prompt tokens reported: no cache hit rate.</p>'
    chart = line_chart(
        keys,
        [("rate", rates), ("cumulative", cumulative)],
        title="cache hit rate per attempt (dashed) and over the session so far (solid)",
        css="rate",
        top=1.0,
        label=percent,
    )
    explained = "cache read ÷ (input + cache read + cache write); dashed: each attempt, solid: the session so far."
    return chart + f'<p class="note">{explained}</p>'


# -- timeline -----------------------------------------------------------------------------


def _timeline(view: SessionView) -> str:
    parts = ['<section id="timeline"><h2>Timeline</h2>']
    if view.full < len(view.attempts) / 2:
        parts.append(
            f'<p class="note">{len(view.attempts):,} attempts: the first and last {view.full} have raw-vs-canonical '
            f"panels; operations beyond the first and last {view.rows} attempts are folded "
            "(`tiny-agent audit` lists every attempt).</p>"
        )
    open_all = len(view.operations) <= OPEN_ALL
    for folded, operations in itertools.groupby(view.operations, key=lambda operation: operation.folded):
        if folded:
            parts.append(_folded_region(list(operations)))
        else:
            parts += (_operation(operation, open_all or operation is view.operations[-1]) for operation in operations)
    parts.append("</section>")
    return "".join(parts)


def _operation(operation: OperationView, expanded: bool) -> str:
    css = f"operation {operation.kind} {operation.outcome}"
    notable = operation.outcome != "completed" or operation.kind == "compaction"
    is_open = " open" if (expanded or notable) and operation.kind != "compaction" else ""
    anchor = f"{operation.kind}-{operation.number}"
    parts = [
        f'<details class="{css}" id="{anchor}" data-operation="{anchor}"{is_open}>',
        f"<summary>{_operation_summary(operation)}</summary>",
    ]
    if operation.prompt is not None:
        parts.append(clip_block("prompt", operation.prompt, open_=True))
    if operation.compaction is not None:
        parts.append(_compaction(operation))
    for position, step in enumerate(operation.steps, start=1):
        parts.append(_step(step, position))
    parts.append(f'<div class="note">{_ending(operation)}</div>')
    parts.append("</details>")
    return "".join(parts)


def _operation_summary(operation: OperationView) -> str:
    name = "Run" if operation.kind == "run" else "Compaction"
    words = [f"{name} {operation.number}", clock(operation.started)]
    took = duration(operation.started, operation.finished)
    if took:
        words.append(took)
    parts = [text(" · ".join(words)), badge(operation.outcome, operation.outcome)]
    if operation.step_limit:
        parts.append(badge("step limit", "failed"))
    if operation.abortPhase:
        parts.append(badge(f"abort requested ({operation.abortPhase})", "aborted"))
    if operation.kind == "compaction":
        parts.append(badge("compaction", "folded"))
    counts = f"{operation.attempts} attempt{'s' if operation.attempts != 1 else ''}"
    if operation.retries:
        parts.append(badge(f"{operation.retries} retr{'ies' if operation.retries > 1 else 'y'}", "retried"))
    if operation.tools:
        counts += f" · {operation.tools} tool call{'s' if operation.tools != 1 else ''}"
    parts.append(f'<span class="muted">{text(counts)}</span>')
    if operation.prompt is not None:
        parts.append(f'<span class="muted">— {text(one_line(operation.prompt.text, 100))}</span>')
    return " ".join(parts)


def _ending(operation: OperationView) -> str:
    if operation.finished is None:
        return "not finished: the journal ends inside this operation"
    words = [f"finished {clock(operation.finished)} · {operation.outcome}"]
    if operation.completion:
        words.append(f"({operation.completion})")
    if operation.errorCode:
        words.append(f"· {operation.errorCode}: {operation.errorMessage or ''}")
    if operation.step_limit:
        words.append("· stopped at the step limit (--max-steps)")
    if operation.abortAt is not None:
        words.append(f"· abort requested at {clock(operation.abortAt)} during the {operation.abortPhase} phase")
    return text(" ".join(words))


def _compaction(operation: OperationView) -> str:
    compaction = operation.compaction
    assert compaction is not None
    lines = (
        f"{compaction.compacted} entries folded into a summary; {compaction.retained} messages kept verbatim after it. "
        "The model's context restarts from here."
    )
    audit = compaction.audit
    if audit is not None:
        pieces = audit.pieces > 1
        piece = f" Piece {audit.piece} of {audit.pieces}: the history did not fit one summary request." if pieces else ""
        lines += (
            f" Context before: {compaction_tokens(audit, 'before')}; after: {compaction_tokens(audit, 'after')}; "
            f"{kept_tail(audit)}.{piece}"
        )
    summary = clip_block("summary", compaction.summary, open_=False) if compaction.summary.size else ""
    return f'<div class="folded-region compaction-region"><p>{text(lines)}</p>{summary}</div>'


def _step(step: StepView, position: int) -> str:
    parts = [f'<div class="step" data-step="{text(step.stepId)}">']
    parts.append(f'<div class="muted">Step {position} · {text(step.kind)}</div>')
    previous: AttemptView | None = None
    for attempt in step.attempts:
        parts.append(_attempt(attempt, previous))
        previous = attempt
    for tool in step.tools:
        parts.append(_tool(tool))
    parts.append("</div>")
    return "".join(parts)


def _attempt(attempt: AttemptView, previous: AttemptView | None) -> str:
    audited = attempt.audit
    status = attempt.status
    css = f"attempt {status}"
    parts = [f'<div class="{css}" id="attempt-{attempt.number}" data-attempt="{attempt.number}" data-status="{status}">']
    parts.append(f'<div class="row">{_attempt_row(attempt, audited, previous)}</div>')
    if attempt.answer is not None:
        parts.append(clip_block("answer", attempt.answer, open_=attempt.detail is not None))
    if attempt.detail is not None:
        parts.append(attempt_panel(attempt, audited))
    parts.append("</div>")
    return "".join(parts)


def _attempt_row(attempt: AttemptView, audited: AttemptAudit, previous: AttemptView | None) -> str:
    words = [f"#{attempt.number}"]
    if attempt.attempt > 1:
        words.append(f"retry {attempt.attempt - 1}")
    words.append(clock(attempt.started))
    if previous is not None:
        waited = duration(previous.responded or previous.started, attempt.started)
        if waited:
            words.append(f"after waiting {waited}")
    response = audited.response
    if response is not None:
        words.append(f"HTTP {response.status}")
        answered = duration(attempt.started, attempt.responded)
        if answered:
            words.append(f"response in {answered}")
    took = duration(attempt.started, attempt.ended)
    if took:
        words.append(f"settled in {took}")
    parts = [text(" · ".join(words))]
    label = f"answered ({audited.stopReason})" if audited.settled == "assistant" else audited.settled
    parts.append(badge(label, attempt.status))
    if audited.drift:
        parts.append(badge("drift", "drift"))
    if response is not None and response.incomplete:
        parts.append(badge("ended early", "failed"))
    if response is not None and response.stream is not None:
        parts.append(badge(f"stream · {response.stream.events} events", "muted"))
    parts.append(f'<span class="muted">{text(usage_counts(audited.usage))} · {text(cost_text(attempt.cost))}</span>')
    if attempt.calls:
        parts.append(f"<span>calls {text(', '.join(attempt.calls))}</span>")
    if audited.failure:
        parts.append(f'<div class="bad">{text(audited.failure)}</div>')
    return " ".join(parts)


def _tool(tool: ToolView) -> str:
    outcome_css = tool.outcome.split(":")[0]
    words = [f"▸ {tool.name}"]
    took = duration(tool.started, tool.finished)
    if took:
        words.append(took)
    replay = f"replay {tool.replay}" if tool.replay else "not executed"
    parts = [
        f'<div class="tool {escape(outcome_css)}" data-tool="{text(tool.callId)}">',
        f"{text(' · '.join(words))} {badge(tool.outcome, outcome_css)} ",
        f'<span class="muted">{text(replay)} · call {text(tool.callId)}</span>',
    ]
    if tool.arguments.size:
        parts.append(clip_block("arguments", tool.arguments, open_=False))
    if tool.mcp:
        parts.append(clip_block("MCP exchange", clip("\n".join(tool.mcp), 20_000), open_=False))
    if tool.result is not None:
        parts.append(clip_block("result", tool.result, open_=False))
    parts.append("</div>")
    return "".join(parts)


def _folded_region(operations: list[OperationView]) -> str:
    attempts = sum(operation.attempts for operation in operations)
    failed = sum(1 for operation in operations if operation.outcome != "completed")
    retries = sum(operation.retries for operation in operations)
    first, last = operations[0], operations[-1]
    head = (
        f"{len(operations):,} operations folded ({first.kind} {first.number} to {last.kind} {last.number}): "
        f"{attempts:,} attempts, {retries:,} retries, {failed:,} not completed"
    )
    notable = [operation for operation in operations if operation.outcome != "completed" or operation.kind == "compaction"]
    listed = listing([_folded_line(operation) for operation in notable], limit=NOTABLE_FOLDED) if notable else ""
    return f'<div class="folded-region" data-folded="{len(operations)}"><p>{text(head)}</p>{listed}</div>'


def _folded_line(operation: OperationView) -> str:
    words = [f"{operation.kind} {operation.number}", when(operation.started), operation.outcome]
    if operation.errorCode:
        words.append(f"{operation.errorCode}: {one_line(operation.errorMessage or '', 120)}")
    return text(" · ".join(words))


# -- the session's dropped fields -----------------------------------------------------------


def _dropped(view: SessionView) -> str:
    dropped = view.report.dropped
    if not dropped:
        return ""
    rows = [f'<mark class="dropped">{text(path)}</mark> × {count:,}' for path, count in itertools.islice(dropped.items(), 200)]
    heading = "<h2>Fields the seam dropped (kept only in the raw responses)</h2>"
    return f'<section id="dropped">{heading}{listing(rows)}</section>'
