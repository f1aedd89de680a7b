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
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, Literal, Protocol

import msgspec

from tiny_agent import __version__
from tiny_agent.journal.facts import RawResponse
from tiny_agent.journal.redact import Secrets, redact_text
from tiny_agent.wire.request import WireRequest

if TYPE_CHECKING:
    import httpx

    from tiny_agent.providers.endpoint import Endpoint

__all__ = [
    "RETRYABLE_STATUSES",
    "FakeProvider",
    "FakeReply",
    "HttpxProvider",
    "Provider",
    "Received",
    "Timeouts",
    "TransportError",
    "WireRequest",
    "raw_response",
]

TransportKind = Literal["timeout", "connect", "protocol"]

RETRYABLE_STATUSES: Final = frozenset((429, 500, 502, 503, 504, 529))
"""Statuses that say "try again later": rate limits and overloaded or failing upstreams."""


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


def raw_response(
    status: int, content_type: str | None, body: bytes, incomplete: str | None = None, redactions: int = 0
) -> RawResponse:
    """Text when the bytes are UTF-8, base64 otherwise; ``incomplete`` says why a body ended early,
    ``redactions`` how many secrets were replaced in it before it was journaled."""
    ended = msgspec.UNSET if incomplete is None else incomplete
    replaced = msgspec.UNSET if redactions == 0 else redactions
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        encoded = base64.b64encode(body).decode("ascii")
        return RawResponse(
            status=status, contentType=content_type, bodyBase64=encoded, incomplete=ended, redactions=replaced
        )
    return RawResponse(status=status, contentType=content_type, body=text, incomplete=ended, redactions=replaced)


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


class HttpxProvider:
    """POST to the endpoint's URL for ``request.path``; the body as received, streamed or whole.

    Every message it makes (timeouts, refused connections) passes through the
    endpoint's secrets first: an httpx error can quote a URL with its
    credentials.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        secrets: Secrets,
        timeouts: Timeouts = Timeouts(),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self._httpx = httpx
        self._endpoint = endpoint
        self._secrets = secrets
        self._timeouts = timeouts
        self._host = endpoint.host
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=timeouts.connect)
        self._http = httpx.Client(timeout=timeout, transport=transport, follow_redirects=False)

    def send(self, request: WireRequest, received: Received) -> None:
        headers = self._headers(request)
        httpx = self._httpx
        url = self._endpoint.url(request.path)
        try:
            with self._http.stream("POST", url, content=request.body, headers=headers) as response:
                received.start(response.status_code, response.headers.get("content-type"), response.headers.get("retry-after"))
                self._read_body(response, received, request.stream)
        except httpx.TimeoutException as error:
            self._broke_off(received, "timeout", f"timed out ({self._timeout_hint(error)})")
        except httpx.ConnectError as error:
            self._broke_off(received, "connect", f"could not connect: {self._one_line(error)}")
        except httpx.HTTPError as error:
            self._broke_off(received, "protocol", f"broke off: {self._one_line(error)}")

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

    def _one_line(self, error: Exception) -> str:
        text = " ".join(str(error).split()) or type(error).__name__
        return redact_text(text, self._secrets)[0]

    def _headers(self, request: WireRequest) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if request.stream else "application/json",
            "User-Agent": f"tiny-agent/{__version__}",
            **request.headers,
        }
        headers.update(self._endpoint.request_headers())
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
