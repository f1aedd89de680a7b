"""The HTML document every page shares: inline CSS, one small script, and a Content-Security-Policy that admits only
those two by hash (docs/view.md, *Safe to open*).  Pure."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Sequence
from html import escape
from typing import Final

from tiny_agent.journal.secrets import redact_text

CSS: Final = """
:root{--fg:#1d2329;--muted:#5d6873;--line:#d9dee3;--bg:#fff;--panel:#f6f8fa;--ok:#1f7a3a;--bad:#b42318;--warn:#a15c00;
--input:#4c78a8;--cache-read:#54a24b;--cache-write:#eeca3b;--output:#e45756;--drop:#ffe08a}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;
max-width:1200px;padding:16px 20px 64px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:14px;margin:12px 0 4px}
code,pre,.mono{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--panel);border:1px solid var(--line);border-radius:4px;padding:8px;margin:4px 0;overflow:auto;
max-height:480px;white-space:pre-wrap;word-break:break-word}
table.facts{border-collapse:collapse;margin:4px 0}
table.facts th{text-align:left;color:var(--muted);font-weight:normal;padding:1px 12px 1px 0;vertical-align:top;white-space:nowrap}
table.facts td{padding:1px 0;vertical-align:top}
table.grid{border-collapse:collapse;margin:8px 0;width:100%}
table.grid th,table.grid td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right;white-space:nowrap}
table.grid th:first-child,table.grid td:first-child{text-align:left}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600;border:1px solid currentColor}
.badge.ok,.badge.completed,.badge.assistant,.badge.success,.badge.sealed,.good{color:var(--ok)}
.badge.failed,.badge.aborted,.badge.error,.badge.corrupt,.badge.drift,.bad{color:var(--bad)}
.badge.retried,.badge.open,.badge.pending,.badge.synthetic,.badge.open-tail,.badge.unsealed,.badge.folded,.warn{color:var(--warn)}
.badge.muted,.muted,.note{color:var(--muted)}
.note{font-size:12px;margin:4px 0}
details{margin:2px 0}
summary{cursor:pointer}
details.operation{border:1px solid var(--line);border-left:4px solid var(--ok);border-radius:4px;margin:8px 0;padding:4px 10px}
details.operation.failed,details.operation.aborted{border-left-color:var(--bad)}
details.operation.open{border-left-color:var(--warn)}
details.operation.compaction{border-left-color:#7f56d9;background:#faf8ff}
details.operation>summary{font-weight:600}
details.operation>summary .muted{font-weight:normal}
.step{margin:6px 0 6px 12px;padding-left:10px;border-left:2px solid var(--line)}
.attempt{margin:4px 0;padding:4px 8px;border-radius:4px;background:var(--panel)}
.attempt.failed,.attempt.aborted{background:#fef3f2}
.attempt.retried{background:#fffaeb}
.tool{margin:2px 0 2px 18px}
.panel{display:grid;grid-template-columns:1fr 1fr;gap:12px;margin-top:6px}
.panel>div{min-width:0}
@media (max-width:800px){.panel{grid-template-columns:1fr}}
mark.dropped{background:var(--drop);outline:1px solid #e0b000;border-radius:2px;color:inherit}
ul.dropped li,ul.plain li{margin:0}
ul.plain{margin:2px 0;padding-left:18px}
.key{color:#0b4f8a}.str{color:#2b5d1e}.num{color:#8a3b00}.lit{color:#6b2fa8}.cut{color:var(--muted);font-style:italic}
.folded-region{border:1px dashed var(--line);border-radius:4px;padding:6px 10px;margin:8px 0;background:var(--panel)}
svg.chart{width:100%;height:auto;display:block;margin:4px 0 8px;background:#fff}
svg .seg.input{fill:var(--input)}svg .seg.cache-read{fill:var(--cache-read)}svg .seg.cache-write{fill:var(--cache-write)}
svg .seg.output{fill:var(--output)}svg .seg.none{fill:var(--line)}
svg .bar.failed .seg,svg .bar.aborted .seg{opacity:.55}
svg .grid{stroke:var(--line);stroke-width:1}
svg .axis{font-size:11px;fill:var(--muted)}
svg .line{fill:none;stroke-width:2}
svg polyline.line.rate{stroke:var(--cache-read);stroke-width:1;stroke-dasharray:3 2}
svg polyline.line.cumulative{stroke:#1d2329}
svg circle.line{fill:#1d2329}
svg polyline.line.cost{stroke:var(--output)}
.toolbar{margin:8px 0}
.toolbar button{font:inherit;font-size:12px;margin-right:6px}
body.problems-only .attempt.assistant{display:none}
.scroll{overflow-x:auto}
svg polyline.line.solid{stroke:var(--cache-read)}
"""

SCRIPT: Final = """
(function () {
  var bar = document.getElementById("toolbar");
  if (!bar) { return; }
  bar.hidden = false;
  function setAll(open) {
    var all = document.querySelectorAll("details");
    for (var i = 0; i < all.length; i++) { all[i].open = open; }
  }
  document.getElementById("expand").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { setAll(false); });
  var only = document.getElementById("problems");
  if (only) {
    only.addEventListener("click", function () {
      var on = document.body.classList.toggle("problems-only");
      only.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }
})();
"""


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


CSP: Final = (
    "default-src 'none'; "
    f"style-src '{_hash(CSS)}'; "
    f"script-src '{_hash(SCRIPT)}'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
"""Nothing from anywhere; the page's own style and script by hash (inline ``style=`` and handlers never run)."""


def document(title: str, body: str, *, toolbar: str = "") -> str:
    """A whole HTML page, redacted (every page is made here, so no secret the process holds reaches one); ``title`` is
    plain text (escaped here), ``body`` and ``toolbar`` are HTML."""
    bar = f'<div id="toolbar" class="toolbar" hidden>{toolbar}</div>' if toolbar else ""
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n"
        f"<body>{bar}{body}<script>{SCRIPT}</script></body></html>\n"
    )
    return redact_text(page)[0]


def text(value: object) -> str:
    """Any value as escaped text."""
    return escape(str(value))


def badge(word: str, css: str | None = None) -> str:
    return f'<span class="badge {escape(css or word.replace(" ", "-"))}">{escape(word)}</span>'


def when(ms: int | None) -> str:
    """A journal timestamp as UTC: ``2026-12-03 05:24:35.242``."""
    if ms is None:
        return "?"
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}"


def clock(ms: int | None) -> str:
    """The time of day only (rows within one session): ``05:24:35.242``."""
    return when(ms)[11:] if ms is not None else "?"


def duration(start: int | None, end: int | None) -> str:
    """``61 ms``, ``1.2 s``, ``3 min 4 s``, or empty when either end is unknown."""
    if start is None or end is None or end < start:
        return ""
    ms = end - start
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def listing(values: Sequence[str], css: str = "plain", limit: int | None = None) -> str:
    """A list of ``values`` (HTML): the first ``limit`` of them, and how many more."""
    more = [f"… and {len(values) - limit:,} more"] if limit is not None and len(values) > limit else []
    return f'<ul class="{css}">' + "".join(f"<li>{value}</li>" for value in [*values[:limit], *more]) + "</ul>"


def facts_table(rows: list[tuple[str, str]]) -> str:
    """Label/value rows; labels are plain text, values are HTML."""
    cells = "".join(f"<tr><th>{escape(label)}</th><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="facts">{cells}</table>'


def grid(head: list[str], rows: list[list[str]]) -> str:
    """A table; head cells are plain text, row cells are HTML."""
    heading = "".join(f"<th>{escape(cell)}</th>" for cell in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table class="grid"><thead><tr>{heading}</tr></thead><tbody>{body}</tbody></table></div>'
