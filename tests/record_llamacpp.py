"""Record what a real llama.cpp ``llama-server`` sends, byte for byte, into fixtures/wire/llamacpp/.

    python tests/record_llamacpp.py [OUT_DIR]       (default: fixtures/wire/llamacpp)

Needs the binary and models of ``.ci/build-llama`` (or ``$TINY_AGENT_LLAMA_DIR``). Each case starts
the server it needs (tests/llama_server.py), sends one request with httpx and writes the response
body exactly as it came off the socket (``iter_raw``: no decoding of any kind) to ``CASE.json`` or
``CASE.sse``, and its request, server flags, status and headers to ``manifest.json``. README.md
there says what tiny-agent should make of each.

The models have random weights, so the answers are gibberish; sampling is seeded, and a case that
needs a property (a tool call, an empty answer) tries seeds from a fixed start until one has it
(the seed found is in the manifest's request). Not a test: pytest does not collect it.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from llama_server import LlamaServer, slow_model, version

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUT = PROJECT_ROOT / "fixtures" / "wire" / "llamacpp"
TIMEOUT = httpx.Timeout(120.0, connect=10.0)
HEADERS = {"accept-encoding": "identity"}  # the bytes as generated (llama-server compresses nothing anyway)
SEED_TRIES = 300

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
HELLO = [{"role": "user", "content": "hello"}]
READ_README = [{"role": "user", "content": "Read README.md"}]
LONG_PROMPT = "hello world " * 200  # about 2450 tokens (the models tokenize roughly a character a token)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    cut: str | None = None  # the transport error that ended a body early

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """The JSON payloads of an event stream's `data:` lines ([DONE] and a cut-off last line left out)."""
        found = []
        for line in self.body.decode("utf-8", "replace").split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                try:
                    found.append(json.loads(line[6:]))
                except ValueError:
                    pass
        return found


@dataclass
class Case:
    name: str
    model: str
    context: int
    request: dict[str, Any]
    expect: str
    extra: list[str] = field(default_factory=list)


@dataclass
class Recorder:
    out: Path
    manifest: list[dict[str, Any]] = field(default_factory=list)
    servers: dict[tuple[str, int], LlamaServer] = field(default_factory=dict)

    def server(self, model: str, context: int) -> LlamaServer:
        key = (model, context)
        if key not in self.servers:
            self.servers[key] = LlamaServer(model, context=context).start()
        return self.servers[key]

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()

    def send(self, case: Case, on_piece: Callable[[LlamaServer, bytes], None] | None = None) -> Response:
        server = self.server(case.model, case.context)
        return send(server, case.request, on_piece)

    def write(self, case: Case, server: LlamaServer, response: Response) -> None:
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        file = f"{case.name}.{'sse' if streamed else 'json'}"
        (self.out / file).write_bytes(response.body)
        self.manifest.append(
            {
                "case": case.name,
                "file": file,
                "server": {
                    "model": f"{case.model}.gguf",
                    "command": " ".join(
                        ["llama-server", "-m", f"{case.model}.gguf", "--alias", case.model, "-c", str(case.context),
                         "--host", "127.0.0.1", "--port", "PORT", *server.flags, *server.extra]
                    ),  # fmt: skip
                },
                "request": {"method": "POST", "path": "/v1/chat/completions", "body": case.request},
                "response": {"status": response.status, "headers": response.headers, "bytes": len(response.body), "cut": response.cut},
                "expect": case.expect,
            }
        )
        print(f"{file}: HTTP {response.status}, {len(response.body)} bytes{', cut: ' + response.cut if response.cut else ''}")


KEPT_HEADERS = ("content-type", "content-length", "transfer-encoding", "content-encoding", "connection")


def send(server: LlamaServer, body: dict[str, Any], on_piece: Callable[[LlamaServer, bytes], None] | None = None) -> Response:
    received = bytearray()
    with httpx.Client(timeout=TIMEOUT, headers=HEADERS) as client:
        with client.stream("POST", server.chat_url, json=body) as response:
            headers = {name: response.headers[name] for name in KEPT_HEADERS if name in response.headers}
            cut = None
            try:
                for piece in response.iter_raw():
                    received += piece
                    if on_piece is not None:
                        on_piece(server, bytes(received))
            except httpx.TransportError as error:
                cut = f"{type(error).__name__}: {error}"
    return Response(response.status_code, headers, bytes(received), cut)


