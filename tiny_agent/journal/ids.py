"""UUIDv7 identifiers: time-ordered, random, lowercase, as the journal requires."""

from __future__ import annotations

import os
import time


def uuid7(now_ms: int | None = None, random_bytes: bytes | None = None) -> str:
    """A new UUIDv7: 48 bits of Unix milliseconds, version 7, variant 10, 74 random bits."""
    millis = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    rand = os.urandom(10) if random_bytes is None else random_bytes
    value = (millis & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76
    value |= (int.from_bytes(rand[:2], "big") & 0x0FFF) << 64
    value |= 0b10 << 62
    value |= int.from_bytes(rand[2:], "big") & 0x3FFF_FFFF_FFFF_FFFF
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000
