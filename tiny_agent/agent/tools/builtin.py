"""The built-in tools as declarations: names, JSON Schemas, replay policies, argument validation.

``read`` is ``safe`` to run again when its outcome is unknown; ``write`` and
``bash`` are ``never`` replayed.  Running them is
:mod:`tiny_agent.agent.tools.toolbox`'s job.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from tiny_agent.journal.tools import ToolSpec


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
