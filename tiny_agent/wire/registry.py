"""The wire APIs tiny-agent speaks (a fourth is one subpackage plus its line here), ``adapterIdentity``, and
:func:`derive`, which runs a stored response through them as its attempt recorded (live, resume, audit, report).

Pure: no I/O.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET

from tiny_agent.errors import ConfigError
from tiny_agent.journal.facts import RawResponse
from tiny_agent.wire import anthropic, chat, responses
from tiny_agent.wire.chat.adapters import find_adapter, is_known_adapter
from tiny_agent.wire.seam import Change, Outcome, Reject, WireApi, decode_body
from tiny_agent.wire.sse import looks_like_sse

Api = Literal["chat", "anthropic", "responses"]
"""The wire API a profile speaks: Chat Completions, Anthropic Messages, OpenAI Responses."""

API: Final[dict[Api, WireApi]] = {
    "chat": chat.API,
    "anthropic": anthropic.API,
    "responses": responses.API,
}

APIS: Final[tuple[Api, ...]] = tuple(API)

_API_OF_IDENTITY: Final[dict[str, Api]] = {wire.identity: name for name, wire in API.items()}
_REFERENCE_PATTERN: Final = re.compile(r"[a-z0-9-]+@[1-9][0-9]*")


class AdapterIdentity(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    api: Api
    adapters: tuple[str, ...]
    """``name@version`` references, in the order they ran."""
    recognised: bool
    """False for an identity this version did not write (read as chat with no adapters)."""


def adapter_identity(api: Api, adapter_names: Sequence[str]) -> str:
    """``chat-completions:v1``, or ``chat-completions:v1+absent-content-is-null@1,content-parts-to-text@1``."""
    base = API[api].identity
    if not adapter_names:
        return base
    if API[api].adapt is None:
        raise ConfigError(f"adapters apply to the chat API only, not to {api}")
    references = [find_adapter(name).reference for name in adapter_names]
    return f"{base}+{','.join(references)}"


def parse_adapter_identity(identity: str) -> AdapterIdentity:
    """The API and adapters an identity names; anything this code did not write (``openrouter:chat-completions:v1``,
    an unknown adapter or version) reads as plain chat, not ``recognised``."""
    base, plus, listed = identity.partition("+")
    api = _API_OF_IDENTITY.get(base)
    references = tuple(listed.split(",")) if plus else ()
    known = all(_REFERENCE_PATTERN.fullmatch(ref) and is_known_adapter(ref) for ref in references)
    if api is None or not known or (references and API[api].adapt is None):
        return AdapterIdentity(api="chat", adapters=(), recognised=False)
    return AdapterIdentity(api=api, adapters=references, recognised=True)


class StreamFacts(msgspec.Struct, frozen=True):
    """What audit shows of a streamed response: how it was put back together."""

    events: int
    """Data events (chunks) that carried the response."""
    bytes: int
    not_carried: list[str]
    """Paths of what reassembly did not carry into the body (before the seam dropped anything)."""
    problem: str | None = None


class Derivation(msgspec.Struct, frozen=True):
    """Every stage between a stored response and its seam outcome."""

    api: str
    adapters: tuple[str, ...]
    recognised: bool
    """False when the attempt's adapterIdentity was not written by this version (read as plain chat)."""
    outcome: Outcome
    stream: StreamFacts | None = None
    changes: list[Change] = msgspec.field(default_factory=list)
    """What each adapter changed, in order."""
    body: Any = None
    """The decoded body the seam read (a stream's reassembled or partial body); None when there was none."""


def derive(raw: RawResponse, adapter_identity: str) -> Derivation:
    """Run a stored response through reassembly, the adapters and the seam of the attempt's API."""
    identity = parse_adapter_identity(adapter_identity)
    api = API[identity.api]
    stream: StreamFacts | None = None
    value: Any = None

    def derived(outcome: Outcome, changes: list[Change] | None = None) -> Derivation:
        return Derivation(identity.api, identity.adapters, identity.recognised, outcome, stream, changes or [], value)

    body = raw.body if raw.body is not UNSET else base64.b64decode(raw.bodyBase64 or "")
    if looks_like_sse(body):
        # Only a stream's bytes up to [DONE] need be UTF-8: a stream kept in base64 may still stand.
        reassembly = api.reassemble(body)
        stream = StreamFacts(reassembly.event_count, reassembly.byte_size, reassembly.not_carried, reassembly.problem)
        value = reassembly.body
        if reassembly.problem is not None:
            return derived(api.stream_rejected(body, reassembly))
    elif isinstance(body, bytes):
        return derived(api.rejected("the response body is not UTF-8 text"))
    else:
        try:
            value = decode_body(body)
        except Reject as rejection:
            return derived(api.rejected(rejection.reason))
    adapted, changes = (value, []) if api.adapt is None else api.adapt(value, identity.adapters)
    return derived(api.normalize(adapted), changes)
