"""What driving a session needs besides its journal: the configuration, the tools, the provider, the policy.

Built once per command from today's flags; the driver asks it for each step's configuration (a run's or a
compaction's), the planner's ``current`` input, and the request in the session's wire API.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import msgspec
from msgspec import UNSET

from tiny_agent.agent import compaction
from tiny_agent.agent.configuration import Configuration
from tiny_agent.agent.instructions import Instructions
from tiny_agent.agent.recovery import CurrentConfiguration
from tiny_agent.agent.tools.toolbox import Approver, ToolBox
from tiny_agent.errors import UsageError
from tiny_agent.journal.partial import in_memory
from tiny_agent.journal.secrets import remember
from tiny_agent.journal.state import CompactionOperation, GitState, SentOptions, SessionState
from tiny_agent.journal.transcript import Message, ToolMessage, UserMessage
from tiny_agent.providers.http import Limits, Provider
from tiny_agent.wire.chat.adapters import EMPTY_CONTENT
from tiny_agent.wire.registry import API, Api, parse_adapter_identity
from tiny_agent.wire.request import TOOL_CHOICES, RequestOptions, WireRequest

if TYPE_CHECKING:
    from tiny_agent.agent.tools.mcp.hub import McpApprover, McpTools
    from tiny_agent.providers.endpoint import Endpoint
    from tiny_agent.providers.userconfig import McpServer

ENVIRONMENT_IDENTITY_ENV: Final = "TINY_AGENT_ENVIRONMENT_IDENTITY"


def environment_identity(cwd: Path) -> str:
    """``$TINY_AGENT_ENVIRONMENT_IDENTITY`` (trimmed) if set, else the working directory's real path."""
    configured = os.environ.get(ENVIRONMENT_IDENTITY_ENV, "").strip()
    return configured or os.path.realpath(cwd)


def git_state(cwd: Path) -> GitState | None:
    """The commit checked out where ``cwd`` is and whether the tree differs from it (untracked files count);
    None without git, outside a repository, before its first commit, or when git takes over 10 seconds."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain=v2", "--branch"],
            cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL, timeout=10, check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    commit = next((line[len("# branch.oid ") :] for line in lines if line.startswith("# branch.oid ")), "(initial)")
    if done.returncode != 0 or commit == "(initial)":
        return None
    return GitState(commit=commit, dirty=any(not line.startswith("#") for line in lines))



class Policy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a run talks to the model: streaming, the token cap, retries, and the step limit."""

    stream: bool = False
    stream_usage: bool = True
    """Chat Completions: ask for usage in the stream (``stream_options.include_usage``)."""
    max_tokens: int | None = None
    tool_choice: str | None = None
    """``--tool-choice``: auto, none, required or a tool's name (a forced call is asked for until the run has one)."""
    max_attempts: int = 3
    """Attempts per model step, transport retries included."""
    retry_wait: float = 1.0
    """The first backoff, doubled per retry, with jitter; ``Retry-After`` wins when the provider sends it."""
    retry_wait_cap: float = 30.0
    retry_after_cap: float = 120.0
    max_steps: int = 50
    """Model steps per run; at the limit the run stops inside the contract."""


class CompactionPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When and how tiny-agent compacts a session (docs/compaction.md)."""

    context_window: int | None = None
    """Tokens the model takes; None: unknown until a context-length error states it."""
    threshold: float = compaction.DEFAULT_THRESHOLD
    """Compact before a request whose estimated context passes this share of the window."""
    keep_tokens: int | None = None
    """The kept tail's budget; None: a fifth of the window."""
    instructions: str = ""
    """The user's guidance for the summary (``compact "..."``, chat's ``/compact TEXT``)."""
    auto: bool = True
    """Compact on its own (before a run, during one, after a context-length error); --no-auto-compact."""


class Display(Protocol):
    """What a terminal shows while a run is live (the CLI supplies one; nothing is shown without it)."""

    def model_started(self, api: str, streamed: bool) -> None: ...

    def model_bytes(self, chunk: bytes) -> None: ...

    def model_finished(self) -> None: ...

    def interrupted(self) -> None: ...


