"""Canonical JSON and the digests built on it (session-v2 §13).  Pure.

msgspec's compact encoder escapes strings as the canonical form requires, and ``order="sorted"``
sorts members by code point where the form sorts by UTF-16 code unit: the orders differ only for
member names above U+FFFF, which take the slower, exact path.
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
        match stack.pop():
            case dict() as mapping:
                for name, member in mapping.items():
                    if not name.isascii() and any(ord(ch) > 0xFFFF for ch in name):
                        return True
                    stack.append(member)
            case list() as items:
                stack.extend(items)
            case msgspec.Struct() as struct:
                stack.append(msgspec.to_builtins(struct))
    return False


def _canonical_exact(value: Any) -> str:
    match value:
        case msgspec.Struct():
            return _canonical_exact(msgspec.to_builtins(value))
        case dict():
            members = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
            inner = ",".join(_encode(name).decode() + ":" + _canonical_exact(member) for name, member in members)
            return "{" + inner + "}"
        case list():
            return "[" + ",".join(_canonical_exact(item) for item in value) + "]"
        case _:
            return _encode(value).decode()
