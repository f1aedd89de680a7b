"""What the driving options resolve to: the flags, then the environment, the config file, what the session recorded, and
the profile's defaults.  All of it runs before anything is written: a bad flag or a missing key leaves nothing behind."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from tiny_agent.cli.declarations import Drive, Opt, parameters
from tiny_agent.errors import UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.agent.loop import Policy
    from tiny_agent.agent.runtime import CompactionPolicy
    from tiny_agent.journal.state import SentOptions, SessionState
    from tiny_agent.providers.endpoint import Endpoint, RoutingTarget
    from tiny_agent.providers.http import Limits
    from tiny_agent.stores.journal import Durability


def endpoint_for(options: Drive, recorded: RoutingTarget | None, *, require_key: bool) -> Endpoint:
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


def policy_for(options: Drive, endpoint: Endpoint, recorded: SentOptions | None = None) -> Policy:
    """The flags, else the request options the session recorded (resume, ``--session``, ``--continue``), else the profile's."""
    from msgspec import UNSET

    from tiny_agent.agent.loop import Policy
    from tiny_agent.journal.state import SentOptions

    profile = endpoint.profile
    before = recorded or SentOptions(stream=profile.streaming)
    max_tokens = profile.max_tokens if before.maxTokens is UNSET else before.maxTokens
    tool_choice = None if before.toolChoice is UNSET else before.toolChoice
    return Policy(
        stream=before.stream if options.stream is None else options.stream,
        stream_usage=profile.stream_usage,
        max_tokens=max_tokens if options.max_tokens is None else options.max_tokens,
        tool_choice=tool_choice if options.tool_choice is None else options.tool_choice,
        max_attempts=options.retries + 1,
        retry_wait=options.retry_wait,
        max_steps=options.max_steps,
    )


def compacting_for(options: Drive, endpoint: Endpoint, instructions: str = "") -> CompactionPolicy:
    """When and how to compact: the window from the flag, the config file's model table, or the known families."""
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
        keep_tokens=options.keep_tokens,
        instructions=instructions,
        auto=not options.no_auto_compact,
    )


def limits_for(options: Drive) -> Limits:
    """Flags first, then the environment, then the defaults (long: slow local models need them)."""
    from tiny_agent.providers.http import Limits

    defaults = Limits()
    return Limits(
        connect=_positive("connect_timeout", options.connect_timeout, defaults.connect),
        read=_positive("read_timeout", options.read_timeout, defaults.read),
        stream_idle=_positive("stream_idle_timeout", options.stream_idle_timeout, defaults.stream_idle),
        attempt=_positive("attempt_timeout", options.attempt_timeout, defaults.attempt),
        max_response_bytes=int(_positive("max_response_bytes", options.max_response_bytes, defaults.max_response_bytes)),
    )


def _positive(name: str, value: float | None, default: float) -> float:
    """A limit option's value, else its environment variable's (as declared), else the default."""
    spelt = next(parameter.spelt for parameter in parameters(Drive) if parameter.name == name)
    assert isinstance(spelt, Opt) and spelt.env is not None
    flag, unit = spelt.names[0], "bytes" if name.endswith("bytes") else "seconds"
    if value is None:
        text = os.environ.get(spelt.env)
        if not text:
            return default
        try:
            value = int(text) if unit == "bytes" else float(text)
        except ValueError:
            raise UsageError(f"${spelt.env} must be a number of {unit}, not {text!r}") from None
        flag = f"${spelt.env}"
    if not 0 < value < float("inf"):
        raise UsageError(f"{flag} must be a positive number of {unit}, not {value:g}")
    return value


def parse_durability(name: str) -> Durability:
    """``--durability``'s value, checked."""
    if name not in ("fsync", "process"):
        raise UsageError(f"--durability must be fsync or process, not {name!r}")
    return cast("Durability", name)


def system_prompt(value: str | None) -> str:
    """``--system``: ``@FILE`` is the file's text, and so is one word naming a file or holding a ``/``; else the text."""
    if value is None:
        return ""
    if value.startswith("@"):
        path = value[1:]
    elif len(value.split()) == 1 and value.strip() == value and ("/" in value or os.path.isfile(value)):
        path = value
    else:
        return value
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except UnicodeDecodeError as error:
        raise UsageError(f"--system {value}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise os_error(error, f"--system {value}") from None


def recorded_options(state: SessionState | None) -> SentOptions | None:
    """The request options the session's newest attempt was sent with (None before any, or before they were recorded)."""
    from msgspec import UNSET

    snapshot = state.lastSnapshot if state is not None else None
    return None if snapshot is None or snapshot.requestOptions is UNSET else snapshot.requestOptions


def recorded_target(state: SessionState) -> RoutingTarget | None:
    """The profile, base URL and model the session last used (its newest configuration snapshot)."""
    import msgspec

    from tiny_agent.providers.endpoint import RoutingTarget, parse_routing_identity
    from tiny_agent.providers.profiles import BUILTIN_PROFILES
    from tiny_agent.wire.registry import parse_adapter_identity

    snapshot = state.lastSnapshot
    target = parse_routing_identity(snapshot.routingIdentity) if snapshot is not None else None
    if snapshot is not None and target is not None:
        return msgspec.structs.replace(target, api=parse_adapter_identity(snapshot.adapterIdentity).api)
    # Sessions written before routing identities named their profile: the header's provider, when
    # it is a built-in profile with a fixed base URL, and the header's model.
    header = state.header
    profile = next((profile for profile in BUILTIN_PROFILES if profile.name == header.provider), None)
    if profile is None or profile.base_url is None:
        return None
    return RoutingTarget(profile=profile.name, base_url=profile.base_url, model=header.model)
