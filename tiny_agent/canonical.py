"""Canonical JSON and the digests built on it (session-v2 §13).

Pure.  msgspec's compact encoder already escapes strings exactly as the
canonical form requires (short escapes for ``\\b \\t \\n \\f \\r``, lowercase
``\\u00xx`` for other control characters, everything else literal), and
``order="sorted"`` sorts object members.  It sorts by code point where the
canonical form sorts by UTF-16 code unit; the two orders differ only between
a character in U+E000..U+FFFF and one above U+FFFF, so objects whose member
names can carry such characters go through the slower, exact path.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

_encode = msgspec.json.encode


def canonical_json(value: Any) -> bytes:
    """The canonical UTF-8 bytes of a value made of objects, arrays, strings, integers and null."""
    if _has_astral_member_name(value):
        return _canonical_exact(value).encode("utf-8")
    return _encode(value, order="sorted")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_digest(value: Any) -> str:
    return sha256_digest(canonical_json(value))


def _has_astral_member_name(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for name, member in item.items():
                if not name.isascii() and any(ord(ch) > 0xFFFF for ch in name):
                    return True
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, msgspec.Struct):
            stack.append(msgspec.to_builtins(item))
    return False


def _utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be")


def _canonical_exact(value: Any) -> str:
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    if isinstance(value, dict):
        members = sorted(value.items(), key=lambda item: _utf16_key(item[0]))
        inner = ",".join(_encode(name).decode() + ":" + _canonical_exact(member) for name, member in members)
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical_exact(item) for item in value) + "]"
    return _encode(value).decode()
