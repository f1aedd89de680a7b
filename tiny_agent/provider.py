"""The provider seam: one physical request in, the response out exactly as it arrives.

A :class:`Provider` sends a :class:`WireRequest` and fills a :class:`Received`
with the status, the content type and every byte of the body as it arrives.
It interprets nothing: the caller journals what was received before anything
parses it.  Because ``Received`` is filled in place, the bytes that did arrive
are still there when the exchange breaks off (a timeout, a hang-up, Ctrl-C),
so a partial stream can be journaled too.

Two implementations:

- :class:`HttpxProvider`, over httpx (imported only when one is made: commands
  that never talk HTTP must not pay httpx's start-up cost);
- :class:`FakeProvider`, in memory, scripted, for fast tests of the driver.

Credentials are the provider's business: the request carries only non-secret
headers, and the provider adds the key for the one host it belongs to.  The
key is in no repr, message or file.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, Literal, Protocol
from urllib.parse import urlsplit

import msgspec

from tiny_agent import __version__
from tiny_agent.errors import ConfigError
from tiny_agent.facts import RawResponse

if TYPE_CHECKING:
    import httpx

TransportKind = Literal["timeout", "connect", "protocol"]

RETRYABLE_STATUSES: Final = frozenset((429, 500, 502, 503, 504, 529))
"""Statuses that say "try again later": rate limits and overloaded or failing upstreams."""


class WireRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One request, built from the canonical transcript by a wire API module; no secrets in it."""

    path: str
    """Appended to the endpoint's base URL, e.g. ``/chat/completions``."""
    body: bytes
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Non-secret headers the API needs (``anthropic-version``); the provider adds the key."""
    stream: bool = False


class TransportError(Exception):
    """The exchange broke off before a complete response arrived (what did arrive is in ``Received``)."""

    def __init__(self, kind: TransportKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def retryable(self) -> bool:
        """Connect failures and timeouts before any response are worth another attempt."""
        return self.kind in ("connect", "timeout")


class Received:
    """What came back, filled in as it arrives; read it whatever happened to the exchange."""

    def __init__(self, on_bytes: Callable[[bytes], None] | None = None) -> None:
        self.status: int | None = None
        self.content_type: str | None = None
        self.retry_after: str | None = None
        """The ``Retry-After`` header, if any (used for the wait, never journaled)."""
        self.incomplete: str | None = None
        """Why the body ended early, when it did."""
        self._parts: list[bytes] = []
        self._on_bytes = on_bytes

    def start(self, status: int, content_type: str | None, retry_after: str | None = None) -> None:
        self.status = status
        self.content_type = content_type
        self.retry_after = retry_after

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._parts.append(chunk)
        if self._on_bytes is not None:
            self._on_bytes(chunk)

    def body(self) -> bytes:
        if len(self._parts) > 1:
            self._parts = [b"".join(self._parts)]
        return self._parts[0] if self._parts else b""

    @property
    def has_response(self) -> bool:
        """A status line arrived: there is something to journal."""
        return self.status is not None

    def to_raw(self) -> RawResponse:
        """The journal's form of what arrived (requires a status)."""
        if self.status is None:
            raise ValueError("no response arrived")
        return raw_response(self.status, self.content_type, self.body(), self.incomplete)


def raw_response(status: int, content_type: str | None, body: bytes, incomplete: str | None = None) -> RawResponse:
    """Text when the bytes are UTF-8, base64 otherwise; ``incomplete`` says why a body ended early."""
    ended = msgspec.UNSET if incomplete is None else incomplete
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        encoded = base64.b64encode(body).decode("ascii")
        return RawResponse(status=status, contentType=content_type, bodyBase64=encoded, incomplete=ended)
    return RawResponse(status=status, contentType=content_type, body=text, incomplete=ended)