def with_seed(recorder: Recorder, case: Case, wanted: Callable[[Response], bool], start: int) -> Response:
    """Try seeds from ``start`` until the answer has the wanted property; the case's request keeps that seed."""
    for seed in range(start, start + SEED_TRIES):
        case.request["seed"] = seed
        response = recorder.send(case)
        if wanted(response):
            return response
    raise SystemExit(f"{case.name}: no seed in {start}..{start + SEED_TRIES - 1} gave the wanted answer")


def one_tool_call(response: Response) -> bool:
    if response.status != 200:
        return False
    if response.headers["content-type"].startswith("text/event-stream"):
        events = response.events()
        finishes = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
        indexes = {t["index"] for e in events for c in e["choices"] for t in c.get("delta", {}).get("tool_calls") or []}
        return finishes == ["tool_calls"] and indexes == {0}
    (choice,) = response.json()["choices"]
    return choice["finish_reason"] == "tool_calls" and len(choice["message"].get("tool_calls") or []) == 1


def empty_answer(response: Response) -> bool:
    if response.headers["content-type"].startswith("text/event-stream"):
        events = response.events()
        text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
        finishes = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
        return text == "" and finishes == ["stop"]
    (choice,) = response.json()["choices"]
    return choice["finish_reason"] == "stop" and choice["message"]["content"] == ""


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(out)
    try:
        record_cases(recorder)
        record_cut_streams(recorder)
    finally:
        recorder.close()
    (out / "manifest.json").write_text(
        json.dumps({"server": version(), "cases": recorder.manifest}, indent=2, ensure_ascii=False) + "\n"
    )


