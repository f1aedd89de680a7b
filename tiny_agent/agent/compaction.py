"""Compaction as tiny-agent writes it: when to compact, where to cut (in pieces if need be), what to ask, and the
estimates it rests on (:class:`Sizing`): docs/compaction.md.  Pure: no I/O."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec

from tiny_agent.journal.state import IdleOperation, SessionState
from tiny_agent.journal.transcript import AssistantMessage, Message, ToolMessage, Usage, UserMessage

CHARS_PER_TOKEN: Final = 4
"""The estimate before the provider has reported a count."""
DEFAULT_THRESHOLD: Final = 0.8
KEEP_SHARE: Final = 0.2
"""The kept tail's default budget: this share of the window."""
KEEP_UNKNOWN: Final = 4_000
"""The kept tail's default budget in tokens when the window is unknown."""
ELIDE_UNKNOWN: Final = 2_000
"""Tokens a tool result keeps in a summary request when the window is unknown."""
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
ELIDED: Final = "\n[… {} characters of this tool result elided by tiny-agent for the summary …]\n"

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

_WINDOW: Final = re.compile(r"maximum context length is (\d+)|context size \((\d+)|(\d+) maximum|> (\d+)")
_PROMPT: Final = re.compile(
    r"request \((\d+) tokens|resulted in (\d+)|too long: (\d+)|contains (\d+) tokens|has (\d+) input|"
    r"(\d+) in the messages|(\d+) of text input|context limit: (\d+)"
)


class Cut(msgspec.Struct, frozen=True):
    """Where a compaction splits the session's messages."""

    compacted: list[str]
    """Message entry ids summarised (from the session's first message)."""
    retained: list[str]
    """Message entry ids kept verbatim, through the input boundary."""

    @classmethod
    def at(cls, message_ids: Sequence[str], index: int) -> Cut:
        return cls(compacted=list(message_ids[:index]), retained=list(message_ids[index:]))

    @property
    def through(self) -> str:
        """The compaction entry's ``compactedThroughEntryId``."""
        return self.compacted[-1]


def size(messages: Sequence[Message]) -> int:
    """Characters of ``messages``: contents, and tool calls' names and arguments, with a little for their framing."""
    calls = (call for message in messages if isinstance(message, AssistantMessage) for call in message.calls)
    return sum(len(message.content or "") + 8 for message in messages) + sum(
        len(call.function.name) + len(call.function.arguments) + 16 for call in calls
    )


def estimate_tokens(messages: Sequence[Message], extra_chars: int = 0) -> int:
    """Roughly how many tokens ``messages`` (and ``extra_chars`` more) take, at four characters a token."""
    return (size(messages) + extra_chars) // CHARS_PER_TOKEN


def window_for(model: str, configured: int | None) -> int | None:
    """The model's context window: configured (flag or user config) first, then the known families."""
    if configured is not None:
        return configured
    lowered = model.lower()
    return next((size for fragment, size in KNOWN_WINDOWS if fragment in lowered), None)


def stated_sizes(message: str) -> tuple[int | None, int | None]:
    """The prompt's tokens and the window, as a context-length error's message states them (None where it does not)."""

    def first(pattern: re.Pattern[str]) -> int | None:
        found = pattern.search(message)
        return int(next(group for group in found.groups() if group)) if found else None

    return first(_PROMPT), first(_WINDOW)


