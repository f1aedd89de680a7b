"""Running the built-in tools, confined to one working directory.

A tool failure is an ordinary error result for the model, never an exception.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Final

from tiny_agent.tools import BASH, READ, WRITE, ToolOutcome, ToolSpec, validate_arguments

READ_LIMIT: Final = 256 * 1024
OUTPUT_LIMIT: Final = 64 * 1024


class ConfinementError(Exception):
    """A path that would leave the working directory."""


class ToolBox:
    """The tools offered to the model, bound to one working directory."""

    def __init__(self, cwd: Path, *, allow_bash: bool = False, bash_timeout: float = 30.0) -> None:
        self.root = Path(os.path.realpath(cwd))
        self.allow_bash = allow_bash
        self.bash_timeout = bash_timeout
        self._specs = [READ, WRITE, BASH] if allow_bash else [READ, WRITE]

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    def lookup(self, name: str) -> ToolSpec | None:
        return next((spec for spec in self._specs if spec.name == name), None)

    def validate(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the tool's parameters, or None when they do."""
        spec = self.lookup(name)
        if spec is None:
            return f"unknown tool {name}"
        return validate_arguments(spec.parameters, arguments)

    def execute(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        problem = self.validate(name, arguments)
        if problem is not None:
            return ToolOutcome(content=f"Error: {problem}", ok=False)
        try:
            if name == "read":
                return self._read(arguments["path"])
            if name == "write":
                return self._write(arguments["path"], arguments["content"])
            return self._bash(arguments["command"])
        except ConfinementError as error:
            return ToolOutcome(content=f"Error: {error}", ok=False)
        except OSError as error:
            return ToolOutcome(content=f"Error: {arguments.get('path', name)}: {error.strerror or error}", ok=False)

    # -- confinement ----------------------------------------------------------

    def confine(self, path_text: str) -> Path:
        """The real path for ``path_text`` if it stays inside the working directory."""
        if not path_text or "\x00" in path_text:
            raise ConfinementError("path is empty or contains a NUL byte")
        if os.path.isabs(path_text):
            raise ConfinementError(f"{path_text}: absolute paths are not allowed; use a path relative to the working directory")
        resolved = Path(os.path.realpath(self.root / path_text))
        if resolved != self.root and self.root not in resolved.parents:
            raise ConfinementError(f"{path_text}: leaves the working directory")
        return resolved

    # -- the tools ------------------------------------------------------------

    def _read(self, path_text: str) -> ToolOutcome:
        path = self.confine(path_text)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as file:
            if not os.path.isfile(path):
                return ToolOutcome(content=f"Error: {path_text}: not a regular file", ok=False)
            data = file.read(READ_LIMIT + 1)
        if len(data) > READ_LIMIT:
            return ToolOutcome(content=f"Error: {path_text}: larger than {READ_LIMIT // 1024} KiB", ok=False)
        try:
            return ToolOutcome(content=data.decode("utf-8"), ok=True)
        except UnicodeDecodeError:
            return ToolOutcome(content=f"Error: {path_text}: not a UTF-8 text file", ok=False)

    def _write(self, path_text: str, content: str) -> ToolOutcome:
        path = self.confine(path_text)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.confine(os.path.relpath(path.parent, self.root))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "wb") as file:
            file.write(content.encode("utf-8"))
        return ToolOutcome(content=f"wrote {len(content.encode('utf-8'))} bytes to {path_text}", ok=True)

    def _bash(self, command: str) -> ToolOutcome:
        if not self.allow_bash:
            return ToolOutcome(content="Error: bash is disabled (start tiny-agent with --allow-bash)", ok=False)
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=self.bash_timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return ToolOutcome(content=f"Error: command timed out after {self.bash_timeout:g} s and was killed", ok=False)
        except BaseException:
            _kill_group(process)  # interrupted (Ctrl-C): the command must not outlive its cancellation
            raise
        text = output[:OUTPUT_LIMIT].decode("utf-8", "replace")
        if len(output) > OUTPUT_LIMIT:
            text += f"\n[output truncated at {OUTPUT_LIMIT // 1024} KiB]"
        return ToolOutcome(content=f"{text}\n[exit status {process.returncode}]", ok=process.returncode == 0)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.communicate()