@dataclass
class Runtime:
    """What driving a session needs besides its journal: configuration, tools, and a provider on demand."""

    configuration: Configuration
    toolbox: ToolBox
    connect: Callable[[], Provider] | None
    _: KW_ONLY
    api: Api = "chat"
    policy: Policy = Policy()
    compacting: CompactionPolicy = CompactionPolicy()
    display: Display | None = None
    mcp: McpTools | None = None

    def __post_init__(self) -> None:
        self._provider: Provider | None = None
        self.sizing = compaction.Sizing(self.compacting.context_window)

    def configuration_for(self, state: SessionState) -> Configuration:
        """A run's steps use the session's configuration; a compaction's, the summary prompt and no tools."""
        if not isinstance(state.operation, CompactionOperation):
            return self.configuration
        return msgspec.structs.replace(
            self.configuration,
            system_prompt=compaction.SUMMARY_PROMPT,
            tools=[],
            output_options=dict(compaction.OUTPUT_OPTIONS),
            instructions=[],
            instructions_section="",
        )

    def current(self, state: SessionState) -> CurrentConfiguration:
        """The planner's ``current`` for the session's open operation."""
        configuration = self.configuration_for(state)
        return CurrentConfiguration(
            configurationDigest=configuration.digest,
            environmentIdentity=configuration.environment_identity,
            tools=list(self.configuration.tools),
            maxAttempts=self.policy.max_attempts,
            maxSteps=self.policy.max_steps,
            contextFull=self.context_full(state),
        )

    def fixed_chars(self) -> int:
        """Characters every run request carries besides its messages: the system prompt and the tools."""
        tools = sum(len(msgspec.json.encode(spec.to_wire())) for spec in self.toolbox.specs())
        return len(self.configuration.prompt) + tools

    def context_tokens(self, state: SessionState, extra: str = "") -> int:
        """The next run request's estimated size in tokens (with ``extra`` more characters)."""
        return self.sizing.tokens(state, self.fixed_chars()) + self.sizing.to_tokens(len(extra))

    def context_full(self, state: SessionState, extra: str = "") -> bool:
        """Automatic compaction is on, the window known, and the context estimated past its share of it."""
        window = self.sizing.window
        if not self.compacting.auto or window is None:
            return False
        return self.context_tokens(state, extra) > window * self.compacting.threshold

    def fullness(self, state: SessionState, extra: str = "") -> str:
        """Why an automatic compaction starts, and how to turn it off."""
        tokens = self.context_tokens(state, extra)
        return f"the context is ~{tokens:,} tokens of {self.sizing.describe()} (--no-auto-compact turns this off)"

    def summary_fixed_chars(self) -> int:
        return len(compaction.SUMMARY_PROMPT) + len(compaction.instruction(self.compacting.instructions)) + 64

    def request(self, state: SessionState) -> WireRequest:
        """The request for the open step, in this runtime's wire API (its size noted for the estimates)."""
        configuration = self.configuration_for(state)
        build, policy = API[self.api].request, self.policy
        max_tokens = policy.max_tokens
        if isinstance(state.operation, CompactionOperation):
            retained = len(state.pendingCut.retained) if state.pendingCut is not None else 0
            elide = self.sizing.elide_chars(self.summary_fixed_chars())
            messages = compaction.summary_messages(state.activeContext, retained, self.compacting.instructions, elide)
            reserve = self.sizing.reserve
            max_tokens = reserve if max_tokens is None or reserve is not None and reserve < max_tokens else max_tokens
            tools = []
            self.sizing.sent = len(configuration.prompt) + compaction.size(messages)
        else:
            messages, tools = state.activeContext, self.toolbox.specs()
            if self.api == "anthropic":
                # Anthropic asks that a refused turn not be sent back as it was (docs/api-mappings.md).
                refused = {id(entry.message) for entry in in_memory(state.entries) if entry.stopReason == "refusal"}
                messages = [message for message in messages if id(message) not in refused] if refused else messages
            self.sizing.sent = self.fixed_chars() + compaction.size(messages)
        options = RequestOptions(
            max_tokens=max_tokens,
            stream=policy.stream,
            stream_usage=policy.stream_usage,
            tool_choice=_tool_choice(policy.tool_choice, state.activeContext),
            empty_content=EMPTY_CONTENT in parse_adapter_identity(configuration.adapter_identity).adapters,
        )
        return build(configuration.model, configuration.prompt, messages, tools, options)

    def provider(self) -> Provider:
        """The provider, connected on first use (a recovery may never need one)."""
        if self._provider is None:
            if self.connect is None:
                raise RuntimeError("this drive has no provider configured")
            self._provider = self.connect()
        return self._provider

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
            self.mcp = None
        if self._provider is not None:
            self._provider.close()
            self._provider = None


