"""The worked example of session-v2 §20, read from the spec itself at test time."""

from __future__ import annotations

import re

from conftest import shared_dir


def example_lines() -> list[str]:
    """The example file's physical lines (the last one is its torn tail, without LF)."""
    spec = (shared_dir() / "spec" / "session-v2.md").read_text(encoding="utf-8")
    start = spec.index("File (IDs abbreviated")
    block = re.search(r"```text\n(.*?)```", spec[start:], re.S)
    assert block is not None, "worked example not found in the spec"
    return block.group(1).rstrip("\n").split("\n")


def example_bytes(through_line: int | None = None) -> bytes:
    """The example journal: all of it (torn tail included), or its first N complete lines."""
    lines = example_lines()
    if through_line is None:
        return ("\n".join(lines[:-1]) + "\n" + lines[-1]).encode()
    return "".join(line + "\n" for line in lines[:through_line]).encode()
