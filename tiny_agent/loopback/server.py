"""The loopback server: plain HTTP/1.1 on 127.0.0.1, one thread per connection, the standard library only.

Routes: ``POST /v1/chat/completions``, ``/v1/messages`` and ``/v1/responses``
(and the same without ``/v1``).  Anything else is answered 404 with a JSON
error and recorded as a violation.  Each request on a route takes the next
step of the script (a :class:`Reply`, or a model computing one from the
body); a lone model instead of a list answers every request.

Before a step is answered the request is checked: the step's API must be the
route's, and (unless ``validate=False``) the request must keep its API's
rules (:mod:`.validation`).  A broken rule is answered 400 with a one-line
JSON error in the API's own shape, and kept in ``server.violations``.

Bodies sent in pieces use ``Transfer-Encoding: chunked`` unless the reply
asks for a close-delimited body: with chunked framing a client can tell a
connection closed mid-stream (no terminating chunk) from a finished one,
exactly as with a real provider behind a proxy, and the connection stays
usable for the next request.  ``framing="close"`` is there for the servers
that end a stream by closing, where a break-off looks like a clean end at
the HTTP level and only the stream's own grammar can tell.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from tiny_agent.loopback.answers import error_body
from tiny_agent.loopback.capture import RecordedRequest, record
from tiny_agent.loopback.script import Framing, Model, Reply, Script, Step, WirePlan, expected_api, wire_plan
from tiny_agent.loopback.validation import Rule, Violation, violation_of
from tiny_agent.wire.registry import Api

ROUTES: Final[dict[str, Api]] = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/v1/responses": "responses",
    "/responses": "responses",
}

Outcome = Literal["sending", "complete", "broken_off", "hung_up", "client_gone", "aborted"]


class SentReply(msgspec.Struct):
    """What the server put on the wire for one request; ``written`` and ``outcome`` change as it goes."""

    request: int
    """The index of the request in ``server.requests``."""
    status: int
    body: bytes
    """Exactly the body bytes the script sends (up to a break-off): what the client's journal must hold."""
    sizes: list[int]
    """The pieces the body is written in."""
    framing: Framing
    written: int = 0
    """Body bytes written to the socket so far."""
    outcome: Outcome = "sending"


class LoopbackServer:
    """``with LoopbackServer(script) as server: client(base_url=server.base_url)``."""

    def __init__(self, script: Script | Model, port: int = 0, *, validate: bool = True) -> None:
        self._forever: Model | None = script if callable(script) else None
        self._script: list[Step] = [] if callable(script) else list(script)
        self.validate = validate
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self.sent: list[SentReply] = []
        self.errors: list[str] = []
        """Exceptions that escaped a handler (a client going away is not one): a bug to fix, one line each."""
        self._server = _QuietServer(("127.0.0.1", port), _handler_class(self), self.errors)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, name="loopback", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The base URL of every API (``/v1``); clients append ``/chat/completions``, ``/messages`` or ``/responses``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def url(self, api: Api) -> str:
        """The full URL of an API's route."""
        path = next(path for path, route_api in ROUTES.items() if route_api == api and path.startswith("/v1/"))
        return f"http://127.0.0.1:{self.port}{path}"

    def sent_to(self, request: int) -> SentReply | None:
        """What was sent in answer to ``server.requests[request]`` (None: nothing yet, e.g. still delaying)."""
        with self._lock:
            return next((sent for sent in self.sent if sent.request == request), None)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _serve(self) -> None:
        # A short poll interval: shutdown() waits for it, and tests start and stop many servers.
        self._server.serve_forever(poll_interval=0.02)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving; replies still pausing, stalling or delaying give up at once."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    # -- the request's way through the server (called from handler threads) --------

    def _kept(self, request: RecordedRequest) -> int:
        """Record a request that takes no step (it came on no route); its index."""
        with self._lock:
            self.requests.append(request)
            return len(self.requests) - 1

    def _take(self, request: RecordedRequest) -> tuple[int, Step | None]:
        """Record a request on a route and take the step that answers it (None: the script ran out)."""
        with self._lock:
            self.requests.append(request)
            index = len(self.requests) - 1
            if self._forever is not None:
                return index, self._forever
            return index, self._script.pop(0) if self._script else None

    def _violation(self, index: int, api: Api | None, rule: Rule, message: str) -> Violation:
        found = Violation(rule=rule, message=message, request=index, api=api)
        with self._lock:
            self.violations.append(found)
        return found

    def _answer(self, index: int, api: Api, request: RecordedRequest, step: Step | None) -> Reply:
        """The reply for a request on an API route, or the error that says which rule it broke."""
        if step is None:
            return self._refused(index, api, "script", "the loopback script has no more replies", 500)
        expected = expected_api(step)
        if expected is not None and expected != api:
            return self._refused(
                index, api, "api", f"the script expected a {expected} request, this came on the {api} route", 400
            )
        if self.validate:
            broken = violation_of(request)
            if broken is not None:
                return self._refused(index, api, broken.rule, broken.message, 400)
        reply = self._computed(index, api, step, request.body)
        if reply.api is not None and reply.api != api:
            return self._refused(index, api, "api", f"the script answered as {reply.api}, this came on the {api} route", 400)
        return reply

    def _computed(self, index: int, api: Api, step: Step, body: Any) -> Reply:
        if isinstance(step, Reply):
            return step
        try:
            return step(body)
        except Exception as error:
            # A failing model is a bug in the test: answer 500 and record it, so the test fails saying so.
            message = " ".join(f"the scripted model raised {type(error).__name__}: {error}".split())
            return self._refused(index, api, "script", message, 500)

    def _refused(self, index: int, api: Api | None, rule: Rule, message: str, status: int) -> Reply:
        self._violation(index, api, rule, message)
        return Reply(status=status, body=error_body(api or "chat", status, f"loopback: {rule}: {message}"))

    def _sending(self, index: int, reply: Reply, plan: WirePlan) -> SentReply:
        sent = SentReply(request=index, status=reply.status, body=reply.sent_body, sizes=plan.sizes, framing=reply.chosen_framing)
        with self._lock:
            self.sent.append(sent)
        return sent

    def _hung_up(self, index: int) -> None:
        with self._lock:
            self.sent.append(SentReply(request=index, status=0, body=b"", sizes=[], framing="close", outcome="hung_up"))

    def _wait(self, seconds: float) -> bool:
        """Sleep, unless the server closes meanwhile; whether to go on."""
        return not seconds or not self._closing.wait(seconds)


