"""A scripted Chat Completions server on 127.0.0.1, for the demo and for tests.

It speaks plain HTTP/1.1 through the standard library, serves a list of
scripted replies in order (or computes them from the request), and records
every request it got — without its Authorization header, which is never
stored — so tests can assert what a client sent and how often.

Run ``python -m tiny_agent.loopback --port 8765`` to serve the demo script by hand.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec

PATHS = ("/v1/chat/completions", "/chat/completions")


class Reply(msgspec.Struct, frozen=True):
    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    delay: float = 0.0
    """Seconds to wait before answering (to make clients time out)."""
    hang_up: bool = False
    """Close the connection without any response."""


class RecordedRequest(msgspec.Struct, frozen=True):
    path: str
    headers: dict[str, str]
    body: Any
    """The decoded JSON body, or None when it was not JSON."""
    authorized: bool
    """Whether an Authorization header came with it (its value is never kept)."""


Script = list[Reply | Callable[[Any], Reply]]


class LoopbackServer:
    """``with LoopbackServer(script) as server: client(base_url=server.base_url)``."""

    def __init__(self, script: Script, port: int = 0) -> None:
        self._script = list(script)
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL; clients append ``/chat/completions``."""
        return f"http://127.0.0.1:{self.port}/v1"

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
        self._server.shutdown()
        self._server.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if not self._script:
                return Reply(status=500, body=b'{"error":{"message":"the loopback script has no more replies","code":500}}')
            step = self._script.pop(0)
        return step(request.body) if callable(step) else step

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path not in PATHS:
                    self._send(Reply(status=404, body=b'{"error":{"message":"not found","code":404}}'))
                    return
                reply = server._next_reply(_record(self.path, self.headers, raw))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.hang_up:
                    self.close_connection = True
                    return
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                if reply.content_type is not None:
                    self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
                return

        return Handler


class _QuietServer(ThreadingHTTPServer):
    """Clients that die mid-request (the crash tests kill them) are normal here, not errors to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def _record(path: str, headers: Any, raw: bytes) -> RecordedRequest:
    kept = {name.lower(): value for name, value in headers.items() if name.lower() != "authorization"}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return RecordedRequest(path=path, headers=kept, body=body, authorized="Authorization" in headers)


# -- the demo ---------------------------------------------------------------------

DEMO_MODEL = "demo/loopback-1"

_DEMO_TOOL_CALL = {
    "id": "gen-1764700000-DemoToolCall01",
    "provider": "Loopback",
    "model": DEMO_MODEL,
    "object": "chat.completion",
    "created": 1764700000,
    "choices": [
        {
            "logprobs": None,
            "finish_reason": "tool_calls",
            "native_finish_reason": "tool_use",
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "annotations": [],
                "reasoning": "The user wants to know what this project is. The README will say; read it first.",
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "The user wants to know what this project is. The README will say; read it first.",
                        "format": "unknown",
                        "index": 0,
                    }
                ],
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_demo_read_readme",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{\"path\":\"README.md\"}"},
                    }
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 1200,
        "completion_tokens": 40,
        "total_tokens": 1240,
        "cost": 0.000465,
        "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 300},
        "completion_tokens_details": {"reasoning_tokens": 22},
    },
}

_DEMO_ANSWER = {
    "id": "gen-1764700001-DemoAnswer0002",
    "provider": "Loopback",
    "model": DEMO_MODEL,
    "object": "chat.completion",
    "created": 1764700001,
    "choices": [
        {
            "logprobs": None,
            "finish_reason": "stop",
            "native_finish_reason": "end_turn",
            "index": 0,
            "message": {
                "role": "assistant",
                "content": (
                    "The README explains what this project is and how to install it, run it, "
                    "and run its tests."
                ),
                "refusal": None,
                "annotations": [],
                "reasoning": "I have read the file; summarise it briefly.",
            },
        }
    ],
    "usage": {
        "prompt_tokens": 1500,
        "completion_tokens": 25,
        "total_tokens": 1525,
        "cost": 0.000211,
        "prompt_tokens_details": {"cached_tokens": 1100},
    },
}

DEMO_PROMPT = "What is this project? Have a look at its README."


def demo_bodies() -> list[bytes]:
    """The demo's two response bodies, as fixed bytes."""
    return [json.dumps(body, separators=(",", ":")).encode() for body in (_DEMO_TOOL_CALL, _DEMO_ANSWER)]


def demo_script() -> Script:
    return [Reply(body=body) for body in demo_bodies()]


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the tiny-agent demo script on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with LoopbackServer(demo_script() * 50, port=args.port) as server:  # type: ignore[operator]
        print(f"serving {server.base_url}/chat/completions (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return


if __name__ == "__main__":
    main()
