"""What every wire API's request builder returns, and the options they share: a request never holds a secret.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from tiny_agent.journal.tools import ToolSpec
from tiny_agent.journal.transcript import Message

Messages = Sequence[Message]
Tools = Sequence[ToolSpec]


TOOL_CHOICES: Final = ("auto", "none", "required")
"""``--tool-choice``'s words; anything else names the one tool the model must call."""


class RequestOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    max_tokens: int | None = None
    """The cap on generated tokens; None leaves it to the API (Anthropic, which requires one, gets a default)."""
    stream: bool = False
    stream_usage: bool = True
    """Chat Completions only: ask for the usage chunk when streaming (Anthropic and Responses always send usage)."""
    tool_choice: str | None = None
    """One of :data:`TOOL_CHOICES` or a tool's name, sent (in the API's shape) with tools only; None sends none."""
    empty_content: bool = False
    """Chat Completions only: an assistant message's null content is sent as ``""`` (``null-content-as-empty``)."""

    def choice(self, tools: Tools) -> str | None:
        return self.tool_choice if tools else None


PLAIN: Final = RequestOptions()


class WireRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: str
    """Appended to the endpoint's base URL, e.g. ``/messages``."""
    body: bytes
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Non-secret headers this API needs beyond content negotiation (``anthropic-version``)."""
    stream: bool = False
