"""MCP messages as one line each, for ``audit`` and ``view``: what crossed the wire, read back from ``mcp`` facts.

Pure: the bytes are the journal's; an SSE body is split into its ``data:`` messages.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import UNSET

from tiny_agent.journal.facts import McpFact, McpMessage

WIDTH = 100


def mcp_lines(fact: McpFact) -> list[str]:
    """Each message of the fact: ``server → method`` for what was sent, ``server ← ...`` for what came back."""
    lines: list[str] = []
    for message in fact.messages:
        arrow = "→" if message.direction == "send" else "←"
        http = f"{message.method} " if message.method is not UNSET else ""
        if message.status is not UNSET:
            http = f"HTTP {message.status} "
        notes = [f"{message.redactions} redacted"] if message.redactions is not UNSET else []
        if message.incomplete is not UNSET:
            notes.append(f"incomplete: {message.incomplete}")
        suffix = f" ({'; '.join(notes)})" if notes else ""
        described = [describe(value) for value in _messages(message)] or ["(no JSON-RPC message)"]
        lines += [f"{fact.server} {arrow} {http}{text}{suffix}" for text in described]
    return lines


def _messages(message: McpMessage) -> list[Any]:
    if message.body is UNSET:
        return []
    body = message.body
    texts = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")] if "data:" in body else [body]
    found = []
    for text in texts:
        try:
            found.append(json.loads(text))
        except ValueError:
            if text.strip():
                found.append({"unparsed": text})
    return found


def describe(value: Any) -> str:
    """One JSON-RPC message, briefly."""
    if type(value) is not dict:
        return one_line(json.dumps(value, ensure_ascii=False))
    if "unparsed" in value:
        return f"not JSON: {one_line(value['unparsed'])}"
    ident = f" (id {value['id']})" if "id" in value else ""
    params: dict[str, Any] = value["params"] if type(value.get("params")) is dict else {}
    if "method" in value:
        name = f" {params.get('name')}" if value["method"] == "tools/call" else ""
        arguments = f" {one_line(json.dumps(params.get('arguments', {}), ensure_ascii=False))}" if name else ""
        return f"{value['method']}{name}{ident}{arguments}"
    if type(value.get("error")) is dict:
        return f"error {value['error'].get('code')}{ident}: {one_line(str(value['error'].get('message')))}"
    result: dict[str, Any] = value["result"] if type(value.get("result")) is dict else {}
    if "serverInfo" in result:
        info = result["serverInfo"]
        return f"initialized{ident}: {info.get('name')} {info.get('version')}, protocol {result.get('protocolVersion')}"
    if type(result.get("tools")) is list:
        return f"{len(result['tools'])} tools{ident}"
    if type(result.get("content")) is list:
        kinds = [item.get("text") if item.get("type") == "text" else f"[{item.get('type')}]" for item in result["content"]]
        failed = "error result" if result.get("isError") else "result"
        return f"{failed}{ident}: {one_line(' '.join(str(kind) for kind in kinds))}"
    return f"result{ident}: {one_line(json.dumps(result, ensure_ascii=False))}"


def one_line(text: str, width: int = WIDTH) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``width`` with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
