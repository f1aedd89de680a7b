"""What a tool is to the journal and to a request: its definition, digest and replay policy.

Each tool declares how crash recovery may treat it (``safe`` to run again when
its outcome is unknown, or ``never``: answered with the fixed "interrupted"
text instead).  The built-in tools are :mod:`tiny_agent.agent.tools.builtin`.

Pure: no I/O (the planner and the configuration digest depend on this module).
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

    @property
    def definition_digest(self) -> str:
        return canonical_digest(self.definition)

    def to_wire(self) -> dict[str, Any]:
        """The entry of a Chat Completions ``tools`` array."""
        return {"type": "function", "function": self.definition}

    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(
            name=self.name, definitionDigest=self.definition_digest, replay=self.replay, replayKey=self.replay_key
        )


class ToolOutcome(msgspec.Struct, frozen=True):
    content: str
    ok: bool
