"""The wire APIs tiny-agent speaks, and the ``adapterIdentity`` that names one (with its adapters).

A fourth API is one subpackage that declares its :class:`~tiny_agent.wire.seam.WireApi`, plus its
line here (and its name in ``Api``).

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
    """What an ``adapterIdentity`` string says: the wire API and the adapters, with versions."""

    api: Api
    adapters: tuple[str, ...]
    """``name@version`` references, in the order they ran."""
    recognised: bool
    """False for an identity this version did not write (read as chat with no adapters)."""


def adapter_identity(api: Api, adapter_names: Sequence[str]) -> str:
    """``chat-completions:v1`` with no adapters (what journals held before adapters existed);
    ``chat-completions:v1+absent-content-is-null@1,content-parts-to-text@1`` with some."""
    base = API[api].identity
    if not adapter_names:
        return base
    if API[api].adapt is None:
        raise ConfigError(f"adapters apply to the chat API only, not to {api}")
    references = [find_adapter(name).reference for name in adapter_names]
    return f"{base}+{','.join(references)}"


def parse_adapter_identity(identity: str) -> AdapterIdentity:
    """The API and adapters an identity names; anything not written by this code reads as plain chat.

    ``openrouter:chat-completions:v1`` (the spec's example) and identities that
    name an adapter or version this code does not have are not recognised:
    they read as chat with no adapters, and ``recognised`` says so.
    """
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
