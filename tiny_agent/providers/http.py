"""The provider seam: one request in, the response out exactly as it arrives, interpreting nothing (docs/provider.md, "HTTP").

:class:`HttpProvider` speaks HTTP/1.1 through httpcore, imported only when one is made.
"""

from __future__ import annotations

import base64
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final, Literal, Protocol
from urllib.parse import unquote, urlsplit

import msgspec

from tiny_agent import __version__
from tiny_agent.errors import ConfigError
from tiny_agent.journal.facts import CUT_BY_PEER, RawResponse
from tiny_agent.journal.secrets import basic_credentials
from tiny_agent.wire.request import WireRequest

if TYPE_CHECKING:
    import ssl

    import httpcore

    from tiny_agent.providers.endpoint import Endpoint

TransportKind = Literal["timeout", "connect", "protocol"]

_INFLATE: Final = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The content encodings tiny-agent asks for and removes (zlib's window bits)."""


class TransportError(Exception):
    """The exchange broke off before a response arrived (no status line: nothing to journal)."""

    def __init__(self, kind: TransportKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.kind in ("connect", "timeout")


class Received:
    """What came back, filled in as it arrives; read it whatever happened to the exchange."""

    def __init__(self, on_bytes: Callable[[bytes], None] | None = None) -> None:
        self.status: int | None = None
        self.content_type: str | None = None
        self.content_encoding: str | None = None
        """The ``Content-Encoding`` it came with; the body held here is always decoded."""
        self.retry_after: str | None = None
        self.incomplete: str | None = None
        self._parts: list[bytes] = []
        self._on_bytes = on_bytes

    def retry_wait(self, cap: float) -> float | None:
        """The wait ``Retry-After`` asks for (seconds, or an HTTP date), capped; None without one."""
        text = (self.retry_after or "").strip()
        if text.isdigit():
            return min(float(text), cap)
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        return min(max(0.0, moment.timestamp() - time.time()), cap)

    def start(
        self, status: int, content_type: str | None, retry_after: str | None = None, content_encoding: str | None = None
    ) -> None:
        self.status = status
        self.content_type = content_type
        self.retry_after = retry_after
        self.content_encoding = content_encoding

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


def raw_response(
    status: int,
    content_type: str | None,
    body: bytes,
    incomplete: str | None = None,
    content_encoding: str | None = None,
) -> RawResponse:
    """The ``raw`` fact of a response (the journal's writer redacts it, and counts, on commit)."""
    text, encoded = body_fields(body)
    return RawResponse(
        status=status,
        contentType=content_type,
        body=text,
        bodyBase64=encoded,
        contentEncoding=content_encoding or msgspec.UNSET,
        incomplete=msgspec.UNSET if incomplete is None else incomplete,
    )


def body_fields(data: bytes) -> tuple[str | msgspec.UnsetType, str | msgspec.UnsetType]:
    """``(body, bodyBase64)`` as the journal keeps bytes: text when they are UTF-8, base64 otherwise."""
    try:
        return data.decode("utf-8"), msgspec.UNSET
    except UnicodeDecodeError:
        return msgspec.UNSET, base64.b64encode(data).decode("ascii")


class Provider(Protocol):
    """Sends one request and fills ``received``: :class:`TransportError` only when no status line arrived (else the bytes
    are journaled, with ``received.incomplete`` saying why they stopped); Ctrl-C passes through with what arrived."""

    def send(self, request: WireRequest, received: Received) -> None: ...

    def close(self) -> None: ...


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How long an attempt may wait, and how much of a response it keeps (docs/provider.md, "Retries, timeouts")."""

    connect: float = 10.0
    read: float = 600.0
    stream_idle: float = 120.0
    attempt: float = 1800.0
    max_response_bytes: int = 64 * 1024 * 1024


class _Cut(Exception):
    """The body stops here, for the reason given (it goes in ``received.incomplete``)."""


class _Clock:
    """The limits of the attempt in flight: every socket operation waits at most what they leave."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.ends = 0.0
        self.per_read = limits.read
        self.attempt_bound = False
        """The last wait was cut short by the attempt's deadline (so a timeout is the attempt's)."""

    def start(self) -> None:
        self.ends = time.monotonic() + self.limits.attempt
        self.per_read = self.limits.read

    def bound(self, seconds: float) -> float:
        """``seconds``, or less when the attempt's deadline comes sooner."""
        left = self.ends - time.monotonic()
        self.attempt_bound = left < seconds
        return max(left, 0.001) if self.attempt_bound else seconds

    def check(self) -> None:
        if time.monotonic() >= self.ends:
            raise _Cut(self.attempt_reason)

    @property
    def attempt_reason(self) -> str:
        return f"timed out (the attempt took longer than {self.limits.attempt:g} s; raise it with --attempt-timeout)"


def _network(clock: _Clock) -> httpcore.NetworkBackend:
    """httpcore's own sockets, each wait bounded by ``clock``: a stalled read ends itself, no other thread needed."""
    import httpcore

    limits = clock.limits

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, clock.bound(clock.per_read))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, clock.bound(limits.read))

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
        ) -> Stream:
            return Stream(self._inner.start_tls(ssl_context, server_hostname, clock.bound(limits.connect)))

        def get_extra_info(self, info: str) -> object:
            return self._inner.get_extra_info(info)

    class Backend(httpcore.SyncBackend):
        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
        ) -> Stream:
            return Stream(super().connect_tcp(host, port, clock.bound(limits.connect), local_address, socket_options))

    return Backend()


