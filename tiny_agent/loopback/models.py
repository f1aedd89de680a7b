"""Scripted models: replies computed from the request, for long multi-turn tests of any wire API.

A model reads only the conversation it is sent, so any process may ask it at
any point (a resumed run, a second session) and get the answer that point
calls for.  Call ids are derived from the conversation too (``call_3`` is
the fourth call turn since the prompt), so they are the same whoever asks.

- :class:`ToolLoopModel` calls a tool until ``turns`` call turns have passed
  since the last prompt, then answers with text;
- :class:`EndlessToolCaller` never stops calling tools.

Each can answer whole or streamed (irregular pieces, seeded by the turn).
"""

from __future__ import annotations

from typing import Any

import msgspec

from tiny_agent.loopback.answers import Answer, Call, StreamShape, Tokens, event_stream, whole_body
from tiny_agent.loopback.script import Pieces, Reply, ScriptedModel, streamed
from tiny_agent.wire.registry import Api


class ToolLoopModel(ScriptedModel):
    """``turns`` turns of one tool call each (since the last user prompt), then a text answer."""

    def __init__(
        self,
        api: Api,
        turns: int,
        *,
        tool: str = "read",
        arguments: str = '{"path":"README.md"}',
        final: str = "done",
        stream: bool = False,
        shape: StreamShape = StreamShape(),
        delay: float = 0.0,
    ) -> None:
        self.api = api
        self.turns = turns
        self.tool = tool
        self.arguments = arguments
        self.final = final
        self.stream = stream
        self.shape = shape
        self.delay = delay
        self.replies = 0
        """How many replies this model computed (in this process)."""

    def reply(self, body: Any) -> Reply:
        self.replies += 1
        done = call_turns_since_prompt(self.api, body)
        if done < self.turns:
            answer = Answer(calls=(Call(self.tool, self.arguments, id=call_id(self.api, done)),), tokens=_tokens(done))
        else:
            answer = Answer(text=self.final, tokens=_tokens(done))
        return self._sent(answer, done)

    def _sent(self, answer: Answer, turn: int) -> Reply:
        if not self.stream:
            return Reply(body=whole_body(self.api, answer), api=self.api, delay=self.delay)
        reply = streamed(event_stream(self.api, answer, self.shape), pieces=Pieces(seed=turn), api=self.api)
        return msgspec.structs.replace(reply, delay=self.delay)


class EndlessToolCaller(ToolLoopModel):
    """Calls the tool on every turn, forever (for turn limits and budgets)."""

    def __init__(self, api: Api, *, tool: str = "read", arguments: str = '{"path":"README.md"}', stream: bool = False) -> None:
        super().__init__(api, turns=2**62, tool=tool, arguments=arguments, stream=stream)


def call_id(api: Api, turn: int) -> str:
    return f"toolu_{turn}" if api == "anthropic" else f"call_{turn}"


def _tokens(turn: int) -> Tokens:
    # The context grows each turn, and most of it was cached the turn before.
    return Tokens(input=50, output=10, cache_read=100 * turn, cache_write=0)


def call_turns_since_prompt(api: Api, body: Any) -> int:
    """How many assistant turns with tool calls the conversation holds after its last user prompt."""
    if type(body) is not dict:
        return 0
    if api == "chat":
        return _chat_turns(body.get("messages"))
    if api == "anthropic":
        return _anthropic_turns(body.get("messages"))
    return _responses_turns(body.get("input"))


def _chat_turns(messages: Any) -> int:
    count = 0
    for message in messages if type(messages) is list else []:
        role = message.get("role") if type(message) is dict else None
        if role == "user":
            count = 0
        elif role == "assistant" and message.get("tool_calls"):
            count += 1
    return count


def _anthropic_turns(turns: Any) -> int:
    count = 0
    for turn in turns if type(turns) is list else []:
        if type(turn) is not dict:
            continue
        blocks = turn.get("content")
        kinds = {block.get("type") for block in blocks if type(block) is dict} if type(blocks) is list else {"text"}
        if turn.get("role") == "user" and "text" in kinds:
            count = 0
        elif turn.get("role") == "assistant" and "tool_use" in kinds:
            count += 1
    return count


def _responses_turns(items: Any) -> int:
    count = 0
    previous: Any = None
    for item in items if type(items) is list else []:
        kind = item.get("type") if type(item) is dict else None
        if kind == "message" and item.get("role") == "user":
            count = 0
        elif kind == "function_call" and previous != "function_call":
            # Parallel calls are consecutive items of one turn.
            count += 1
        previous = kind
    return count
