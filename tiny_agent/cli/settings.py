"""The options shared by the commands that drive a session, and what they resolve to.

Flags first, then environment variables, then the user's config file, then
what the session itself recorded (its profile, base URL and model), then the
profile's defaults.  Everything here runs before a session is created or a
byte is written, so a bad flag or a missing key leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import typer

from tiny_agent.errors import UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.agent.loop import Policy
    from tiny_agent.agent.runtime import CompactionPolicy
    from tiny_agent.journal.state import SessionState
    from tiny_agent.providers.endpoint import Endpoint, RoutingTarget
    from tiny_agent.providers.http import Timeouts
    from tiny_agent.stores.journal import Durability

ProviderOption = typer.Option(
    None,
    "--provider",
    metavar="NAME",
    help="A provider profile (`tiny-agent providers` lists them; default: $TINY_AGENT_PROVIDER).",
    show_default=False,
)
ModelOption = typer.Option(
    None,
    "--model",
    metavar="MODEL",
    help="Model id (default: $TINY_AGENT_MODEL, the config file, the session's).",
    show_default=False,
)
BaseUrlOption = typer.Option(
    None,
    "--base-url",
    metavar="URL",
    help="The API's base URL (default: $TINY_AGENT_BASE_URL, else the profile's).",
    show_default=False,
)
ApiOption = typer.Option(
    None, "--api", metavar="API", help="For --provider custom: chat, anthropic or responses.", show_default=False
)
SystemOption = typer.Option(None, "--system", metavar="FILE", help="A file holding the system prompt.", show_default=False)
AllowBashOption = typer.Option(False, "--allow-bash", help="Offer the bash tool (sandboxed with bubblewrap when available).")
AllowWriteOption = typer.Option(False, "--allow-write", help="Let the write tool change files without asking.")
StreamOption = typer.Option(
    None, "--stream/--no-stream", help="Stream the answer (default: where the provider supports it).", show_default=False
)
MaxTokensOption = typer.Option(
    None, "--max-tokens", min=1, metavar="N", help="Cap the tokens of each answer.", show_default=False
)
RetriesOption = typer.Option(
    3, "--retries", min=1, max=16, metavar="N", help="Attempts per model step, for 429, 5xx, timeouts and refused connections."
)
RetryWaitOption = typer.Option(
    1.0, "--retry-wait", min=0.0, metavar="SECONDS", help="First backoff in seconds (doubled per retry, with jitter)."
)
MaxStepsOption = typer.Option(
    50, "--max-steps", min=1, metavar="N", help="Model requests per run before it stops inside the contract."
)
DurabilityOption = typer.Option(
    "fsync",
    "--durability",
    metavar="fsync|process",
    help="fsync: every commit survives power loss; process: it survives a crash (faster).",
)
ConnectTimeoutOption = typer.Option(
    None,
    "--connect-timeout",
    metavar="SECONDS",
    help="Seconds to wait for a connection (default: $TINY_AGENT_CONNECT_TIMEOUT, else 10).",
    show_default=False,
)
ReadTimeoutOption = typer.Option(
    None,
    "--read-timeout",
    metavar="SECONDS",
    help="Seconds to wait for a response to start or for more of a whole body (default: $TINY_AGENT_READ_TIMEOUT, else 600).",
    show_default=False,
)
ContextWindowOption = typer.Option(
    None,
    "--context-window",
    metavar="TOKENS",
    min=256,
    help="The model's context window in tokens (default: the config file's, else known model families).",
    show_default=False,
)
CompactAtOption = typer.Option(
    0.8,
    "--compact-at",
    min=0.1,
    max=1.0,
    metavar="SHARE",
    help="Compact when the estimated context passes this share of the window.",
)
StreamIdleTimeoutOption = typer.Option(
    None,
    "--stream-idle-timeout",
    metavar="SECONDS",
    help="Seconds a stream may stall between bytes (default: $TINY_AGENT_STREAM_IDLE_TIMEOUT, else 120).",
    show_default=False,
)


class DriveOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a driving command was asked for, as given (None: not given)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api: str | None = None
    system: str | None = None
    allow_bash: bool = False
    allow_write: bool = False
    stream: bool | None = None
    max_tokens: int | None = None
    retries: int = 3
    retry_wait: float = 1.0
    max_steps: int = 50
    durability: str = "fsync"
    connect_timeout: float | None = None
    read_timeout: float | None = None
    stream_idle_timeout: float | None = None
    context_window: int | None = None
    compact_at: float = 0.8
    keep: int | None = None


def drive_options(parameters: Mapping[str, Any]) -> DriveOptions:
    """The driving flags among a command's parameters (``drive_options(locals())``, first thing in the command).

    run, resume, chat and compact take these flags under the names of
    DriveOptions' fields; picking them by name keeps each command from listing
    all of them a second time.
    """
    return DriveOptions(**{name: parameters[name] for name in DriveOptions.__struct_fields__ if name in parameters})


def endpoint_for(options: DriveOptions, recorded: RoutingTarget | None, *, require_key: bool) -> Endpoint:
    """Choose the provider profile, base URL, model and key (the key only for its own host)."""
    from tiny_agent.providers.profiles import api_named
    from tiny_agent.providers.selection import Requested, select_endpoint
    from tiny_agent.providers.userconfig import load_user_config

    requested = Requested(
        provider=options.provider,
        base_url=options.base_url,
        model=options.model,
        api=api_named(options.api) if options.api else None,
    )
    return select_endpoint(requested, os.environ, load_user_config(os.environ), recorded=recorded, require_key=require_key)


def policy_for(options: DriveOptions, endpoint: Endpoint) -> Policy:
    from tiny_agent.agent.loop import Policy

    profile = endpoint.profile
    stream = profile.streaming if options.stream is None else options.stream
    return Policy(
        stream=stream,
        stream_usage=profile.stream_usage,
        max_tokens=options.max_tokens if options.max_tokens is not None else profile.max_tokens,
        max_attempts=options.retries,
        retry_wait=options.retry_wait,
        max_steps=options.max_steps,
    )


def compacting_for(options: DriveOptions, endpoint: Endpoint) -> CompactionPolicy:
    """When to compact: the window from the flag, the config file's model table, or the known families."""
    from tiny_agent.agent import compaction
    from tiny_agent.agent.runtime import CompactionPolicy
    from tiny_agent.providers.userconfig import load_user_config

    configured = options.context_window
    if configured is None:
        settings = load_user_config(os.environ).model_settings(endpoint.model)
        configured = settings.context_window if settings is not None else None
    return CompactionPolicy(
        context_window=compaction.window_for(endpoint.model, configured),
        threshold=options.compact_at,
        keep=options.keep if options.keep is not None else compaction.DEFAULT_KEEP,
    )