class Provider(Protocol):
    """Sends one request and fills ``received``.

    Raises :class:`TransportError` only when no response arrived at all (no
    status line).  A response that breaks off after it started returns
    normally with ``received.incomplete`` saying why: its bytes are journaled.
    ``KeyboardInterrupt`` passes through, with whatever arrived in ``received``.
    """

    def send(self, request: WireRequest, received: Received) -> None: ...

    def close(self) -> None: ...


# -- httpx -----------------------------------------------------------------------------


class Timeouts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    connect: float = 10.0
    read: float = 600.0
    """Waiting for a response to start, or for the next bytes of a whole body (slow local models need long)."""
    stream_idle: float = 120.0
    """Waiting for the next bytes of a stream once it has started."""


class Credentials:
    """How to authenticate to one host; the secret never leaves this object except in the header it builds."""

    __slots__ = ("_header", "_value")

    def __init__(self, header: str | None = None, value: str | None = None) -> None:
        self._header = header
        self._value = value

    def apply(self, headers: dict[str, str]) -> None:
        if self._header is not None and self._value is not None:
            headers[self._header] = self._value

    def __repr__(self) -> str:
        return f"Credentials(<{self._header or 'none'}>)"

    __str__ = __repr__


class HttpxProvider:
    """POST ``{base_url}{request.path}``; the body as received, streamed or whole."""

    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        timeouts: Timeouts = Timeouts(),
        transport: httpx.BaseTransport | None = None,
        describe_host: str = "",
    ) -> None:
        import httpx

        self._httpx = httpx
        self._base_url = base_url.rstrip("/")
        self._credentials = credentials
        self._timeouts = timeouts
        self._host = describe_host or httpx.URL(self._base_url).host
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=timeouts.connect)
        self._http = httpx.Client(timeout=timeout, transport=transport, follow_redirects=False)

    def send(self, request: WireRequest, received: Received) -> None:
        headers = self._headers(request)
        httpx = self._httpx
        try:
            with self._http.stream("POST", self._base_url + request.path, content=request.body, headers=headers) as response:
                received.start(response.status_code, response.headers.get("content-type"), response.headers.get("retry-after"))
                self._read_body(response, received, request.stream)
        except httpx.TimeoutException as error:
            self._broke_off(received, "timeout", f"timed out ({self._timeout_hint(error)})")
        except httpx.ConnectError as error:
            self._broke_off(received, "connect", f"could not connect: {_one_line(error)}")
        except httpx.HTTPError as error:
            self._broke_off(received, "protocol", f"broke off: {_one_line(error)}")

    def _read_body(self, response: httpx.Response, received: Received, stream: bool) -> None:
        if not stream:
            for chunk in response.iter_bytes():
                received.add(chunk)
            return
        with _IdleWatchdog(self._timeouts.stream_idle, response.close) as watchdog:
            try:
                for chunk in response.iter_bytes():
                    watchdog.reset()
                    received.add(chunk)
            except self._httpx.HTTPError:
                if not watchdog.fired:
                    raise
            if watchdog.fired:
                received.incomplete = (
                    f"the stream stalled: no bytes for {self._timeouts.stream_idle:g} s "
                    "(raise it with --stream-idle-timeout)"
                )

    def _broke_off(self, received: Received, kind: TransportKind, what: str) -> None:
        if received.has_response:
            received.incomplete = what
            return
        raise TransportError(kind, f"request to {self._host} {what}") from None

    def _timeout_hint(self, error: Exception) -> str:
        httpx = self._httpx
        if isinstance(error, httpx.ConnectTimeout):
            return f"no connection within {self._timeouts.connect:g} s; raise it with --connect-timeout"
        if isinstance(error, httpx.PoolTimeout):
            return f"no free connection within {self._timeouts.connect:g} s"
        return f"no response bytes for {self._timeouts.read:g} s; raise it with --read-timeout"

    def _headers(self, request: WireRequest) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if request.stream else "application/json",
            "User-Agent": f"tiny-agent/{__version__}",
            **request.headers,
        }
        self._credentials.apply(headers)
        return headers

    def close(self) -> None:
        self._http.close()


