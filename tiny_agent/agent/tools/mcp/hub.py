"""The MCP servers of a run: their tools offered, approved, called, and every byte journaled (docs/tools.md, "MCP servers")."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import anyio.from_thread
import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.agent.tools.mcp import schema_problem, tool_name
from tiny_agent.agent.tools.mcp.client import McpFailure, Session, summarise
from tiny_agent.agent.tools.mcp.wire import Captured, WireLog
from tiny_agent.agent.tools.toolbox import REASONS, Answer, ask, at_terminal, printable
from tiny_agent.errors import ConfigError, McpUnavailable
from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.facts import McpFact, McpMessage
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.secrets import Secrets, remember, url_secrets
from tiny_agent.journal.state import SessionState
from tiny_agent.journal.tools import ToolDeclaration, ToolOutcome, ToolSpec
from tiny_agent.journal.transcript import ToolMessage
from tiny_agent.providers.http import body_fields
from tiny_agent.providers.userconfig import McpServer, expand_references

T = TypeVar("T")
RESULT_LIMIT: Final = 64 * 1024
RECONNECTS: Final = 2
ALWAYS: Final = "approved by the user: always for this server"
McpApprover = Callable[[str, str, dict[str, Any]], Answer]
"""Asked (server, tool, arguments) when a tool is not allowed up front."""


class _Tool(msgspec.Struct, frozen=True):
    server: str
    name: str
    spec: ToolSpec
    declaration: ToolDeclaration


class _Server:
    def __init__(self, config: McpServer, portal: anyio.from_thread.BlockingPortal, environ: Mapping[str, str]) -> None:
        self.config = config
        self.log = WireLog()
        self.secrets: list[str] = url_secrets(config.url) if config.url else []
        where = f"MCP server {config.name}"
        env = {key: self._expand(value, environ, f"{where}: env {key}") for key, value in config.env.items()}
        headers = {key: self._expand(value, environ, f"{where}: header {key}") for key, value in config.headers.items()}
        self.session = Session(portal, self.log, config, env, headers)
        self.reconnects = 0
        self.broken = False

    def _expand(self, value: str, environ: Mapping[str, str], what: str) -> str:
        expanded, used = expand_references(value, environ, what)
        self.secrets += used
        return expanded


class McpTools:
    """The configured servers' tools, as the ToolBox offers and runs them."""

    def __init__(
        self,
        servers: Sequence[McpServer],
        *,
        allow: Sequence[str] = (),
        approve: McpApprover | None = None,
        report: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        unknown = sorted(set(allow) - {server.name for server in servers})
        if unknown:
            raise ConfigError(f"--allow-mcp {unknown[0]}: no --mcp server has that name")
        self.allow = frozenset(allow)
        self.approve = approve
        self.report = report or (lambda line: print(line, file=sys.stderr))
        self.always: set[str] = set()
        self.commit: Callable[[list[McpFact]], object] | None = None
        self.tools: dict[str, _Tool] = {}
        self._portal_context = anyio.from_thread.start_blocking_portal()
        portal = self._portal_context.__enter__()
        self.servers: dict[str, _Server] = {}
        try:
            for config in servers:
                server = _Server(config, portal, os.environ if environ is None else environ)
                self.servers[config.name] = server
                try:
                    server.session.open()
                except McpFailure as failure:
                    raise McpUnavailable(f"MCP server {config.name}: {failure}") from None
                self._offer(server)
        except BaseException:
            self.close()
            raise
        remember(Secrets(value for server in self.servers.values() for value in server.secrets))

    def _offer(self, server: _Server) -> None:
        name = server.config.name
        identity = {"server": name, **server.session.identity}
        taken = set(self.tools)
        for tool in server.session.tools:
            problem = schema_problem(tool.get("inputSchema"))
            if (tool.get("execution") or {}).get("taskSupport") == "required":
                problem = "it runs only as a task, which tiny-agent does not offer"
            if problem is not None:
                self.report(f"mcp: {name}: tool {tool['name']} is not offered: {problem}")
                continue
            public = tool_name(name, tool["name"], taken)
            spec = ToolSpec(public, tool.get("description") or tool["name"], tool["inputSchema"], "never", f"mcp:{name}:v1")
            # The digest covers the server's identity and whole tool list: a changed server changes the configuration.
            digest = canonical_digest({"definition": spec.definition, "server": identity})
            declaration = ToolDeclaration(name=public, definitionDigest=digest, replay="never", replayKey=spec.replay_key)
            self.tools[public] = _Tool(name, tool["name"], spec, declaration)

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    def declarations(self) -> list[ToolDeclaration]:
        return [tool.declaration for tool in self.tools.values()]

    def attach(self, commit: Callable[[list[McpFact]], object], state: SessionState) -> None:
        """Journal through ``commit`` from now on (start-up messages first); recall "always" answers on record."""
        if state.version < 3:
            self.report("mcp: this is a v2 journal, which has no mcp facts: the MCP messages are not journaled")
        self.commit = commit if state.version >= 3 else None
        for message in state.transcript:
            if type(message) is ToolMessage and isinstance(message.content, str) and message.content.startswith("[mcp "):
                server, _, reason = message.content[5:].partition("]")[0].partition(": ")
                if reason == ALWAYS:
                    self.always.add(server)
        self.flush()

    def execute(self, name: str, arguments: dict[str, Any], link: str | None) -> ToolOutcome:
        tool = self.tools[name]
        server = self.servers[tool.server]
        allowed, reason = self._decide(tool, arguments)
        if not allowed:
            self.report(f"mcp: not running {tool.server}/{tool.name}: {reason}")
            return ToolOutcome(content=f"Error: {name} was not run: {reason}", ok=False)
        try:
            if server.broken:
                self._reconnect(server)
            result = server.session.call(tool.name, arguments, server.config.call_timeout, lambda: self.flush(link))
        except McpFailure as failure:
            server.broken = server.broken or failure.transport
            return ToolOutcome(content=f"[mcp {tool.server}: {reason}]\nError: MCP server {tool.server}: {failure}", ok=False)
        finally:
            self.flush(link)
        text = summarise(result)
        if len(text) > RESULT_LIMIT:
            text = f"{text[:RESULT_LIMIT]}\n[result truncated at {RESULT_LIMIT // 1024} KiB; the journal keeps all of it]"
        prefix = f"[mcp {tool.server}: {reason}]\n" + ("Error: " if result.is_error else "")
        return ToolOutcome(content=prefix + text, ok=not result.is_error)

    def _decide(self, tool: _Tool, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Whether the call may run, and why (the reason goes into the result, so the journal keeps it)."""
        allowed = self.servers[tool.server].config.allowed_tools
        if tool.name in allowed or "*" in allowed:
            return True, "allowed by the config (allowed_tools)"
        if tool.server in self.allow:
            return True, f"allowed by --allow-mcp {tool.server}"
        if tool.server in self.always:
            return True, ALWAYS
        if self.approve is None:
            return False, f"not in {tool.server}'s allowed_tools, no --allow-mcp {tool.server}, and no terminal to ask"
        answer = self.approve(tool.server, tool.name, arguments)
        if answer == "always":
            self.always.add(tool.server)
            return True, ALWAYS
        return answer == "yes", REASONS[answer]

    def _reconnect(self, server: _Server) -> None:
        if server.reconnects >= RECONNECTS:
            raise McpFailure(f"the connection failed and {RECONNECTS} reconnections were used up", transport=True)
        server.reconnects += 1
        known = server.session.identity
        server.session.close()
        server.session.open()
        server.broken = server.session.identity != known
        if server.broken:
            raise McpFailure("the server came back with other tools or another identity; not calling it", transport=True)

    def flush(self, link: str | None = None, everything: bool = False) -> None:
        """Commit what the servers exchanged since the last flush (one ``mcp`` fact per server)."""
        if self.commit is None:
            return
        facts = []
        for name, server in self.servers.items():
            records = server.log.drain(everything)
            if records:
                messages = [self._message(record) for record in records]
                facts.append(McpFact(id=uuid7(), server=name, toolStartedId=UNSET if link is None else link, messages=messages))
        if facts:
            self.commit(facts)

    def _message(self, record: Captured) -> McpMessage:
        text, encoded = body_fields(record.data)  # redacted by the journal's writer, as every fact
        incomplete = record.incomplete if record.done else "still open when the session closed"
        return McpMessage(
            direction=record.direction,
            method=_given(record.method),
            url=_given(record.url),
            status=_given(record.status),
            contentType=UNSET if record.status is None else record.content_type,
            body=text,
            bodyBase64=encoded,
            incomplete=_given(incomplete),
        )

    def close(self) -> None:
        """Shut every server down; then journal what is left (shutdown messages, streams cut short)."""
        for name, server in self.servers.items():
            failure = server.session.close()
            if failure is not None and not server.broken:
                self.report(f"mcp: {name}: {failure}")
        self._portal_context.__exit__(None, None, None)
        try:
            self.flush(everything=True)
        except Exception as error:  # the outcome is durable already; a full disk must not hide it
            self.report(f"mcp: the shutdown messages were not journaled: {error}")
        self.commit = None


def _given(value: T | None) -> T | UnsetType:
    return UNSET if value is None else value


def ask_on_terminal(server: str, tool: str, arguments: dict[str, Any]) -> Answer:
    """Ask on stderr, read stdin: ``y`` once, ``a`` always for this server, anything else declines."""
    shown = printable(json.dumps(arguments, ensure_ascii=False))
    shown = shown if len(shown) <= 2000 else shown[:2000] + f" [{len(shown) - 2000} more characters]"
    question = f"tiny-agent: the model asks to run MCP tool {printable(tool)} of server {server} with {shown}"
    return ask(question, "Run it? [y = yes / a = always for this server / N = no] ")


def terminal_approver() -> McpApprover | None:
    """:func:`ask_on_terminal` at a terminal; None otherwise (unlisted tools are refused)."""
    return ask_on_terminal if at_terminal() else None
