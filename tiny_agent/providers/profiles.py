"""Provider profiles: which provider answers, at which URL, with which key, and how it is sent.

A :class:`Profile` names a provider and says everything tiny-agent needs to
talk to it: the wire API, the default base URL, the environment variable that
holds its key, how the key is sent, the only hosts that key may be sent to,
extra non-secret headers, the quirk adapters its bodies need, and whether it
streams.  Choosing one for an invocation is :mod:`tiny_agent.providers.selection`;
where a key may go is :mod:`tiny_agent.providers.keys`.

Pure: declarations only.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.wire.registry import APIS, Api

KeyStyle = Literal["bearer", "x-api-key", "api-key"]
"""``Authorization: Bearer KEY``, ``x-api-key: KEY`` (Anthropic), ``api-key: KEY`` (Azure)."""

ProfileOrigin = Literal["built-in", "config"]

PROVIDER_ENV: Final = "TINY_AGENT_PROVIDER"
BASE_URL_ENV: Final = "TINY_AGENT_BASE_URL"
MODEL_ENV: Final = "TINY_AGENT_MODEL"
"""The user's explicit key: sent to whatever base URL is in use, loopback included."""

ANTHROPIC_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final[dict[Api, int]] = {"anthropic": 8192}
"""Anthropic requires ``max_tokens``; the others have a server-side default."""
API_HEADERS: Final[dict[Api, tuple[tuple[str, str], ...]]] = {"anthropic": (("anthropic-version", ANTHROPIC_VERSION),)}
"""Non-secret headers an API itself requires, whichever profile speaks it."""

"""Profile names are written into routing identities: no ``@``, ``#``, spaces or capitals."""


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One provider: where it lives, which key it takes, how, and what its bodies need."""

    name: str
    api: Api
    base_url: str | None
    """None where the user must give one (azure, custom)."""
    key_variable: str | None
    """The environment variable holding this provider's own key; None for keyless local servers."""
    key_style: KeyStyle
    key_destinations: tuple[str, ...]
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


def _hosted(
    name: str,
    base_url: str,
    key_variable: str,
    destination: str,
    model: str,
    *,
    adapters: tuple[str, ...] = (),
    stream_usage: bool = True,
) -> Profile:
    """A hosted OpenAI-compatible Chat Completions service with a Bearer key for one host."""
    return Profile(
        name=name,
        api="chat",
        base_url=base_url,
        key_variable=key_variable,
        key_style="bearer",
        key_destinations=(destination,),
        adapters=adapters,
        stream_usage=stream_usage,
        model=model,
    )


def _local(name: str, base_url: str, *, adapters: tuple[str, ...] = (), stream_usage: bool, model: str | None = None) -> Profile:
    """A server on this machine: no key of its own (TINY_AGENT_API_KEY if it wants one)."""
    return Profile(
        name=name,
        api="chat",
        base_url=base_url,
        key_variable=None,
        key_style="bearer",
        key_destinations=(),
        adapters=adapters,
        stream_usage=stream_usage,
        model=model,
    )


BUILTIN_PROFILES: Final[tuple[Profile, ...]] = (
    _hosted("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "https://api.openai.com", "gpt-4.1-mini"),
    Profile(
        name="openrouter",
        api="chat",
        base_url="https://openrouter.ai/api/v1",
        key_variable="OPENROUTER_API_KEY",
        key_style="bearer",
        key_destinations=("https://openrouter.ai",),
        # OpenRouter's app attribution header: names the app, carries nothing secret.
        headers=(("X-Title", "tiny-agent"),),
        stream_usage=True,
        model="openrouter/auto",
    ),
    Profile(
        name="anthropic",
        api="anthropic",
        base_url="https://api.anthropic.com/v1",
        key_variable="ANTHROPIC_API_KEY",
        key_style="x-api-key",
        key_destinations=("https://api.anthropic.com",),
        headers=API_HEADERS["anthropic"],
        # Usage arrives in message_start and message_delta whether asked or not.
        stream_usage=False,
        max_tokens=DEFAULT_MAX_TOKENS["anthropic"],
        model="claude-sonnet-4-5",
    ),
    Profile(
        name="openai-responses",
        api="responses",
        base_url="https://api.openai.com/v1",
        key_variable="OPENAI_API_KEY",
        key_style="bearer",
        key_destinations=("https://api.openai.com",),
        # response.completed carries the whole response, usage included.
        stream_usage=False,
        model="gpt-4.1-mini",
    ),
    _hosted(
        "groq",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        "https://api.groq.com",
        "llama-3.3-70b-versatile",
        adapters=("absent-content-is-null",),
    ),
    _hosted(
        "mistral",
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        "https://api.mistral.ai",
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
    _hosted("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "https://api.deepseek.com", "deepseek-chat"),
    # xAI's completion_tokens leave out the reasoning tokens it bills (docs/provider.md, "Reasoning tokens").
    _hosted("xai", "https://api.x.ai/v1", "XAI_API_KEY", "https://api.x.ai", "grok-4", adapters=("reasoning-apart-from-output",)),
    Profile(
        name="azure",
        api="chat",
        base_url=None,
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
    _local("ollama", "http://127.0.0.1:11434/v1", stream_usage=True),
    _local("vllm", "http://127.0.0.1:8000/v1", adapters=("empty-tool-calls-is-none",), stream_usage=True),
    # llama.cpp's server sends stream usage only when asked (fixtures/wire/llamacpp/stream-include-usage.sse); both
    # llama servers answer with the model they loaded whatever the request names ("default").
    _local("llamacpp", "http://127.0.0.1:8080/v1", adapters=("object-arguments-to-json",), stream_usage=True, model="default"),
    # llama-cpp-python's server: a null assistant content is an HTTP 500; stream usage is never sent, asked or not.
    _local(
        "llama-cpp-python", "http://127.0.0.1:8000/v1", adapters=("null-content-as-empty",), stream_usage=False, model="default"
    ),
    _local("lmstudio", "http://127.0.0.1:1234/v1", stream_usage=False),
    Profile(
        name="custom",
        api="chat",
        base_url=None,
        key_variable=None,
        key_style="bearer",
        key_destinations=(),
        # Unknown server: do not send a request member it may refuse.
        stream_usage=False,
        base_url_hint="http://127.0.0.1:8000/v1",
    ),
)

BUILTIN_NAMES: Final[frozenset[str]] = frozenset(profile.name for profile in BUILTIN_PROFILES)
CUSTOM: Final = "custom"


def api_named(text: str, origin: str = "--api") -> Api:
    """The API a flag names, or a ``ConfigError`` listing the three."""
    for api in APIS:
        if text == api:
            return api
    raise ConfigError(f"{origin} must be one of {', '.join(APIS)}, not {text!r}")


def default_key_style(api: Api) -> KeyStyle:
    return "x-api-key" if api == "anthropic" else "bearer"