class _IdleWatchdog:
    """Calls ``on_idle`` once if ``reset`` is not called for ``seconds``; cancelled on exit."""

    def __init__(self, seconds: float, on_idle: Callable[[], None]) -> None:
        self._seconds = seconds
        self._on_idle = on_idle
        self._timer: threading.Timer | None = None
        self.fired = False

    def __enter__(self) -> _IdleWatchdog:
        self.reset()
        return self

    def reset(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self._seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._on_idle()

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


# -- in memory ---------------------------------------------------------------------------


class FakeReply(msgspec.Struct, frozen=True):
    """A scripted response: its status, content type and body pieces, optionally breaking off after them."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    chunks: tuple[bytes, ...] = ()
    """When given, the body as these pieces (a stream); ``body`` is then ignored."""
    breaks_off: TransportKind | None = None
    """Raise this transport failure after the pieces (before any when ``status`` is 0)."""
    retry_after: str | None = None


class FakeProvider:
    """Answers from a script, in order, and remembers every request; no sockets, no threads."""

    def __init__(self, script: list[FakeReply]) -> None:
        self._script = list(script)
        self.requests: list[WireRequest] = []

    def send(self, request: WireRequest, received: Received) -> None:
        self.requests.append(request)
        if not self._script:
            raise TransportError("protocol", "the fake provider's script has no more replies")
        reply = self._script.pop(0)
        if reply.status == 0:
            raise TransportError(reply.breaks_off or "connect", "scripted failure before any response")
        received.start(reply.status, reply.content_type, reply.retry_after)
        for piece in _pieces(reply):
            received.add(piece)
        if reply.breaks_off is not None:
            received.incomplete = f"scripted {reply.breaks_off} after {len(received.body())} bytes"

    def close(self) -> None:
        self._script.clear()


def _pieces(reply: FakeReply) -> Iterator[bytes]:
    if reply.chunks:
        yield from reply.chunks
    elif reply.body:
        yield reply.body


# -- where to send it (until provider profiles replace it) --------------------------------

DEFAULT_BASE_URL: Final = "https://openrouter.ai/api/v1"
LOCAL_HOSTS: Final = frozenset(("127.0.0.1", "localhost", "::1"))
KEY_VARIABLES: Final = ("TINY_AGENT_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")


class ProviderConfig:
    """Where and how to reach the provider.  The key is held, never shown."""

    __slots__ = ("base_url", "model", "_api_key", "timeouts")

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeouts: Timeouts = Timeouts()) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.timeouts = timeouts

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
            raise ConfigError(f"no API key for {self.host}: set one of {variables}")

    def connect(self) -> HttpxProvider:
        self.require_key()
        credentials = Credentials("Authorization", f"Bearer {self._api_key}") if self._api_key else Credentials()
        return HttpxProvider(self.base_url, credentials, self.timeouts)

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"ProviderConfig(base_url={self.base_url!r}, model={self.model!r}, api_key=<{key}>)"

    __str__ = __repr__


def resolve_config(
    base_url: str | None = None,
    model: str | None = None,
    *,
    timeouts: Timeouts = Timeouts(),
    require_key: bool = True,
) -> ProviderConfig:
    """Flags first, then ``TINY_AGENT_BASE_URL`` / ``TINY_AGENT_MODEL`` / the key variables."""
    url = base_url or os.environ.get("TINY_AGENT_BASE_URL") or DEFAULT_BASE_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base URL {url!r} is not an http(s) URL")
    chosen_model = model or os.environ.get("TINY_AGENT_MODEL")
    if not chosen_model:
        raise ConfigError("no model: pass --model or set TINY_AGENT_MODEL")
    key = next((os.environ[name] for name in KEY_VARIABLES if os.environ.get(name)), None)
    config = ProviderConfig(url, chosen_model, key, timeouts=timeouts)
    if require_key:
        config.require_key()
    return config
