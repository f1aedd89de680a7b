"""Compaction as tiny-agent writes it: when to compact, where to cut, what to ask, what to commit.

A compaction is an operation of its own (session-v2 §9.2, §8.4): it can only
start when no run is open.  So when a run's context outgrows the model's
window, the run ends first -- ``failed`` with code ``context_full``, after
every tool call of its last step is answered -- then the compaction runs,
then a **continuation run** picks the task up again with a fixed user
message.  A provider's context-length error takes the same path once.

The cut: the retained tail keeps the newest messages (``keep``), moved back
to a turn boundary so that both halves stand on their own for a provider
(the compacted part ends with no tool call unanswered; the tail starts with
a user or assistant message).  The summary request sends the compacted part
of the active context and one instruction, with no tools.

Sizes are estimated, not tokenized: four characters a token, which is close
enough to decide *when* to compact (the provider's own count settles the
ledger).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.transcript import AssistantMessage, Message, ToolMessage, UserMessage

CHARS_PER_TOKEN: Final = 4
DEFAULT_KEEP: Final = 6
DEFAULT_THRESHOLD: Final = 0.8
CONTEXT_FULL: Final = "context_full"
CONTEXT_LENGTH_EXCEEDED: Final = "context_length_exceeded"

SUMMARY_PROMPT: Final = (
    "You are compacting the history of a coding agent's session so that it can go on within its context window. "
    "Write a summary that lets the agent continue the task without the original messages: the user's goal and "
    "constraints, decisions made, files read or changed and what was learned from them, tool results that still "
    "matter, and what remains to be done. Be specific (paths, names, numbers). Do not address the user."
)
SUMMARY_INSTRUCTION: Final = "Write the summary of the conversation above now, as plain text."
CONTINUE_PROMPT: Final = (
    "Continue with the task. (The conversation above was compacted by tiny-agent to fit the model's context window.)"
)

KNOWN_WINDOWS: Final[tuple[tuple[str, int], ...]] = (
    ("claude", 200_000),
    ("gpt-4.1", 1_000_000),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini", 1_000_000),
    ("deepseek", 128_000),
    ("mistral-large", 128_000),
    ("llama-3", 128_000),
    ("qwen", 32_768),
)
"""Context windows of model families, by a fragment of the model id; the user config or --context-window wins."""


class Cut(msgspec.Struct, frozen=True):
    """Where a compaction splits the session's messages."""

    compacted: list[str]
    """Message entry ids summarised (from the session's first message)."""
    retained: list[str]
    """Message entry ids kept verbatim, through the input boundary."""

    @property
    def through(self) -> str:
        """The compaction entry's ``compactedThroughEntryId``."""
        return self.compacted[-1]


def estimate_tokens(messages: Sequence[Message], extra_chars: int = 0) -> int:
    """Roughly how many tokens a request holding ``messages`` (and ``extra_chars`` more) takes."""
    chars = extra_chars
    for message in messages:
        content = message.content
        chars += len(content) if content else 0
        if isinstance(message, AssistantMessage):
            for call in message.calls:
                chars += len(call.function.name) + len(call.function.arguments) + 16
        chars += 8
    return chars // CHARS_PER_TOKEN


def window_for(model: str, configured: int | None) -> int | None:
    """The model's context window: configured (flag or user config) first, then the known families."""
    if configured is not None:
        return configured
    lowered = model.lower()
    return next((size for fragment, size in KNOWN_WINDOWS if fragment in lowered), None)


def cut(message_ids: Sequence[str], messages: Sequence[Message], active: int, keep: int) -> Cut | None:
    """The split for a compaction of the session's messages (ids and messages in order, through the boundary).

    ``active`` is how many of the newest messages are in the active context
    (older ones were compacted before and need not be summarised again, but
    the contract lists every message id).  Returns None when there is nothing
    the retained tail would not already hold.
    """
    total = len(messages)
    if total < 2:
        return None
    first_active = total - active
    candidates = [index for index in _turn_boundaries(messages) if first_active < index <= total - keep]
    if not candidates:
        candidates = [index for index in _turn_boundaries(messages) if first_active < index < total]
    if not candidates:
        return None
    split = max(candidates)
    return Cut(compacted=list(message_ids[:split]), retained=list(message_ids[split:]))


def _turn_boundaries(messages: Sequence[Message]) -> list[int]:
    """Indexes ``i`` where messages ``[:i]`` leave no call unanswered and message ``i`` is a user or assistant message."""
    boundaries = []
    outstanding: set[str] = set()
    for index, message in enumerate(messages):
        if not outstanding and index > 0 and not isinstance(message, ToolMessage):
            boundaries.append(index)
        if isinstance(message, AssistantMessage):
            outstanding = {call.id for call in message.calls}
        elif isinstance(message, ToolMessage):
            outstanding.discard(message.tool_call_id)
        elif isinstance(message, UserMessage):
            outstanding = set()
    return boundaries


def summary_messages(active_context: Sequence[Message], retained: int, instructions: str = "") -> list[Message]:
    """What the summary request sends: the compacted part of the active context, then the instruction (and the user's)."""
    compacted = list(active_context[: len(active_context) - retained])
    instruction = f"{SUMMARY_INSTRUCTION}\n\n{instructions}" if instructions else SUMMARY_INSTRUCTION
    return [*compacted, UserMessage(content=instruction)]


def output_options() -> dict[str, object]:
    """The compaction step's output options; the summary prompt is its system prompt.

    The cut (what is kept) is already in the journal's ``compactionStarted``,
    so it is not part of the step's configuration: a crashed compaction
    resumes whatever ``--keep`` says today.
    """
    return {"purpose": "compaction"}


def summary_prompt_digest() -> str:
    return canonical_digest(SUMMARY_PROMPT)
