"""Provider profiles: which provider answers, at which URL, with which key, how it is sent and what its bodies need
(docs/provider.md, "Providers").  Choosing one is :mod:`.selection`; where a key may go is :mod:`.keys`.  Pure.
"""

from __future__ import annotations

from typing import Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.wire.anthropic.request import API_VERSION
from tiny_agent.wire.registry import APIS, Api

KeyStyle = Literal["bearer", "x-api-key", "api-key"]
"""``Authorization: Bearer KEY``, ``x-api-key: KEY`` (Anthropic), ``api-key: KEY`` (Azure)."""

ProfileOrigin = Literal["built-in", "config"]

PROVIDER_ENV: Final = "TINY_AGENT_PROVIDER"
BASE_URL_ENV: Final = "TINY_AGENT_BASE_URL"
MODEL_ENV: Final = "TINY_AGENT_MODEL"

DEFAULT_MAX_TOKENS: Final[dict[Api, int]] = {"anthropic": 8192}
"""Anthropic requires ``max_tokens``; the others have a server-side default."""
API_HEADERS: Final[dict[Api, tuple[tuple[str, str], ...]]] = {"anthropic": (("anthropic-version", API_VERSION),)}
"""Non-secret headers an API itself requires, whichever profile speaks it."""


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One provider: where it lives, which key it takes, how, and what its bodies need."""

    name: str
    api: Api = "chat"
    base_url: str | None = None
    """None where the user must give one (azure, custom)."""
    key_variable: str | None = None
    """The environment variable holding this provider's own key; None for keyless local servers."""
    key_style: KeyStyle = "bearer"
    key_destinations: tuple[str, ...] = ()
    """``scheme://host`` patterns this profile's own key may be sent to; ``*.`` matches any subdomain."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra non-secret headers, sent on every request."""
    adapters: tuple[str, ...] = ()
    """Quirk adapters run on every Chat Completions body, in order (see tiny_agent.wire.chat.adapters)."""
    streaming: bool = True
    stream_usage: bool = False
    """Send ``stream_options: {"include_usage": true}`` when streaming (the server accepts it)."""
    max_tokens: int | None = None
    """Sent as ``max_tokens`` when the API requires a value (Anthropic)."""
    base_url_hint: str | None = None
    """An example base URL, shown when the user must give one."""
    origin: ProfileOrigin = "built-in"
    model: str | None = None
    """The model asked when none is given (docs/provider.md); None where the server's own must be named."""


def speaking(api: Api, key_style: KeyStyle | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    """The members of a profile that follow from its API: key header (by default), required headers and ``max_tokens``."""
    return {
        "api": api,
        "key_style": key_style or ("x-api-key" if api == "anthropic" else "bearer"),
        "headers": API_HEADERS.get(api, ()),
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS.get(api),
    }


def _hosted(name: str, base_url: str, key_variable: str, model: str, **members: Any) -> Profile:
    """A hosted service whose own key goes to its base URL's host only (a Chat Completions one, unless ``members`` say)."""
    parts = urlsplit(base_url)
    destination = f"{parts.scheme}://{parts.hostname}"
    members.setdefault("stream_usage", True)
    return Profile(name, base_url=base_url, key_variable=key_variable, key_destinations=(destination,), model=model, **members)


BUILTIN_PROFILES: Final[tuple[Profile, ...]] = (
    _hosted("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4.1-mini"),
    # OpenRouter's app attribution header: names the app, carries nothing secret.
    _hosted(
        "openrouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        "openrouter/auto",
        headers=(("X-Title", "tiny-agent"),),
    ),
    # Usage arrives in message_start and message_delta whether asked or not.
    _hosted(
        "anthropic",
        "https://api.anthropic.com/v1",
        "ANTHROPIC_API_KEY",
        "claude-sonnet-4-5",
        stream_usage=False,
        **speaking("anthropic"),
    ),
    # response.completed carries the whole response, usage included.
    _hosted(
        "openai-responses", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4.1-mini", api="responses", stream_usage=False
    ),
    _hosted(
        "groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", "llama-3.3-70b-versatile", adapters=("absent-content-is-null",)
    ),
    _hosted(
        "mistral",
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        "mistral-large-latest",
        adapters=(
            "absent-content-is-null",
            "missing-call-type-is-function",
            "content-parts-to-text",
            "missing-role-is-assistant",
        ),
        # Mistral refuses unknown request members and sends usage in the last chunk unasked.
        stream_usage=False,
    ),
    _hosted("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "deepseek-chat"),
    # xAI's completion_tokens leave out the reasoning tokens it bills (docs/provider.md, "Reasoning tokens").
    _hosted("xai", "https://api.x.ai/v1", "XAI_API_KEY", "grok-4", adapters=("reasoning-apart-from-output",)),
    Profile(
        name="azure",
        key_variable="AZURE_OPENAI_API_KEY",
        key_style="api-key",
        key_destinations=(
            "https://*.openai.azure.com",
            "https://*.cognitiveservices.azure.com",
            "https://*.services.ai.azure.com",
        ),
        adapters=("absent-content-is-null",),
        stream_usage=True,
        base_url_hint="https://RESOURCE.openai.azure.com/openai/v1",
    ),
    # Servers on this machine: no key of their own (TINY_AGENT_API_KEY if one wants one).
    Profile("ollama", base_url="http://127.0.0.1:11434/v1", stream_usage=True),
    Profile("vllm", base_url="http://127.0.0.1:8000/v1", adapters=("empty-tool-calls-is-none",), stream_usage=True),
    # llama.cpp's server sends stream usage only when asked (fixtures/wire/llamacpp/stream-include-usage.sse); both
    # llama servers answer with the model they loaded whatever the request names ("default").
    Profile(
        "llamacpp",
        base_url="http://127.0.0.1:8080/v1",
        adapters=("object-arguments-to-json",),
        stream_usage=True,
        model="default",
    ),
    # llama-cpp-python's server: a null assistant content is an HTTP 500; stream usage is never sent, asked or not.
    Profile("llama-cpp-python", base_url="http://127.0.0.1:8000/v1", adapters=("null-content-as-empty",), model="default"),
    Profile("lmstudio", base_url="http://127.0.0.1:1234/v1"),
    # Unknown server: do not send a request member it may refuse (no stream usage).
    Profile("custom", base_url_hint="http://127.0.0.1:8000/v1"),
)

BUILTIN_NAMES: Final[frozenset[str]] = frozenset(profile.name for profile in BUILTIN_PROFILES)
CUSTOM: Final = "custom"


def api_named(text: str, origin: str = "--api") -> Api:
    """The API a flag names, or a ``ConfigError`` listing the three."""
    for api in APIS:
        if text == api:
            return api
    raise ConfigError(f"{origin} must be one of {', '.join(APIS)}, not {text!r}")
