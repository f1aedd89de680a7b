"""The built-in tools as declarations: names, JSON Schemas, replay policies, argument validation (docs/tools.md).  Pure."""

from __future__ import annotations

from typing import Any, Final

from tiny_agent.journal.state import ReplayPolicy
from tiny_agent.journal.tools import ToolSpec


def _spec(name: str, replay: ReplayPolicy, description: str, **properties: dict[str, Any]) -> ToolSpec:
    required = [member for member, schema in properties.items() if "default" not in schema]
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return ToolSpec(name=name, description=description, parameters=parameters, replay=replay, replay_key=f"builtin:{name}:v1")


def _text(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


_PATH: Final = _text("File path relative to the working directory.")
_WHERE: Final = _text("Directory (or file) relative to the working directory.", default=".")

READ: Final = _spec("read", "safe", "Read a UTF-8 text file inside the working directory and return its content.", path=_PATH)
WRITE: Final = _spec(
    "write",
    "never",
    "Write a UTF-8 text file inside the working directory, replacing it if it exists.",
    path=_PATH,
    content=_text("The complete new file content."),
)
BASH: Final = _spec(
    "bash",
    "never",
    "Run a bash command in the working directory and return its output and exit status.",
    command=_text("The command line to run with bash -c."),
)
EDIT: Final = _spec(
    "edit",
    "never",
    "Replace one exact occurrence of old_text with new_text in a UTF-8 text file inside the working directory. "
    "Fails when old_text is absent or occurs more than once: include enough surrounding text to make it unique.",
    path=_PATH,
    old_text=_text("The exact text to replace, whitespace and line breaks included."),
    new_text=_text("The text to put in its place."),
)
LIST: Final = _spec(
    "list",
    "safe",
    "List a directory inside the working directory: one entry per line, files with their size in bytes, "
    "directories ending in /.",
    path=_text("Directory relative to the working directory.", default="."),
)
GLOB: Final = _spec(
    "glob",
    "safe",
    "Find the paths inside the working directory that match a glob pattern (* and ? within a name, ** for any "
    "number of directories, [abc]), skipping what .gitignore ignores.",
    pattern=_text("The pattern, relative to path, e.g. **/*.py"),
    path=_WHERE,
)
GREP: Final = _spec(
    "grep",
    "safe",
    "Search the text files inside the working directory for a regular expression (Python syntax), line by line, "
    "skipping what .gitignore ignores and binary files. Prints path:line: text for each matching line.",
    pattern=_text("The regular expression."),
    path=_WHERE,
    glob=_text("Only search files whose path matches this glob pattern, e.g. **/*.py (empty: all).", default=""),
    ignore_case=({"type": "boolean", "description": "Match letters in any case.", "default": False}),
    limit={"type": "integer", "description": "The most matching lines to show.", "minimum": 1, "maximum": 1000, "default": 200},
)

BUILTIN: Final = (READ, WRITE, EDIT, LIST, GLOB, GREP, BASH)

_TYPES: Final[dict[str, tuple[type, str]]] = {
    "string": (str, "a string"),
    "integer": (int, "an integer"),
    "boolean": (bool, "true or false"),
}


def validate_arguments(schema: dict[str, Any], arguments: Any) -> str | None:
    """The subset of JSON Schema our tools use: an object of string, integer and boolean members, integer bounds."""
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
        kind, word = _TYPES.get(declared.get("type"), (object, ""))
        if kind is not object and type(value) is not kind:
            return f'argument "{name}" is not {word}'
        low, high = declared.get("minimum", value), declared.get("maximum", value)
        if kind is int and not low <= value <= high:
            return f'argument "{name}" must be between {low} and {high}'
    return None


def with_defaults(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with every omitted optional member set to its declared default."""
    defaults = {name: member["default"] for name, member in schema.get("properties", {}).items() if "default" in member}
    return defaults | arguments
