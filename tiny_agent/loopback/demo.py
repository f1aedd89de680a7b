"""The demo's script: a model that reads README.md with the ``read`` tool, then answers.

Its two Chat Completions bodies carry what OpenRouter's do beside the answer
(``reasoning``, ``reasoning_details``, ``refusal``, ``annotations``,
``tool_calls[].index``, ``cost``), so the demo shows the seam dropping them.
"""

from __future__ import annotations

import json

from tiny_agent.loopback.script import Reply, Step

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
                        "function": {"name": "read", "arguments": '{"path":"README.md"}'},
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
                "content": ("The README explains what this project is and how to install it, run it, and run its tests."),
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


def demo_script() -> list[Step]:
    """The demo's replies, in order (Chat Completions, whole bodies)."""
    return [Reply(body=body, api="chat") for body in demo_bodies()]
