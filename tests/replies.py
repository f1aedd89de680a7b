"""Chat Completions response bodies for tests, dirty the way real providers are."""

from __future__ import annotations

import json
from typing import Any

from tiny_agent.loopback import Reply


def body(message: dict[str, Any], finish: str | None = "stop", usage: dict[str, Any] | None = None, **extra: Any) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "native_finish_reason": finish, "logprobs": None, "message": message}
    value: dict[str, Any] = {"id": "gen-test", "object": "chat.completion", "created": 1764700000, "model": "test/model", "choices": [choice]}
    value["usage"] = usage if usage is not None else {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}, "cost": 0.0001}
    value.update(extra)
    return json.dumps(value, separators=(",", ":")).encode()


def answer(text: str, **extra: Any) -> Reply:
    return Reply(body=body({"role": "assistant", "content": text, "refusal": None, "reasoning": "thinking...", "annotations": []}, **extra))


def calls(*calls: tuple[str, str], finish: str = "tool_calls", ids: list[str] | None = None) -> Reply:
    tool_calls = [
        {"index": index, "id": (ids or [])[index] if ids else f"call_{index}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for index, (name, arguments) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "refusal": None, "reasoning": "let me look", "tool_calls": tool_calls}
    return Reply(body=body(message, finish=finish))


def read(path: str = "README.md") -> Reply:
    return calls(("read", json.dumps({"path": path})))
