"""The built-in tools as declarations: names, JSON Schemas, replay policies, argument validation.

Each tool declares how crash recovery may treat it: ``read`` is ``safe`` to
run again when its outcome is unknown; ``write`` and ``bash`` are ``never``
replayed (their unknown outcome is answered with the fixed "interrupted"
text instead).  Running them is :mod:`tiny_agent.toolbox`'s job.

Pure: no I/O (the planner and the configuration digest depend on this module).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tiny_agent.canonical import canonical_digest
from tiny_agent.state import ReplayPolicy


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


def _object(properties: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "required": required,
        "additionalProperties": False,
    }


READ: Final = ToolSpec(
    name="read",
    description="Read a UTF-8 text file inside the working directory and return its content.",
    parameters=_object({"path": "File path relative to the working directory."}, ["path"]),
    replay="safe",
    replay_key="builtin:read:v1",
)
WRITE: Final = ToolSpec(
    name="write",
    description="Write a UTF-8 text file inside the working directory, replacing it if it exists.",
    parameters=_object(
        {"path": "File path relative to the working directory.", "content": "The complete new file content."},
        ["path", "content"],
    ),
    replay="never",
    replay_key="builtin:write:v1",
)
BASH: Final = ToolSpec(
    name="bash",
    description="Run a bash command in the working directory and return its output and exit status.",
    parameters=_object({"command": "The command line to run with bash -c."}, ["command"]),
    replay="never",
    replay_key="builtin:bash:v1",
)


def validate_arguments(schema: dict[str, Any], arguments: Any) -> str | None:
    """The subset of JSON Schema our tools use: an object of required/optional string members."""
    if type(arguments) is not dict:
        return "arguments are not a JSON object"
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in arguments:
            return f'missing argument "{name}"'
    for name, value in arguments.items():
        declared = properties.get(name)
        if declared is None:
            if schema.get("additionalProperties") is False:
                return f'unknown argument "{name}"'
            continue
        if declared.get("type") == "string" and type(value) is not str:
            return f'argument "{name}" is not a string'
    return None
