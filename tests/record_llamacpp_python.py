"""Record what llama-cpp-python's OpenAI-compatible server sends, byte for byte, into fixtures/wire/llamacpp-python/.

    LLAMA_CPP_PYTHON=/path/to/venv/bin/python python tests/record_llamacpp_python.py [OUT_DIR]

``LLAMA_CPP_PYTHON`` is a Python with ``llama-cpp-python[server]`` installed (it builds llama.cpp from
source: ``pip install 'llama-cpp-python[server]'``, about 15 minutes on 2 cores; CI does not do it).
The model is ``tiny-tools.gguf`` from ``.ci/build-llama`` (tests/llama_server.py finds it). Each body
is written as read off the socket (``iter_raw``), with its request and headers in ``manifest.json``.
Not a test: pytest does not collect it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from llama_server import free_port, model_path
from record_llamacpp import HELLO, READ_README, READ_TOOL, send

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUT = PROJECT_ROOT / "fixtures" / "wire" / "llamacpp-python"
START_DEADLINE = 120.0


class LlamaCppPythonServer:
    """``python -m llama_cpp.server`` on 127.0.0.1, ready when GET /v1/models answers 200."""

    def __init__(self, python: str, model: str, context: int) -> None:
        self.python = python
        self.model = model
        self.context = context
        self.port = free_port()
        self.flags = ["--model_alias", model, "--n_ctx", str(context), "--n_threads", "1", "--seed", "42", "--verbose", "false"]
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="llama-cpp-python-", suffix=".log")[1])

    @property
    def chat_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def command(self) -> str:
        return " ".join(["python -m llama_cpp.server --model", f"{self.model}.gguf", "--host 127.0.0.1 --port PORT", *self.flags])

    def __enter__(self) -> LlamaCppPythonServer:
        argv = [self.python, "-m", "llama_cpp.server", "--model", str(model_path(self.model)), "--host", "127.0.0.1", "--port", str(self.port), *self.flags]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/v1/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise SystemExit(f"llama-cpp-python's server did not start; its log ends:\n{self.log.read_text(errors='replace')[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def main(argv: list[str]) -> int:
    python = os.environ.get("LLAMA_CPP_PYTHON")
    if not python:
        raise SystemExit("set LLAMA_CPP_PYTHON to a Python with llama-cpp-python[server] installed")
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([python, "-c", "import llama_cpp; print(llama_cpp.__version__)"], capture_output=True, text=True, check=True).stdout.strip()
    forced = {"type": "function", "function": {"name": "read"}}
    tools = {"model": "tiny-tools", "messages": READ_README, "tools": [READ_TOOL], "max_tokens": 300, "seed": 1}
    long_prompt = [{"role": "user", "content": "hello world " * 2000}]  # about 24000 tokens
    # The call tiny-agent would send back: the forced call's shape, with a plain id.
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "README.md"}'}}

    def after_tool(content: Any) -> dict[str, Any]:
        messages = [*READ_README, {"role": "assistant", "content": content, "tool_calls": [call]}, {"role": "tool", "tool_call_id": "call_1", "content": "# tiny-agent\n"}]
        return {"model": "tiny-tools", "messages": messages, "tools": [READ_TOOL], "max_tokens": 40, "seed": 1}

    usage = {"include_usage": True}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("plain", {"model": "tiny-tools", "messages": HELLO, "max_tokens": 40, "seed": 1}, "a text answer with usage"),
        ("stream", {"model": "tiny-tools", "messages": HELLO, "max_tokens": 40, "seed": 1, "stream": True}, "streamed, no usage"),
        ("stream-include-usage", {"model": "tiny-tools", "messages": HELLO, "max_tokens": 40, "seed": 1, "stream": True, "stream_options": usage},
         "streamed with include_usage: still NO usage anywhere (usage not reported)"),
        ("tool-choice-auto", dict(tools), "tools given, no tool_choice: a text answer, no call (this server calls only when forced)"),
        ("tool-choice-required", dict(tools, tool_choice="required"), "tool_choice \"required\": accepted but ignored, a text answer, no call"),
        ("tool-call-forced", dict(tools, tool_choice=forced), "tool_choice naming read: one call, content null, also a legacy function_call member"),
        ("stream-tool-call-forced", dict(tools, tool_choice=forced, stream=True, stream_options=usage),
         "the forced call streamed: id, type and function.name REPEATED in every fragment (and function_call too); arguments concatenate"),
        ("after-tool-content-null", after_tool(None), "HTTP 500: the request model rejects assistant content null (pydantic validation errors)"),
        ("after-tool-content-empty", after_tool(""), "content \"\" after a tool call: HTTP 200, a text answer"),
        ("context-overflow", {"model": "tiny-tools", "messages": long_prompt, "max_tokens": 20, "seed": 1},
         "HTTP 400 context_length_exceeded (OpenAI's shape): context full"),
        ("stream-context-overflow", {"model": "tiny-tools", "messages": long_prompt, "max_tokens": 20, "seed": 1, "stream": True},
         "HTTP 200 text/event-stream with an EMPTY body (the server raised inside the stream): a stream with no events"),
    ]  # fmt: skip
    manifest = []
    with LlamaCppPythonServer(python, "tiny-tools", 4096) as server:
        for name, body, expect in cases:
            response = send(server, body)  # type: ignore[arg-type]
            streamed = response.headers.get("content-type", "").startswith("text/event-stream")
            file = f"{name}.{'sse' if streamed else 'json'}"
            (out / file).write_bytes(response.body)
            manifest.append(
                {
                    "case": name,
                    "file": file,
                    "server": {"model": "tiny-tools.gguf", "command": server.command()},
                    "request": {"method": "POST", "path": "/v1/chat/completions", "body": body},
                    "response": {"status": response.status, "headers": response.headers, "bytes": len(response.body), "cut": response.cut},
                    "expect": expect,
                }
            )
            print(f"{file}: HTTP {response.status}, {len(response.body)} bytes")
    (out / "manifest.json").write_text(json.dumps({"server": f"llama-cpp-python {version}", "cases": manifest}, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
