"""The Chat Completions adapter over httpx: one POST per model attempt, the body kept as received.

The adapter does not interpret the response: it returns the status, the
content type and the complete body (text when it is UTF-8, base64 when it is
not) so the caller can journal it before anything parses it.  Transport
failures become a ``ProviderError`` with a one-line reason.  The API key is
sent in the Authorization header and nowhere else: it is not in any repr,
message or file.

This is the only module that uses httpx, and it imports it only when a
client is made: resolving a configuration (which ``resume`` always does, to
compute the configuration digest) must not pay httpx's start-up cost.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from tiny_agent import __version__
from tiny_agent.facts import RawResponse
from tiny_agent.transcript import ChatMessage

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL: Final = "https://openrouter.ai/api/v1"
LOCAL_HOSTS: Final = frozenset(("127.0.0.1", "localhost", "::1"))
KEY_VARIABLES: Final = ("TINY_AGENT_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")

ErrorKind = Literal["config", "timeout", "connect", "protocol"]


class ProviderError(Exception):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class ProviderConfig:
    """Where and how to reach the provider.  The key is held, never shown."""

    __slots__ = ("base_url", "model", "_api_key", "connect_timeout", "read_timeout")

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    @property
    def api_key(self) -> str | None:
        return self._api_key

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def is_local(self) -> bool:
        return self.host in LOCAL_HOSTS

    @property
    def provider_name(self) -> str:
        """A short name for the journal header: ``openrouter``, ``openai``, or the host."""
        host = self.host
        for known in ("openrouter", "openai", "deepseek", "mistral", "groq", "x.ai", "together"):
            if known in host:
                return known.replace("x.ai", "xai")
        return "local" if self.is_local else host

    @property
    def routing_identity(self) -> str:
        """Which endpoint and model answer: part of the configuration digest (no secrets)."""
        return f"{self.base_url}#{self.model}"

    def require_key(self) -> None:
        """A remote endpoint needs a key; raise before any request is attempted without one."""
        if self._api_key is None and not self.is_local:
            variables = ", ".join(KEY_VARIABLES)
            raise ProviderError("config", f"no API key for {self.host}: set one of {variables}")

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"ProviderConfig(base_url={self.base_url!r}, model={self.model!r}, api_key=<{key}>)"

    __str__ = __repr__


def resolve_config(
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    *,
    read_timeout: float = 120.0,
    require_key: bool = True,
) -> ProviderConfig:
    """Flags first, then ``TINY_AGENT_BASE_URL`` / ``TINY_AGENT_MODEL`` / the key variables.

    ``require_key=False`` defers the key check to the first request (``resume``
    may only need to replay a tool, and ``--dry-run`` never asks the model).
    """
    url = base_url or os.environ.get("TINY_AGENT_BASE_URL") or DEFAULT_BASE_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderError("config", f"base URL {url!r} is not an http(s) URL")
    chosen_model = model or os.environ.get("TINY_AGENT_MODEL")
    if not chosen_model:
        raise ProviderError("config", "no model: pass --model or set TINY_AGENT_MODEL")
    key = api_key or next((os.environ[name] for name in KEY_VARIABLES if os.environ.get(name)), None)
    config = ProviderConfig(url, chosen_model, key, read_timeout=read_timeout)
    if require_key:
        config.require_key()
    return config


class ChatClient:
    """POST ``{base_url}/chat/completions``; returns the response as received."""

    def __init__(self, config: ProviderConfig, transport: httpx.BaseTransport | None = None) -> None:
        config.require_key()
        import httpx

        self.config = config
        self._httpx = httpx
        timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout, pool=config.connect_timeout)
        self._http = httpx.Client(timeout=timeout, transport=transport, follow_redirects=False)

    def complete(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> RawResponse:
        payload: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            payload["tools"] = tools
        httpx = self._httpx
        try:
            response = self._http.post(
                f"{self.config.base_url}/chat/completions",
                content=msgspec.json.encode(payload),
                headers=self._headers(),
            )
            body = response.read()
        except httpx.TimeoutException as error:
            raise ProviderError("timeout", self._describe("timed out", error)) from None
        except httpx.ConnectError as error:
            raise ProviderError("connect", self._describe("could not connect", error)) from None
        except httpx.HTTPError as error:
            raise ProviderError("protocol", self._describe("broke off", error)) from None
        return raw_response(response.status_code, response.headers.get("content-type"), body)

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"tiny-agent/{__version__}",
            "X-Title": "tiny-agent",
        }
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _describe(self, what: str, error: Exception) -> str:
        detail = " ".join(str(error).split()) or type(error).__name__
        key = self.config.api_key
        if key:
            detail = detail.replace(key, "<api key>")
        return f"request to {self.config.host} {what}: {detail}"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def raw_response(status: int, content_type: str | None, body: bytes) -> RawResponse:
    """The journal's form of a response: text when the bytes are UTF-8, base64 otherwise."""
    try:
        return RawResponse(status=status, contentType=content_type, body=body.decode("utf-8"))
    except UnicodeDecodeError:
        return RawResponse(status=status, contentType=content_type, bodyBase64=base64.b64encode(body).decode("ascii"))