def _tool_choice(choice: str | None, context: Sequence[Message]) -> str | None:
    """A forced choice (required, or a tool's name) until the run's first tool result; then auto, so a run can end."""
    if choice in (None, "auto", "none"):
        return choice
    for message in reversed(context):
        if isinstance(message, UserMessage):
            return choice
        if isinstance(message, ToolMessage):
            return "auto"
    return choice


def build_runtime(
    endpoint: Endpoint,
    *,
    system_prompt: str,
    cwd: Path,
    allow_bash: bool = False,
    allow_write: bool = False,
    approve: Approver | None = None,
    protected: Sequence[Path] = (),
    policy: Policy = Policy(),
    compacting: CompactionPolicy = CompactionPolicy(),
    limits: Limits = Limits(),
    display: Display | None = None,
    instructions: Instructions = Instructions(),
    mcp_servers: Sequence[McpServer] = (),
    allow_mcp: Sequence[str] = (),
    approve_mcp: McpApprover | None = None,
) -> Runtime:
    """The runtime for a session driven from ``cwd`` against ``endpoint``, offering ``instructions``; MCP servers start here."""
    remember(endpoint.secrets())
    mcp: McpTools | None = None
    if mcp_servers:
        from tiny_agent.agent.tools.mcp.hub import McpTools  # the SDK's import costs ~0.5 s: only when used

        mcp = McpTools(mcp_servers, allow=allow_mcp, approve=approve_mcp)
    toolbox = ToolBox(
        cwd,
        allow_bash=allow_bash,
        allow_write=allow_write,
        approve=approve,
        protected=protected,
        readable=instructions.readable,
        more=mcp,
    )
    names = [tool.name for tool in toolbox.declarations()]
    if policy.tool_choice not in (None, *TOOL_CHOICES, *names):
        offered = ", ".join(names) or "none"
        raise UsageError(f"--tool-choice is auto, none, required or an offered tool ({offered}), not {policy.tool_choice!r}")
    chosen = SentOptions(
        maxTokens=UNSET if policy.max_tokens is None else policy.max_tokens,
        toolChoice=UNSET if policy.tool_choice is None else policy.tool_choice,
        stream=policy.stream,
    )
    output_options = {name: value for name, value in msgspec.to_builtins(chosen).items() if name != "stream"}
    configuration = Configuration(
        model=endpoint.model,
        system_prompt=system_prompt,
        tools=toolbox.declarations(),
        routing_identity=endpoint.routing_identity,
        environment_identity=environment_identity(cwd),
        git=git_state(cwd),
        adapter_identity=endpoint.adapter_identity,
        output_options=output_options,
        instructions=instructions.offered,
        instructions_section=instructions.section,
        request_options=chosen,
    )

    def connect() -> Provider:
        from tiny_agent.providers.http import HttpProvider

        endpoint.require_key()
        return HttpProvider(endpoint, limits)

    return Runtime(
        configuration, toolbox, connect, api=endpoint.api, policy=policy, compacting=compacting, display=display, mcp=mcp
    )
