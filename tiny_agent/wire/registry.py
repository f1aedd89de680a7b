"""The wire APIs tiny-agent speaks (a fourth is one subpackage plus its line here), and ``adapterIdentity``.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.wire import anthropic, chat, responses
from tiny_agent.wire.chat.adapters import find_adapter, is_known_adapter
from tiny_agent.wire.seam import WireApi

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
    if api is None:
        return AdapterIdentity(api="chat", adapters=(), recognised=False)
    if not plus:
        return AdapterIdentity(api=api, adapters=(), recognised=True)
    references = tuple(listed.split(","))
    well_formed = API[api].adapt is not None and all(_REFERENCE_PATTERN.fullmatch(ref) for ref in references)
    if not well_formed or not all(is_known_adapter(ref) for ref in references):
        return AdapterIdentity(api="chat", adapters=(), recognised=False)
    return AdapterIdentity(api=api, adapters=references, recognised=True)