class HttpProvider:
    """POST to the endpoint's URL for ``request.path``; redirects never followed (a key header would go along)."""

    def __init__(self, endpoint: Endpoint, limits: Limits = Limits()) -> None:
        import httpcore

        self._httpcore = httpcore
        self._endpoint = endpoint
        self._limits = limits
        self._clock = _Clock(limits)
        self._pool = _pool(endpoint.url(""), _network(self._clock))

    def send(self, request: WireRequest, received: Received) -> None:
        httpcore = self._httpcore
        url = self._endpoint.url(request.path)
        self._clock.start()
        try:
            with self._pool.stream("POST", url, headers=self._headers(request, url), content=request.body) as response:
                headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in response.headers}
                encoding = headers.get("content-encoding", "identity").strip().lower()
                coded = None if encoding in ("", "identity") else encoding
                received.start(response.status, headers.get("content-type"), headers.get("retry-after"), coded)
                self._clock.per_read = self._limits.stream_idle if request.stream else self._limits.read
                self._read_body(response.iter_stream(), received)
        except _Cut as cut:
            received.incomplete = str(cut)
        except httpcore.TimeoutException as error:
            self._broke_off(received, "timeout", self._timed_out(error, received, request.stream))
        except httpcore.ConnectError as error:
            self._broke_off(received, "connect", f"could not connect: {self._one_line(error)}")
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError, httpcore.UnsupportedProtocol) as error:
            self._broke_off(received, "protocol", f"{CUT_BY_PEER}: {self._one_line(error)}")

    def _read_body(self, chunks: Iterator[bytes], received: Received) -> None:
        """Take the body a piece at a time, decoded, within the size cap and the attempt's deadline."""
        cap = self._limits.max_response_bytes
        encoding = received.content_encoding
        if encoding is not None and encoding not in _INFLATE:
            raise _Cut(f"the response's content-encoding {encoding!r} is not one tiny-agent decodes (gzip, deflate)")
        inflater = zlib.decompressobj(_INFLATE[encoding]) if encoding is not None else None
        taken = kept = 0
        for chunk in chunks:
            taken += len(chunk)
            room = cap - kept
            try:
                data = chunk if inflater is None else inflater.decompress(chunk, room + 1)
            except zlib.error as error:
                raise _Cut(f"the {encoding} body does not decode: {error}") from None
            received.add(data[:room])
            kept += min(len(data), room)
            if taken > cap or len(data) > room:
                decoded = f" decoded from {taken} received ({encoding})" if inflater else ""
                raise _Cut(f"the response is larger than --max-response-bytes ({cap}): cut after {kept} bytes{decoded}")
            self._clock.check()

    def _broke_off(self, received: Received, kind: TransportKind, what: str) -> None:
        if received.has_response:
            received.incomplete = what
            return
        raise TransportError(kind, f"request to {self._endpoint.host} {what}") from None

    def _timed_out(self, error: Exception, received: Received, stream: bool) -> str:
        limits = self._limits
        if self._clock.attempt_bound:
            return self._clock.attempt_reason
        if isinstance(error, self._httpcore.ConnectTimeout):
            return f"timed out (no connection within {limits.connect:g} s; raise it with --connect-timeout)"
        if received.has_response and stream:
            return f"the stream stalled: no bytes for {limits.stream_idle:g} s (raise it with --stream-idle-timeout)"
        return f"timed out (no response bytes for {limits.read:g} s; raise it with --read-timeout)"

    def _one_line(self, error: Exception) -> str:
        return " ".join(str(error).split()) or type(error).__name__

    def _headers(self, request: WireRequest, url: str) -> list[tuple[str, str]]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if request.stream else "application/json",
            "Accept-Encoding": "gzip, deflate",
            "User-Agent": f"tiny-agent/{__version__}",
            **request.headers,
            **self._endpoint.request_headers(),
        }
        parts = urlsplit(url)
        if (parts.username or parts.password) and not any(name.lower() == "authorization" for name in headers):
            headers["Authorization"] = "Basic " + basic_credentials(parts)
        return list(headers.items())

    def close(self) -> None:
        self._pool.close()


def _pool(url: str, network: httpcore.NetworkBackend) -> httpcore.ConnectionPool:
    """Connections to ``url``'s host, through the proxy the environment names for it (docs/provider.md, "Proxies")."""
    import urllib.request

    import httpcore

    parts = urlsplit(url)
    # Building the TLS context costs a tenth of a second: a plain-http endpoint (a local server) does not pay it.
    context = httpcore.default_ssl_context() if parts.scheme == "https" else None
    proxies = urllib.request.getproxies_environment()
    chosen = proxies.get(parts.scheme) or proxies.get("all")
    if not chosen or urllib.request.proxy_bypass(parts.hostname or ""):
        return httpcore.ConnectionPool(ssl_context=context, network_backend=network)
    proxy = urlsplit(chosen if "://" in chosen else f"http://{chosen}")
    if proxy.scheme not in ("http", "https") or not proxy.hostname:
        raise ConfigError("the proxy in the environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY) must be an http:// or https:// URL")
    auth = (unquote(proxy.username or ""), unquote(proxy.password or "")) if proxy.username else None
    bare = proxy._replace(netloc=proxy.netloc.rpartition("@")[2]).geturl()
    return httpcore.HTTPProxy(proxy_url=bare, proxy_auth=auth, ssl_context=context, network_backend=network)