def _handler_class(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        """Small pieces go out as they are written, not coalesced while an ACK is awaited."""

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
            api = ROUTES.get(urlsplit(self.path).path)  # the target is absolute through a forward proxy
            if api is None:
                self._not_found()
                return
            raw = self._request_body()
            if raw is None:
                return
            request = record(self.path, self.headers.items(), raw, api)
            index, step = server._take(request)
            self._reply(index, server._answer(index, api, request, step))

        def _not_found(self) -> None:
            raw = self._request_body()
            if raw is None:
                return
            request = record(self.path, self.headers.items(), raw, None)
            index = server._kept(request)
            message = f"no route for {self.command} {request.path}; only POST to {', '.join(ROUTES)}"
            self._reply(index, server._refused(index, None, "route", message, 404))

        do_GET = do_PUT = do_PATCH = do_DELETE = _not_found  # noqa: N815 - the stdlib's naming

        def _request_body(self) -> bytes | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self.send_error(400, "Content-Length is not a number")
                return None
            return self.rfile.read(length)

        def _reply(self, index: int, reply: Reply) -> None:
            if not server._wait(reply.delay):
                self.close_connection = True
                return
            if reply.hang_up:
                server._hung_up(index)
                self.close_connection = True
                return
            plan = wire_plan(reply)
            sent = server._sending(index, reply, plan)
            try:
                self._write(reply, plan, sent)
            except OSError:
                # The client went away (its timeout, a kill): normal here, and what a test may be checking.
                sent.outcome = "client_gone"
                self.close_connection = True

        def _write(self, reply: Reply, plan: WirePlan, sent: SentReply) -> None:
            self._headers(reply)
            for write in plan.writes:
                if write.data:
                    self.wfile.write(_framed(write.data, sent.framing))
                    sent.written += len(write.data)
                if not server._wait(write.pause_after):
                    sent.outcome = "aborted"
                    self.close_connection = True
                    return
            if plan.broken_off:
                sent.outcome = "broken_off"
                self.close_connection = True
                return
            if sent.framing == "chunked":
                self.wfile.write(b"0\r\n\r\n")
            sent.outcome = "complete"

        def _headers(self, reply: Reply) -> None:
            self.send_response(reply.status)
            if reply.content_type is not None:
                self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            framing = reply.chosen_framing
            if framing == "length":
                self.send_header("Content-Length", str(len(reply.body)))
            elif framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            return

    return Handler


def _framed(data: bytes, framing: Framing) -> bytes:
    if framing != "chunked":
        return data
    return b"%x\r\n%s\r\n" % (len(data), data)


class _QuietServer(ThreadingHTTPServer):
    """Clients that die mid-request (the crash tests kill them) are normal here, not errors to print.

    Anything else that escapes a handler is a bug in the server or the test:
    it is kept, one line each, in ``server.errors`` rather than printed.
    """

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], errors: list[str]) -> None:
        super().__init__(address, handler)
        self.errors = errors

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if error is None or isinstance(error, (ConnectionError, TimeoutError)):
            return
        self.errors.append(" ".join(f"{type(error).__name__}: {error}".split()))
