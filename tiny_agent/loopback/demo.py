"""The demo's script: a model that reads README.md with the ``read`` tool, then answers; its bodies carry what
OpenRouter's do beside the answer, so the demo shows the seam dropping them (docs/agent.md, *Commands*)."""

from __future__ import annotations

import json
from typing import Any

from tiny_agent.loopback.script import Reply, Step

DEMO_MODEL = "demo/loopback-1"
DEMO_PROMPT = "What is this project? Have a look at its README."
_THOUGHT = "The user wants to know what this project is. The README will say; read it first."


def _body(id: str, created: int, finish: str, native: str, message: dict[str, Any], usage: dict[str, Any]) -> bytes:
    choice = {"logprobs": None, "finish_reason": finish, "native_finish_reason": native, "index": 0, "message": message}
    envelope = {"id": id, "provider": "Loopback", "model": DEMO_MODEL, "object": "chat.completion", "created": created}
    return json.dumps({**envelope, "choices": [choice], "usage": usage}, separators=(",", ":")).encode()


def demo_bodies() -> list[bytes]:
    """The demo's two response bodies, as fixed bytes."""
    call = {"index": 0, "id": "call_demo_read_readme", "type": "function"}
    read = {**call, "function": {"name": "read", "arguments": '{"path":"README.md"}'}}
    details = [{"type": "reasoning.text", "text": _THOUGHT, "format": "unknown", "index": 0}]
    empty: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    answer = "The README explains what this project is and how to install it, run it, and run its tests."
    return [
        _body(
            "gen-1764700000-DemoToolCall01",
            1764700000,
            "tool_calls",
            "tool_use",
            {**empty, "reasoning": _THOUGHT, "reasoning_details": details, "tool_calls": [read]},
            {
                "prompt_tokens": 1200,
                "completion_tokens": 40,
                "total_tokens": 1240,
                "cost": 0.000465,
                "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 300},
                "completion_tokens_details": {"reasoning_tokens": 22},
            },
        ),
        _body(
            "gen-1764700001-DemoAnswer0002",
            1764700001,
            "stop",
            "end_turn",
            {**empty, "content": answer, "reasoning": "I have read the file; summarise it briefly."},
            {
                "prompt_tokens": 1500,
                "completion_tokens": 25,
                "total_tokens": 1525,
                "cost": 0.000211,
                "prompt_tokens_details": {"cached_tokens": 1100},
            },
        ),
    ]


def demo_script() -> list[Step]:
    """The demo's replies, in order (Chat Completions, whole bodies)."""
    return [Reply(body=body, api="chat") for body in demo_bodies()]