def record_cases(recorder: Recorder) -> None:
    def plain(case: Case, wanted: Callable[[Response], bool] | None = None, start: int = 1) -> Response:
        response = with_seed(recorder, case, wanted, start) if wanted else recorder.send(case)
        recorder.write(case, recorder.server(case.model, case.context), response)
        return response

    # -- answers ---------------------------------------------------------------------------------
    def finished(reason: str) -> Callable[[Response], bool]:
        def wanted(r: Response) -> bool:
            if r.status != 200:
                return False
            if r.headers["content-type"].startswith("text/event-stream"):
                return [c["finish_reason"] for e in r.events() for c in e["choices"] if c.get("finish_reason")] == [reason]
            return bool(r.json()["choices"][0]["finish_reason"] == reason)

        return wanted

    plain(Case("plain", "tiny", 2048, {"model": "tiny", "messages": HELLO}, "a text answer, finish stop, usage reported"), finished("stop"))
    plain(
        Case("stream", "tiny", 2048, {"model": "tiny", "messages": HELLO, "stream": True}, "the same answer streamed; NO usage in the stream (not asked for)"),
        finished("stop"),
    )
    plain(
        Case(
            "stream-include-usage",
            "tiny",
            2048,
            {"model": "tiny", "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}},
            "the same answer streamed, then a usage chunk with choices []",
        ),
        finished("stop"),
    )
    plain(
        Case("length", "tiny", 2048, {"model": "tiny", "messages": HELLO, "max_tokens": 3}, "cut by max_tokens: finish length, completion_tokens 3"),
        finished("length"),
    )
    plain(
        Case(
            "stream-length",
            "tiny",
            2048,
            {"model": "tiny", "messages": HELLO, "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}},
            "cut by max_tokens, streamed: finish length",
        ),
        finished("length"),
    )
    plain(
        Case("empty-answer", "tiny", 2048, {"model": "tiny", "messages": HELLO}, "the model ended at its first token: content \"\", finish stop"),
        empty_answer,
    )
    plain(
        Case(
            "stream-empty-answer",
            "tiny",
            2048,
            {"model": "tiny", "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}},
            "an empty answer streamed: a role chunk, no content delta, finish stop",
        ),
        empty_answer,
    )

    # -- tool calls (grammar-constrained, tiny-tools) --------------------------------------------------
    tools_request = {"model": "tiny-tools", "messages": READ_README, "tools": [READ_TOOL], "max_tokens": 300}
    call = plain(
        Case("tool-call", "tiny-tools", 4096, dict(tools_request), "one read call (arguments a JSON string), finish tool_calls"),
        one_tool_call,
        start=80,
    )
    plain(
        Case(
            "stream-tool-call",
            "tiny-tools",
            4096,
            dict(tools_request, stream=True, stream_options={"include_usage": True}),
            "one read call streamed: id, type and name in the first fragment only, then argument pieces",
        ),
        one_tool_call,
        start=80,
    )
    plain(
        Case(
            "tool-choice-required",
            "tiny-tools",
            4096,
            dict(tools_request, tool_choice="required"),
            "tool_choice \"required\" is accepted (HTTP 200): one read call, finish tool_calls",
        ),
        one_tool_call,
    )
    plain(
        Case(
            "tool-choice-required-no-call",
            "tiny-tools",
            4096,
            dict(tools_request, tool_choice="required"),
            "tool_choice \"required\" does not guarantee a call: text only, run to max_tokens (finish length)",
        ),
        lambda r: r.status == 200 and not r.json()["choices"][0]["message"].get("tool_calls"),
    )
    plain(
        Case(
            "tool-choice-unknown",
            "tiny-tools",
            4096,
            dict(tools_request, tool_choice="bogus"),
            "an unknown tool_choice: HTTP 400 invalid_request_error (not retried)",
        ),
    )
    made = call.json()["choices"][0]["message"]["tool_calls"][0]
    for name, content in (("after-tool-content-null", None), ("after-tool-content-empty", "")):
        messages = [
            *READ_README,
            {"role": "assistant", "content": content, "tool_calls": [made]},
            {"role": "tool", "tool_call_id": made["id"], "content": "# tiny-agent\n"},
        ]
        plain(
            Case(name, "tiny-tools", 4096, {"model": "tiny-tools", "messages": messages, "tools": [READ_TOOL], "seed": 1},
                 f"an assistant message with content {json.dumps(content)} after a tool call is accepted (HTTP 200)"),
        )  # fmt: skip

    # -- the context ---------------------------------------------------------------------------------
    overflow = [{"role": "user", "content": LONG_PROMPT}]
    plain(
        Case("context-overflow", "tiny", 256, {"model": "tiny", "messages": overflow},
             "HTTP 400 exceed_context_size_error, \"request (N tokens) exceeds the available context size (256 tokens)\": context full"),
    )  # fmt: skip
    plain(
        Case("stream-context-overflow", "tiny", 256, {"model": "tiny", "messages": overflow, "stream": True, "stream_options": {"include_usage": True}},
             "the same 400 JSON error, not a stream: context full"),
    )  # fmt: skip
    plain(
        Case("length-at-context-end", "tiny", 256, {"model": "tiny", "messages": [{"role": "user", "content": "hello " * 30}], "max_tokens": 500, "ignore_eos": True},
             "the prompt fits but the answer reaches the end of the context: HTTP 200, finish length (no error)"),
    )  # fmt: skip


def record_cut_streams(recorder: Recorder) -> None:
    model, context = slow_model()
    body = {"model": model, "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 1000, "seed": 1}
    if model != "tiny-slow":
        body["ignore_eos"] = True
    for name, which, expect in (
        ("stream-killed", signal.SIGKILL, "the server was SIGKILLed mid-stream: the bytes received, no finish, no [DONE], a chunked body cut off"),
        ("stream-terminated", signal.SIGTERM, "the server got SIGTERM mid-stream: what it sent before going away"),
    ):
        case = Case(name, model, context, dict(body), expect)
        server = LlamaServer(model, context=context).start()

        def on_piece(server: LlamaServer, received: bytes, which: signal.Signals = which) -> None:
            if received.count(b"\ndata: ") >= 8 and server.process is not None and server.process.poll() is None:
                server.process.send_signal(which)

        try:
            response = send(server, case.request, on_piece)
        finally:
            server.kill()
        recorder.write(case, server, response)


def main(argv: list[str]) -> int:
    record(Path(argv[1]) if len(argv) > 1 else OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
