"""What a tool is to the journal and to a request: its definition, digest and replay policy.  Pure.

The replay policy says how crash recovery may treat a call whose outcome is unknown: ``safe`` to run
again, or ``never`` (answered with the fixed "interrupted" text).
"""

from __future__ import annotations

from typing import Any

import msgspec

from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.state import ReplayPolicy


class ToolDeclaration(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool as the current configuration declares it (the planner's ``current.tools`` shape)."""

    name: str
    definitionDigest: str
    replay: ReplayPolicy
    replayKey: str


class ToolSpec(msgspec.Struct, frozen=True):
    name: str
    description: str
    parameters: dict[str, Any]
    replay: ReplayPolicy
    replay_key: str

    @property
    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def to_wire(self) -> dict[str, Any]:
        """The entry of a Chat Completions ``tools`` array."""
        return {"type": "function", "function": self.definition}

    def declaration(self) -> ToolDeclaration:
        digest = canonical_digest(self.definition)
        return ToolDeclaration(name=self.name, definitionDigest=digest, replay=self.replay, replayKey=self.replay_key)


class ToolOutcome(msgspec.Struct, frozen=True):
    content: str
    ok: bool