class Sizing:
    """What a command knows of the model's window and tokenizer, for estimates before a request (docs/compaction.md,
    *Sizes*)."""

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.chars_per_token: float = CHARS_PER_TOKEN
        self.sent: int | None = None
        """Characters of the request in flight (system prompt, tools and messages), to learn the ratio from."""

    def tokens(self, state: SessionState, fixed_chars: int) -> int:
        context = state.activeContext
        if state.lastCount is not None:
            tokens, transcript, active = state.lastCount
            if len(state.transcript) - transcript == len(context) - active >= 0:
                return tokens + self.to_tokens(size(context[active:]))
        return self.to_tokens(fixed_chars + size(context))

    def to_tokens(self, chars: int) -> int:
        return round(chars / self.chars_per_token)

    def to_chars(self, tokens: int) -> int:
        return int(tokens * self.chars_per_token)

    def settled(self, usage: Usage | None, failure: tuple[str, str] | None) -> None:
        """What a settled attempt teaches: the characters per token of the request just answered, or a context-length
        error's words."""
        if usage is not None and usage.prompt_total and self.sent:
            self.chars_per_token = _ratio(self.sent, usage.prompt_total)
        elif failure is not None and failure[0] == CONTEXT_LENGTH_EXCEEDED:
            self.learn(failure[1])
        self.sent = None

    def learn(self, failure: str) -> bool:
        """Take the window and the ratio from a context-length error's words; True if either changed."""
        prompt, window = stated_sizes(failure)
        changed = False
        if window is not None and (self.window is None or window < self.window):
            self.window, changed = window, True
        if prompt and self.sent and _ratio(self.sent, prompt) < self.chars_per_token:
            self.chars_per_token, changed = _ratio(self.sent, prompt), True
        self.sent = None
        return changed

    def describe(self) -> str:
        return "an unknown window" if self.window is None else f"the model's {self.window:,}-token window"

    @property
    def reserve(self) -> int | None:
        """The summary's token cap: an eighth of the window, at most 4,096."""
        return None if self.window is None else min(self.window // 8, 4096)

    def capacity(self, fixed_chars: int) -> int | None:
        """Characters the messages of one summary request may take: 90% of the window, less the summary's cap."""
        window, reserve = self.window, self.reserve
        return None if window is None or reserve is None else self.to_chars(window - window // 10 - reserve) - fixed_chars

    def elide_chars(self, fixed_chars: int) -> int:
        """The longest tool result a summary request carries whole: a quarter of its room."""
        capacity = self.capacity(fixed_chars)
        return max(200, capacity // 4 if capacity is not None else self.to_chars(ELIDE_UNKNOWN))

    def keep_chars(self, keep_tokens: int | None) -> int:
        if keep_tokens is None:
            keep_tokens = KEEP_UNKNOWN if self.window is None else int(self.window * KEEP_SHARE)
        return self.to_chars(keep_tokens)


def _ratio(chars: int, tokens: int) -> float:
    """Characters per token, within what tokenizers do (a provider's odd count must not blind the estimates)."""
    return min(8.0, max(0.5, chars / tokens))


# -- where to cut -----------------------------------------------------------------------


def active_start(state: SessionState) -> int:
    """The index of the first transcript message the active context holds verbatim (after its summary, if any)."""
    context, transcript = state.activeContext, state.transcript
    if not context or len(context) > len(transcript):
        return len(transcript) - max(0, len(context) - 1)
    return len(transcript) - (len(context) if context[0] == transcript[len(transcript) - len(context)] else len(context) - 1)


def boundaries(messages: Sequence[Message], start: int) -> list[int]:
    """Turn boundaries after ``start``: ``i`` where ``messages[:i]`` leave no call unanswered and
    ``messages[i]`` is a user or assistant message (the end too, when nothing is unanswered)."""
    found = []
    outstanding: set[str] = set()
    for index in range(start, len(messages)):
        message = messages[index]
        if index > start and not outstanding and not isinstance(message, ToolMessage):
            found.append(index)
        if isinstance(message, AssistantMessage):
            outstanding = {call.id for call in message.calls}
        elif isinstance(message, ToolMessage):
            outstanding.discard(message.tool_call_id)
        else:
            outstanding = set()
    if not outstanding and len(messages) > start:
        found.append(len(messages))
    return found


def tail_cut(state: SessionState, keep_chars: int) -> int | None:
    """Where the kept tail starts: the longest tail within ``keep_chars`` that starts at a turn boundary and
    leaves a turn to summarise, else the shortest one; None when there is no turn to summarise."""
    transcript = state.transcript
    cuts = boundaries(transcript, active_start(state))
    if not cuts:
        return None
    chosen, kept, position = cuts[-1], 0, len(transcript)
    for cut in reversed(cuts):
        kept += size(transcript[cut:position])
        position = cut
        if kept > keep_chars:
            break
        chosen = cut
    return chosen


def continuation_due(state: SessionState) -> str | None:
    """Why the session's last run must be continued after a compaction (its failure code), or None."""
    last_run = state.lastRunOutcome
    if last_run is None or last_run.outcome != "failed" or not isinstance(state.operation, IdleOperation):
        return None
    if last_run.errorCode == CONTEXT_FULL:
        return CONTEXT_FULL
    failure = state.lastStepFailure
    return CONTEXT_LENGTH_EXCEEDED if failure is not None and failure.code == CONTEXT_LENGTH_EXCEEDED else None


class Unfit(Exception):
    """No summary request can hold what must be summarised next (the message says why)."""


def next_piece(state: SessionState, sizing: Sizing, fixed_chars: int, final: int) -> int:
    """Where the next compaction ends: at ``final``, or at the furthest turn boundary before it whose summary
    request fits the window (raises :class:`Unfit` when not even the next turn does)."""
    capacity = sizing.capacity(fixed_chars)
    if capacity is None:
        return final
    if capacity <= 0:
        raise Unfit(f"the summary request's own prompt does not fit {sizing.describe()}")
    transcript, context, elide = state.transcript, state.activeContext, sizing.elide_chars(fixed_chars)
    start = position = active_start(state)
    summarised = size([_elided(message, elide) for message in context[: len(context) - (len(transcript) - start)]])
    best = None
    for cut in boundaries(transcript, start):
        summarised += size([_elided(message, elide) for message in transcript[position:cut]])
        if cut > final or summarised > capacity:
            break
        best, position = cut, cut
    if best is None:
        raise Unfit(
            f"the turn after message #{start} does not fit one summary request in {sizing.describe()} (room for "
            f"~{sizing.to_tokens(capacity):,} tokens after the summary prompt, with long tool results elided)"
        )
    return best


def describe_piece(state: SessionState, end: int, final: int) -> str:
    count = end - active_start(state)
    what = f"{count} message{'' if count == 1 else 's'} into a summary"
    if end < final:
        return f"compacting a piece (the rest does not fit one summary request): {what}"
    return f"compacting: {what}, {len(state.transcript) - final} kept verbatim"


# -- what to ask --------------------------------------------------------------------------


def instruction(guidance: str = "") -> str:
    return f"{SUMMARY_INSTRUCTION}\n\n{guidance}" if guidance else SUMMARY_INSTRUCTION


def summary_messages(active_context: Sequence[Message], retained: int, guidance: str, elide: int) -> list[Message]:
    """What the summary request sends: the compacted part of the active context, long tool results
    elided, then the instruction (with the user's guidance)."""
    compacted = active_context[: len(active_context) - retained]
    return [*(_elided(message, elide) for message in compacted), UserMessage(content=instruction(guidance))]


def _elided(message: Message, limit: int) -> Message:
    if not isinstance(message, ToolMessage) or len(message.content) <= limit:
        return message
    half = limit // 2
    text = message.content
    content = text[:half] + ELIDED.format(f"{len(text) - 2 * half:,}") + text[len(text) - half :]
    return ToolMessage(content=content, tool_call_id=message.tool_call_id)


OUTPUT_OPTIONS: Final = {"purpose": "compaction"}
"""The compaction step's output options (not the cut, the cap, the elision or the guidance: docs/compaction.md)."""
