"""The endpoint a session talks to, and its routing identity (docs/provider.md, "Keys go only where they belong").  Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.journal.secrets import Secrets, collect_secrets
from tiny_agent.providers.keys import PROFILE_NAME, base_url_problem, safe_base_url
from tiny_agent.wire.registry import Api, adapter_identity

if TYPE_CHECKING:
    from tiny_agent.providers.profiles import Profile


class Endpoint:
    """Where requests go and with which key: only :meth:`auth_header` hands the key out, and no repr shows it."""

    __slots__ = ("profile", "name", "api", "model", "base_url", "host", "key_source", "chosen_by", "_base", "_key", "_problem")

    def __init__(
        self,
        profile: Profile,
        base_url: str,
        model: str,
        *,
        key: str | None = None,
        key_source: str | None = None,
        key_problem: str | None = None,
        chosen_by: str = "",
    ) -> None:
        self._base = base_url.rstrip("/")
        self.profile = profile
        self.name = profile.name
        self.api: Api = profile.api
        self.model = model
        self.base_url = safe_base_url(self._base)
        """The form shown and journaled: no credentials, secret query values redacted."""
        self.host = urlsplit(self._base).hostname or ""
        self.key_source = key_source
        self.chosen_by = chosen_by
        self._key = key
        self._problem = key_problem

    @property
    def routing_identity(self) -> str:
        """``openrouter@https://openrouter.ai/api/v1#openai/gpt-4o-mini``: profile, safe base URL, model."""
        return routing_identity(self.profile.name, self._base, self.model)

    @property
    def adapter_identity(self) -> str:
        """``chat-completions:v1``, ``chat-completions:v1+empty-tool-calls-is-none@1``, ``anthropic-messages:v1``..."""
        return adapter_identity(self.profile.api, self.profile.adapters)

    def url(self, path: str) -> str:
        """``{base URL}/{path}``, keeping the base URL's query (Azure's ``api-version``) after the path."""
        parts = urlsplit(self._base)
        joined = parts.path.rstrip("/") + "/" + path.lstrip("/")
        return parts._replace(path=joined).geturl()

    def require_key(self) -> None:
        """Raise the ``ConfigError`` that says which variable to set, if this endpoint cannot get a key."""
        if self._problem is not None:
            raise ConfigError(self._problem)

    def auth_header(self) -> tuple[str, str] | None:
        """The one header that carries the key (``Authorization``, ``x-api-key`` or ``api-key``), or None."""
        self.require_key()
        if self._key is None:
            return None
        style = self.profile.key_style
        return ("Authorization", f"Bearer {self._key}") if style == "bearer" else (style, self._key)

    def secrets(self) -> Secrets:
        """What must never be journaled or printed: the key, its header value, the base URL's credentials."""
        return collect_secrets(api_key=self._key, base_url=self._base)

    def request_headers(self) -> dict[str, str]:
        """The profile's extra headers (``anthropic-version``, ``X-Title``) plus the key's: all a request carries of it."""
        auth = self.auth_header()
        return dict(self.profile.headers) | ({auth[0]: auth[1]} if auth is not None else {})

    def __repr__(self) -> str:
        key = f"from {self.key_source}" if self._key is not None else "none"
        return f"Endpoint(profile={self.profile.name!r}, base_url={self.base_url!r}, model={self.model!r}, key=<{key}>)"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("an Endpoint holds an API key and cannot be serialised")


class RoutingTarget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a routing identity written by this code says: profile, safe base URL, model."""

    profile: str
    base_url: str
    model: str
    api: Api | None = None
    """The API the session spoke (its ``adapterIdentity``'s): what ``custom`` speaks again unless ``--api`` says otherwise."""


def routing_identity(profile_name: str, base_url: str, model: str) -> str:
    """``NAME@SAFE_BASE_URL#MODEL``; the safe base URL has no ``#``, so the model may hold anything."""
    return f"{profile_name}@{safe_base_url(base_url)}#{model}"


def parse_routing_identity(identity: str) -> RoutingTarget | None:
    """Profile, base URL and model back from an identity this code wrote; None for anything else (older ones too)."""
    name, at, rest = identity.partition("@")
    base_url, hash_sign, model = rest.partition("#")
    if not at or not PROFILE_NAME.fullmatch(name) or not hash_sign or not model:
        return None
    if base_url_problem(base_url) is not None or "@" in urlsplit(base_url).netloc:
        return None
    return RoutingTarget(profile=name, base_url=base_url, model=model)
