"""Scripted models: replies computed from the conversation sent (docs/loopback.md, *Scripted models*)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from tiny_agent.loopback.answers import Answer, Call, StreamShape, Tokens, call_id, event_stream, whole_body
from tiny_agent.loopback.script import Pieces, Reply, streamed
from tiny_agent.wire.registry import Api


@dataclass(eq=False)
class ToolLoopModel:
    """``turns`` turns of one tool call each (since the last user prompt), then ``final`` as text."""

    api: Api
    turns: int
    _: KW_ONLY
    tool: str = "read"
    arguments: str = '{"path":"README.md"}'
    final: str = "done"
    stream: bool = False
    shape: StreamShape = StreamShape()
    delay: float = 0.0
    replies: int = field(default=0, init=False)
    """How many replies this model computed (in this process)."""

    def __call__(self, body: Any) -> Reply:
        self.replies += 1
        done = call_turns_since_prompt(self.api, body)
        # The context grows each turn, and most of it was cached the turn before.
        tokens = Tokens(input=50, output=10, cache_read=100 * done, cache_write=0)
        if done < self.turns:
            answer = Answer(calls=(Call(self.tool, self.arguments, id=call_id(self.api, done)),), tokens=tokens)
        else:
            answer = Answer(text=self.final, tokens=tokens)
        if not self.stream:
            return Reply(body=whole_body(self.api, answer), api=self.api, delay=self.delay)
        return streamed(event_stream(self.api, answer, self.shape), pieces=Pieces(seed=done), api=self.api, delay=self.delay)


@dataclass(eq=False)
class EndlessToolCaller(ToolLoopModel):
    """Calls the tool on every turn, forever (for turn limits and budgets)."""

    turns: int = 2**62


def _chat_kind(message: dict[str, Any]) -> str | None:
    if message.get("role") == "user":
        return "prompt"
    return "call" if message.get("role") == "assistant" and message.get("tool_calls") else None


def _anthropic_kind(turn: dict[str, Any]) -> str | None:
    blocks = turn.get("content")
    kinds = {block.get("type") for block in blocks if type(block) is dict} if type(blocks) is list else {"text"}
    if turn.get("role") == "user" and "text" in kinds:
        return "prompt"
    return "call" if turn.get("role") == "assistant" and "tool_use" in kinds else None


def _responses_kind(item: dict[str, Any]) -> str | None:
    if item.get("type") == "message" and item.get("role") == "user":
        return "prompt"
    return "call" if item.get("type") == "function_call" else None


# Per API: the member holding the conversation, and what an entry of it is: a user prompt, a turn of calls, or neither.
_CONVERSATION: Final[dict[Api, tuple[str, Callable[[dict[str, Any]], str | None]]]] = {
    "chat": ("messages", _chat_kind),
    "anthropic": ("messages", _anthropic_kind),
    "responses": ("input", _responses_kind),
}


def call_turns_since_prompt(api: Api, body: Any) -> int:
    """How many assistant turns with tool calls the conversation holds after its last user prompt."""
    member, kind_of = _CONVERSATION[api]
    entries = body.get(member) if type(body) is dict else None
    count = 0
    previous: str | None = None
    for entry in entries if type(entries) is list else []:
        kind = kind_of(entry) if type(entry) is dict else None
        if kind == "prompt":
            count = 0
        elif kind == "call" and not (api == "responses" and previous == "call"):
            count += 1  # parallel Responses calls are consecutive items of one turn
        previous = kind
    return count
