"""Canonical conversation types: the only shapes that ever enter a transcript.  Pure.

They mirror the Chat Completions wire names (``tool_calls``, ``tool_call_id``) and nothing else: every
Struct is closed, and the seams (:mod:`tiny_agent.wire`) rebuild messages field by field.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import msgspec
from msgspec import UNSET, UnsetType

StopReason = Literal["stop", "toolUse", "length", "refusal"]
"""Why an assistant step ended: a final answer, a request for tools, the token limit, or (v3) a refusal."""

STOP_REASONS: Final[frozenset[str]] = frozenset(get_args(StopReason))


class FunctionCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    name: str
    arguments: str
    """The provider's argument text, kept verbatim (it may not even be JSON)."""


class ToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(msgspec.Struct, tag_field="role", tag="system", forbid_unknown_fields=True, frozen=True, gc=False):
    """Only ever sent to a provider; journals carry the system prompt as a digest."""

    content: str


class UserMessage(msgspec.Struct, tag_field="role", tag="user", forbid_unknown_fields=True, frozen=True, gc=False):
    content: str


class AssistantMessage(msgspec.Struct, tag_field="role", tag="assistant", forbid_unknown_fields=True, frozen=True, gc=False):
    content: str | None
    tool_calls: list[ToolCall] | UnsetType = UNSET
    """Absent (never ``null`` or ``[]``) when the model asked for no tools."""

    @property
    def calls(self) -> list[ToolCall]:
        return [] if self.tool_calls is UNSET else self.tool_calls


class ToolMessage(msgspec.Struct, tag_field="role", tag="tool", forbid_unknown_fields=True, frozen=True, gc=False):
    content: str
    tool_call_id: str


Message = UserMessage | AssistantMessage | ToolMessage
"""A message a session journal may hold."""

ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""A message a Chat Completions request may carry."""


class Usage(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """Provider-reported tokens for one physical request (or one tool run)."""

    input: int = 0
    """Prompt tokens net of cache reads and writes."""
    output: int = 0
    """Every output token billed, reasoning included."""
    cacheRead: int = 0
    cacheWrite: int = 0
    reasoning: int | UnsetType = UNSET
    """v3: the part of ``output`` that was reasoning, where the provider reports it (docs/journal.md)."""

    def __add__(self, other: Usage) -> Usage:
        mine, theirs = self.reasoning, other.reasoning
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cacheRead + other.cacheRead,
            self.cacheWrite + other.cacheWrite,
            theirs if mine is UNSET else mine if theirs is UNSET else mine + theirs,
        )

    @property
    def prompt_total(self) -> int:
        return self.input + self.cacheRead + self.cacheWrite

    @property
    def cache_hit_rate(self) -> float | None:
        """``cacheRead / (input + cacheRead + cacheWrite)``; undefined (None) for an empty prompt."""
        total = self.prompt_total
        if total == 0:
            return None
        return self.cacheRead / total


PreExecutionReason = Literal["invalidArguments", "unknownTool", "truncated", "aborted"]
"""Why a call was answered without being executed (a pre-execution result, session-v2 §8.3)."""

SyntheticReason = Literal[PreExecutionReason, "interrupted"]
"""Every reason a tool result may be synthetic: ``interrupted`` only on a started call's result."""

SYNTHETIC_TEXTS: Final[dict[str, str]] = {
    "invalidArguments": "Error: Tool arguments were invalid; the tool was not executed.",
    "unknownTool": "Error: Unknown tool; the tool was not executed.",
    "truncated": "Error: Tool call arguments were truncated by the model token limit; the tool was not executed.",
    "aborted": "Operation aborted before execution.",
    "interrupted": "Operation interrupted after execution status became unknown; the tool was not replayed.",
}
"""The fixed tool-result texts for calls that were not (or not knowingly) executed: byte-exact, compared verbatim."""

PRE_EXECUTION_REASONS: Final[frozenset[str]] = frozenset(get_args(PreExecutionReason))

COMPACTED_HISTORY_PREFIX: Final = "[Compacted history]\n"


def compaction_summary_message(summary: str) -> UserMessage:
    """The user message that stands for everything a compaction summarised."""
    return UserMessage(content=COMPACTED_HISTORY_PREFIX + summary)