def timeouts_for(options: DriveOptions) -> Timeouts:
    """Flags first, then the environment, then the defaults (long: slow local models need them)."""
    from tiny_agent.providers.http import Timeouts

    defaults = Timeouts()
    return Timeouts(
        connect=_seconds("--connect-timeout", options.connect_timeout, "TINY_AGENT_CONNECT_TIMEOUT", defaults.connect),
        read=_seconds("--read-timeout", options.read_timeout, "TINY_AGENT_READ_TIMEOUT", defaults.read),
        stream_idle=_seconds(
            "--stream-idle-timeout", options.stream_idle_timeout, "TINY_AGENT_STREAM_IDLE_TIMEOUT", defaults.stream_idle
        ),
    )


def _seconds(flag: str, value: float | None, variable: str, default: float) -> float:
    if value is None:
        text = os.environ.get(variable)
        if not text:
            return default
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"${variable} must be a number of seconds, not {text!r}") from None
        flag = f"${variable}"
    if not value > 0:
        raise UsageError(f"{flag} must be a positive number of seconds, not {value:g}")
    return value


def durability_of(options: DriveOptions) -> Durability:
    return parse_durability(options.durability)


def parse_durability(name: str) -> Durability:
    """``--durability``'s value, checked."""
    if name == "fsync":
        return "fsync"
    if name == "process":
        return "process"
    raise UsageError(f"--durability must be fsync or process, not {name!r}")


def system_prompt(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except UnicodeDecodeError as error:
        raise UsageError(f"--system {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise os_error(error, f"--system {path}") from None


def recorded_target(state: SessionState) -> RoutingTarget | None:
    """The profile, base URL and model the session last used (its newest configuration snapshot)."""
    from tiny_agent.providers.endpoint import RoutingTarget, parse_routing_identity
    from tiny_agent.providers.profiles import BUILTIN_PROFILES

    snapshot = state.lastSnapshot
    target = parse_routing_identity(snapshot.routingIdentity) if snapshot is not None else None
    if target is not None:
        return target
    # Sessions written before routing identities named their profile: the header's provider, when
    # it is a built-in profile with a fixed base URL, and the header's model.
    header = state.header
    profile = next((profile for profile in BUILTIN_PROFILES if profile.name == header.provider), None)
    if profile is None or profile.base_url is None:
        return None
    return RoutingTarget(profile=profile.name, base_url=profile.base_url, model=header.model)
