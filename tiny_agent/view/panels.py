"""The raw-vs-canonical panel of one attempt (docs/view.md, *The raw-vs-canonical panel*: all of it audit's findings),
and folded blocks for long contents.  Pure."""

from __future__ import annotations

from html import escape
from typing import Final

from tiny_agent.oversight.audit import AttemptAudit, ResponseAudit
from tiny_agent.oversight.cost import cost_text
from tiny_agent.oversight.render import usage_counts
from tiny_agent.view.json_html import json_html
from tiny_agent.view.model import AttemptView, Clip, RawView
from tiny_agent.view.page import facts_table, listing, text

BODY_BUDGET: Final = 65_536
"""Characters of pretty-printed JSON per body before it is cut."""
OPEN_CHARS: Final = 2_000
"""A content longer than this starts collapsed even where short ones start open."""


def clip_block(label: str, content: Clip, *, open_: bool) -> str:
    """A content in a ``<details>``, its size in the summary, and a note when it was cut."""
    cut = f' <span class="cut">(showing the first {len(content.text):,})</span>' if content.cut else ""
    opened = " open" if open_ and content.size <= OPEN_CHARS else ""
    return (
        f'<details class="content"{opened}><summary>{escape(label)} '
        f'<span class="muted">({content.size:,} characters)</span>{cut}</summary>'
        f"<pre>{escape(content.text)}</pre></details>"
    )


def attempt_panel(attempt: AttemptView, audited: AttemptAudit) -> str:
    detail = attempt.detail
    assert detail is not None
    response = audited.response
    left = _sent(detail.raw, response)
    right = _kept(detail.canonical, audited)
    return (
        f'<details class="raw-canonical" open><summary>raw vs canonical (attempt {attempt.number})</summary>'
        f'<div class="panel"><div class="sent">{left}</div><div class="kept">{right}</div></div>'
        f'<div class="how">{_how(attempt, audited)}</div></details>'
    )


def _sent(raw: RawView | None, response: ResponseAudit | None) -> str:
    if raw is None or response is None:
        return '<h3>What the provider sent</h3><p class="note">No response on record.</p>'
    marked = frozenset(response.dropped)
    rows = [
        ("HTTP", text(response.status)),
        ("content type", text(response.contentType or "none")),
        ("size", text(f"{response.bytes:,} bytes")),
        ("response id", text(response.responseId or "(none)")),
        ("model", text(response.model or "(none)")),
        ("journal line", text(response.line)),
    ]
    parts = ["<h3>What the provider sent</h3>", facts_table(rows)]
    if raw.kind == "stream":
        stream = response.stream
        events = f"{stream.events:,} events, {stream.bytes:,} bytes" if stream is not None else "an event stream"
        parts.append(f'<p class="note stream-note">An event stream ({text(events)}), shown as the body it reassembles into.</p>')
        if stream is not None and stream.problem:
            parts.append(f'<p class="bad">reassembly stopped: {text(stream.problem)}</p>')
        if raw.value is not None:
            parts.append(f'<pre class="raw-body">{json_html(raw.value, marked, BODY_BUDGET)}</pre>')
        if raw.text is not None:
            parts.append(clip_block("the stream as received", raw.text, open_=False))
        if stream is not None and stream.not_carried:
            carried = listing([f"<code>{text(path)}</code>" for path in stream.not_carried], limit=200)
            label = f"not carried into the body by reassembly ({len(stream.not_carried):,})"
            parts.append(f"<details><summary>{label}</summary>{carried}</details>")
    elif raw.kind == "json":
        parts.append(f'<pre class="raw-body">{json_html(raw.value, marked, BODY_BUDGET)}</pre>')
    elif raw.kind == "binary" and raw.text is not None:
        parts.append('<p class="note">Not UTF-8 text: the journal keeps it as base64.</p>')
        parts.append(clip_block("base64", raw.text, open_=False))
    elif raw.text is not None:
        parts.append('<p class="note">Not JSON: shown as text.</p>')
        parts.append(f'<pre class="raw-body">{escape(raw.text.text)}</pre>')
    return "".join(parts)


def _kept(canonical: object, audited: AttemptAudit) -> str:
    parts = ["<h3>What the transcript kept</h3>"]
    if canonical is not None:
        parts.append(f'<pre class="canonical">{json_html(canonical, frozenset(), BODY_BUDGET)}</pre>')
        parts.append(f"<p>stopReason <code>{text(audited.stopReason)}</code></p>")
    elif audited.failure:
        parts.append(f'<p class="bad">No message: the step failed — {text(audited.failure)}</p>')
    else:
        parts.append(f'<p class="note">No message ({text(audited.settled)}).</p>')
    return "".join(parts)


def _how(attempt: AttemptView, audited: AttemptAudit) -> str:
    response = audited.response
    rows: list[tuple[str, str]] = []
    if response is not None:
        finish = response.finishReason if response.finishReason is not None else "(none)"
        rows.append(("finish_reason → stopReason", f"<code>{text(finish)}</code> → <code>{text(response.seam)}</code>"))
        rows.append(("api", text(response.api)))
        adapters = ", ".join(response.adapters) if response.adapters else "none"
        rows.append(("adapters", text(adapters)))
        if response.adapted:
            rows.append(("adapters changed", _items(response.adapted)))
        if response.hosted:
            rows.append(("provider-side activity (hosted tools, not run by us)", _items(response.hosted)))
        dropped = [f'<mark class="dropped">{text(path)}</mark>' for path in response.dropped]
        rows.append(("dropped", listing(dropped, "plain dropped") if dropped else "nothing"))
        if response.derivation:
            rows.append(("usage derivation", f"<code>{text(response.derivation)}</code>"))
        if response.redactions:
            rows.append(("redactions", text(f"{response.redactions} secret occurrence(s) replaced before journaling")))
        if response.incomplete:
            rows.append(("ended early", f'<span class="bad">{text(response.incomplete)}</span>'))
    rows.append(("usage kept", text(usage_counts(audited.usage))))
    rows.append(("cost", text(cost_text(attempt.cost))))
    rows.append(("request", text(f"{audited.requestMessages} messages after the system prompt · {audited.requestDigest}")))
    rows.append(("configuration", text(f"{audited.adapterIdentity} · {audited.configurationDigest}")))
    if audited.notes:
        rows.append(("notes", _items(audited.notes)))
    if audited.drift:
        rows.append(("drift", f'<div class="bad">{_items(audited.drift)}</div>'))
    return facts_table(rows)


def _items(values: list[str]) -> str:
    return listing([text(value) for value in values])
