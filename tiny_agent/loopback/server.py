"""The loopback server: plain HTTP/1.1 on 127.0.0.1, one thread per connection, the standard library only
(docs/loopback.md)."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from tiny_agent.loopback.answers import error_body
from tiny_agent.loopback.capture import RecordedRequest, Rule, Violation, record, violation_of
from tiny_agent.loopback.models import ToolLoopModel
from tiny_agent.loopback.script import Framing, Model, Reply, Script, Step, wire_plan
from tiny_agent.wire.registry import Api

_PATHS: Final[dict[str, Api]] = {"/chat/completions": "chat", "/messages": "anthropic", "/responses": "responses"}
ROUTES: Final[dict[str, Api]] = {prefix + path: api for path, api in _PATHS.items() for prefix in ("/v1", "")}

Outcome = Literal["sending", "complete", "broken_off", "hung_up", "client_gone", "aborted"]


class SentReply(msgspec.Struct):
    """What the server put on the wire for one request (docs/loopback.md, "What the server keeps")."""

    request: int
    status: int
    body: bytes
    sizes: list[int]
    framing: Framing
    written: int = 0
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
        self._server = _QuietServer(("127.0.0.1", port), _handler_class(self), self.errors)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for it, and tests start and stop many servers.
        poll = {"poll_interval": 0.02}
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs=poll, name="loopback", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The base URL of every API (``/v1``); clients append ``/chat/completions``, ``/messages`` or ``/responses``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def url(self, api: Api) -> str:
        """The full URL of an API's route."""
        return self.base_url + next(path for path, route_api in _PATHS.items() if route_api == api)

    def sent_to(self, request: int) -> SentReply | None:
        """What was sent in answer to ``server.requests[request]`` (None: nothing yet, e.g. still delaying)."""
        with self._lock:
            return next((sent for sent in self.sent if sent.request == request), None)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

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

    def _take(self, request: RecordedRequest) -> tuple[int, Step | None]:
        """Record a request and, on a route, take the step that answers it (None: the script ran out, or no route)."""
        with self._lock:
            self.requests.append(request)
            if request.api is None:
                return len(self.requests) - 1, None
            step = self._forever if self._forever is not None else self._script.pop(0) if self._script else None
            return len(self.requests) - 1, step

    def _answer(self, index: int, request: RecordedRequest, step: Step | None, method: str) -> Reply:
        """The reply for a request, or the error that says which rule it broke."""
        api = request.api
        if api is None:
            message = f"no route for {method} {request.path}; only POST to {', '.join(ROUTES)}"
            return self._refused(index, None, "route", message, 404)
        if step is None:
            return self._refused(index, api, "script", "the loopback script has no more replies", 500)
        expected = step.api if isinstance(step, Reply | ToolLoopModel) else None
        if expected is not None and expected != api:
            return self._refused(
                index, api, "api", f"the script expected a {expected} request, this came on the {api} route", 400
            )
        broken = violation_of(request) if self.validate else None
        if broken is not None:
            return self._refused(index, api, broken.rule, broken.message, 400)
        try:
            reply = step if isinstance(step, Reply) else step(request.body)
        except Exception as error:
            # A failing model is a bug in the test: answer 500 and record it, so the test fails saying so.
            message = " ".join(f"the scripted model raised {type(error).__name__}: {error}".split())
            return self._refused(index, api, "script", message, 500)
        if reply.api is not None and reply.api != api:
            return self._refused(index, api, "api", f"the script answered as {reply.api}, this came on the {api} route", 400)
        return reply

    def _refused(self, index: int, api: Api | None, rule: Rule, message: str, status: int) -> Reply:
        with self._lock:
            self.violations.append(Violation(rule=rule, message=message, request=index, api=api))
        return Reply(status=status, body=error_body(api or "chat", status, f"loopback: {rule}: {message}"))

    def _sending(self, sent: SentReply) -> SentReply:
        with self._lock:
            self.sent.append(sent)
        return sent

    def _wait(self, seconds: float) -> bool:
        """Sleep, unless the server closes meanwhile; whether to go on."""
        return not seconds or not self._closing.wait(seconds)


def _handler_class(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        """Small pieces go out as they are written, not coalesced while an ACK is awaited."""

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
            self._handle(ROUTES.get(urlsplit(self.path).path))  # the target is absolute through a forward proxy

        def _not_found(self) -> None:
            self._handle(None)

        do_GET = do_PUT = do_PATCH = do_DELETE = _not_found  # noqa: N815 - the stdlib's naming

        def _handle(self, api: Api | None) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self.send_error(400, "Content-Length is not a number")
                return
            request = record(self.path, self.headers.items(), self.rfile.read(length), api)
            index, step = server._take(request)
            reply = server._answer(index, request, step, self.command)
            if not server._wait(reply.delay):
                self.close_connection = True
                return
            if reply.hang_up:
                server._sending(SentReply(request=index, status=0, body=b"", sizes=[], framing="close", outcome="hung_up"))
                self.close_connection = True
                return
            plan = wire_plan(reply)
            framing = reply.chosen_framing
            sent = server._sending(SentReply(index, reply.status, reply.sent_body, plan.sizes, framing))
            try:
                self._headers(reply, framing)
                for write in plan.writes:
                    if write.data:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(write.data), write.data) if framing == "chunked" else write.data)
                        sent.written += len(write.data)
                    if not server._wait(write.pause_after):
                        sent.outcome = "aborted"
                        self.close_connection = True
                        return
                if plan.broken_off:
                    sent.outcome = "broken_off"
                    self.close_connection = True
                    return
                if framing == "chunked":
                    self.wfile.write(b"0\r\n\r\n")
                sent.outcome = "complete"
            except OSError:
                # The client went away (its timeout, a kill): normal here, and what a test may be checking.
                sent.outcome = "client_gone"
                self.close_connection = True

        def _headers(self, reply: Reply, framing: Framing) -> None:
            self.send_response(reply.status)
            if reply.content_type is not None:
                self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
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


class _QuietServer(ThreadingHTTPServer):
    """Clients that die mid-request (the crash tests kill them) are normal; anything else is kept in ``server.errors``."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], errors: list[str]) -> None:
        super().__init__(address, handler)
        self.errors = errors

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if error is None or isinstance(error, (ConnectionError, TimeoutError)):
            return
        self.errors.append(" ".join(f"{type(error).__name__}: {error}".split()))
