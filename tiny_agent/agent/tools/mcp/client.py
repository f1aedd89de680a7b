"""One MCP server's session on the official SDK, behind a synchronous face.

The SDK is anyio-only: one event loop runs in a thread (a blocking portal) shared by every server, holding each
session's ``async with Client`` open; a call runs as its own task, awaited in short slices so that Ctrl-C reaches the
caller (the SDK then writes ``notifications/cancelled``).  ``mode="legacy"``: the initialize handshake only (no
``server/discover`` probe); ``cache=None``: every ``tools/list`` reaches the server, and the journal.  Every failure
becomes :class:`McpFailure`, one line.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import math
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import Any, Final

import anyio
import anyio.from_thread
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tiny_agent.agent.tools.mcp.wire import WireLog, http_client, stdio_transport
from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.providers.userconfig import McpServer

CLIENT_INFO: Final = types.Implementation(name="tiny-agent", version="0.1.0")
WAIT_SLICE: Final = 0.1
"""Seconds between checks while a call runs: the journal is fed, and Ctrl-C is delivered, this often."""
SILENCED: Final = ("mcp", "mcp_types", "httpx2", "httpcore2")

for _name in SILENCED:  # the SDK logs tracebacks and warnings on stderr through the root handler otherwise
    _logger = logging.getLogger(_name)
    _logger.addHandler(logging.NullHandler())
    _logger.propagate = False


class McpFailure(Exception):
    """Why an MCP session or call failed, in one line; ``transport`` when the connection itself is gone."""

    def __init__(self, message: str, *, transport: bool = False) -> None:
        super().__init__(message)
        self.transport = transport


def single_leaf(error: BaseException) -> BaseException:
    """The one exception inside nested one-member groups (anyio task groups always group)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def describe(error: BaseException) -> McpFailure:
    """An SDK or transport exception as one line."""
    leaf = single_leaf(error)
    if isinstance(leaf, McpFailure):
        return leaf
    if isinstance(leaf, MCPError):
        transport = leaf.code == types.CONNECTION_CLOSED
        return McpFailure(f"{leaf.message} (JSON-RPC error {leaf.code})", transport=transport)
    if isinstance(leaf, OSError):
        return McpFailure(f"cannot start the server: {leaf.strerror or leaf}", transport=True)
    if isinstance(leaf, httpx2.HTTPError):
        return McpFailure(f"cannot reach the server: {type(leaf).__name__}: {leaf}", transport=True)
    return McpFailure(f"{type(leaf).__name__}: {str(leaf).splitlines()[0] if str(leaf) else 'no detail'}")


class Session:
    """One server: connect (spawn or reach, initialize, list tools) under one deadline, call, close."""

    def __init__(
        self,
        portal: anyio.from_thread.BlockingPortal,
        log: WireLog,
        config: McpServer,
        env: dict[str, str],
        headers: dict[str, str],
    ) -> None:
        self.portal, self.log, self.config, self.env, self.headers = portal, log, config, env, headers
        self.startup_timeout = config.startup_timeout
        self.tools: list[dict[str, Any]] = []
        self.identity: dict[str, Any] = {}
        """What the configuration snapshot's digests cover of the server: its info, protocol version, tools digest."""
        self.client: Client | None = None
        self._context: AbstractContextManager[Client] | None = None

    def open(self) -> None:
        """Connect; raises :class:`McpFailure` (with the server's last stderr lines) when it cannot."""
        context = self.portal.wrap_async_context_manager(self._connect())
        try:
            self.client = context.__enter__()
        except BaseException as error:
            if isinstance(single_leaf(error), KeyboardInterrupt):
                raise
            failure = describe(error)
            tail = self.log.stderr_tail()
            raise McpFailure(str(failure) + (f"; server stderr: {tail}" if tail else ""), transport=True) from None
        self._context = context

    @asynccontextmanager
    async def _connect(self) -> AsyncGenerator[Client, None]:
        async with AsyncExitStack() as stack:
            if self.config.url is not None:
                http = await stack.enter_async_context(http_client(self.log, self.headers))
                transport: Any = streamable_http_client(self.config.url, http_client=http)
            else:
                assert self.config.command is not None
                transport = stdio_transport([self.config.command, *self.config.args], self.env, self.log)
            client = Client(transport, mode="legacy", cache=None, client_info=CLIENT_INFO)
            # One deadline over spawn + initialize + tools/list, around the whole `async with`:
            # the Client enters task groups that outlive __aenter__, so a scope around that alone breaks.
            entered = False
            with anyio.CancelScope(deadline=anyio.current_time() + self.startup_timeout) as startup:
                async with client:
                    await self._list(client)
                    entered = True
                    startup.deadline = math.inf
                    yield client
            if not entered:
                raise McpFailure(f"no answer to initialize and tools/list within {self.startup_timeout:g} s", transport=True)

    async def _list(self, client: Client) -> None:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever is cut off
            page = await client.list_tools(cursor=cursor)
            tools += [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        info = client.server_info
        self.tools = tools
        self.identity = {
            "serverInfo": {"name": info.name, "version": info.version} if info else {},
            "protocolVersion": str(client.protocol_version),
            "toolsDigest": canonical_digest(tools),
        }

    def call(self, name: str, arguments: dict[str, Any], timeout: float, tick: Callable[[], None]) -> types.CallToolResult:
        """tools/call; the SDK cancels it per the protocol at ``timeout``; ``tick`` runs between waits."""
        client = self.client
        if client is None:
            raise McpFailure("the session is closed", transport=True)
        future = self.portal.start_task_soon(lambda: client.call_tool(name, arguments, read_timeout_seconds=timeout))
        try:
            while not concurrent.futures.wait([future], timeout=WAIT_SLICE).done:
                tick()
            return future.result()
        except KeyboardInterrupt:
            future.cancel()  # the task is cancelled in the loop: the SDK writes notifications/cancelled
            with suppress(BaseException):
                future.exception(timeout=2.0)
            raise
        except concurrent.futures.CancelledError:
            raise McpFailure("the call was cancelled", transport=True) from None
        except MCPError as error:
            if error.code == types.REQUEST_TIMEOUT:
                raise McpFailure(f"no answer within {timeout:g} s; the call was cancelled (notifications/cancelled)") from None
            raise describe(error) from None
        except Exception as error:  # a result the SDK cannot parse or validate, a transport error: one line
            raise describe(error) from None

    def close(self) -> str | None:
        """Shut the server down (stdio: close stdin, SIGTERM, SIGKILL; HTTP: DELETE); why it had failed, if it had."""
        context, self._context, self.client = self._context, None, None
        if context is None:
            return None
        try:
            context.__exit__(None, None, None)
        except Exception as error:
            return str(describe(error))
        return None


def summarise(result: types.CallToolResult) -> str:
    """The result as text for the model: text kept, other content named (its bytes are in the journal)."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 characters; kept in the journal]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri} ({block.name}{', ' + block.mime_type if block.mime_type else ''})]")
        elif isinstance(block, types.EmbeddedResource):
            inner = block.resource
            size = len(inner.text) if isinstance(inner, types.TextResourceContents) else len(inner.blob)
            kind = "text" if isinstance(inner, types.TextResourceContents) else "base64"
            parts.append(f"[embedded resource {inner.uri}, {size} {kind} characters; kept in the journal]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)
