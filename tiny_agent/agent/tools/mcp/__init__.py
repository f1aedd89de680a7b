"""MCP servers as tools (docs/tools.md, "MCP servers"): which servers, and what their tools are called.

Pure and light: the SDK (``import mcp`` costs about half a second) is imported by
:mod:`tiny_agent.agent.tools.mcp.hub` only, and only when a server is configured.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from tiny_agent.errors import UsageError
from tiny_agent.providers.userconfig import McpServer

NAME_LIMIT: Final = 64
"""The longest function name every wire API accepts (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``)."""
SCHEMA_BYTES: Final = 32 * 1024
SCHEMA_DEPTH: Final = 16
_NAMED: Final = re.compile(r"([a-z0-9][a-z0-9._-]*)=(.+)", re.DOTALL)


def servers_from_flags(values: Iterable[str], configured: Mapping[str, McpServer]) -> list[McpServer]:
    """``--mcp`` values: a configured name, ``[NAME=]URL`` (Streamable HTTP) or ``[NAME=]COMMAND`` (stdio)."""
    servers: list[McpServer] = []
    for value in values:
        if value in configured:
            server = configured[value]
        else:
            named = _NAMED.fullmatch(value)
            name, target = (named[1], named[2]) if named else ("", value)
            if target.startswith(("http://", "https://")):
                server = McpServer(name=name or _clean(urlsplit(target).hostname or "http"), url=target)
            else:
                try:
                    argv = shlex.split(target)
                except ValueError as error:
                    raise UsageError(f"--mcp {value!r}: {error}") from None
                if not argv:
                    raise UsageError("--mcp needs a configured server name, a URL or a command")
                server = McpServer(name=name or _clean(argv[0].rsplit("/", 1)[-1]), command=argv[0], args=tuple(argv[1:]))
        taken = {known.name for known in servers}
        if server.name in taken:
            if value in configured or _NAMED.fullmatch(value):
                raise UsageError(f"--mcp: the server name {server.name!r} is given twice")
            fresh = next(f"{server.name}{n}" for n in range(2, 100) if f"{server.name}{n}" not in taken)
            server = msgspec.structs.replace(server, name=fresh)
        servers.append(server)
    return servers


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "server"


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``mcp__SERVER__TOOL``, sanitised to ``[A-Za-z0-9_-]``; cut to 64 characters with a hash when long or taken."""
    name = f"mcp__{_clean(server)}__{_clean(tool)}"
    if len(name) > NAME_LIMIT or name in taken:
        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
        name = f"{name[: NAME_LIMIT - 9]}_{digest[:8]}"
    taken.add(name)
    return name


def schema_problem(schema: Any) -> str | None:
    """Why an ``inputSchema`` is not passed to the model (too big, too deep, not an object schema), or None."""
    if type(schema) is not dict or schema.get("type") != "object":
        return 'its inputSchema is not a JSON Schema of "type": "object"'
    size = len(msgspec.json.encode(schema))
    if size > SCHEMA_BYTES:
        return f"its inputSchema is {size} bytes (the limit is {SCHEMA_BYTES})"
    if _depth(schema) > SCHEMA_DEPTH:
        return f"its inputSchema nests deeper than {SCHEMA_DEPTH} levels"
    return None


def _depth(value: Any, level: int = 1) -> int:
    if level > SCHEMA_DEPTH:
        return level
    children = value.values() if type(value) is dict else value if type(value) is list else ()
    return max((_depth(child, level + 1) for child in children), default=level)
