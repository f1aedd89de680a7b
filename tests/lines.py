"""Edit journals line by line in tests: decode, change, re-encode, re-seal."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any


def split(data: bytes) -> list[bytes]:
    """Committed lines (without LF); the data must end with LF."""
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def edit_line(data: bytes, line_number: int, change: Callable[[Any], Any]) -> bytes:
    """Decode line N (1-based), let ``change`` return the new value, re-encode it."""
    lines = split(data)
    lines[line_number - 1] = dumps(change(json.loads(lines[line_number - 1])))
    return join(lines)


def reseal(data: bytes) -> bytes:
    """Recompute every seal chain of a v3 journal, as a forger (or a test) would."""
    lines = split(data)
    chain = hashlib.sha256(lines[0] + b"\n").digest()
    out = [lines[0]]
    for line in lines[1:]:
        value = json.loads(line)
        facts = value if isinstance(value, list) else [value]
        last = facts[-1]
        if isinstance(last, dict) and last.get("kind") == "seal":
            last["chain"] = "sha256:" + chain.hex()
            line = dumps(value)
        out.append(line)
        chain = hashlib.sha256(chain + line + b"\n").digest()
    return join(out)
