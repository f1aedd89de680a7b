"""JSON values as escaped, indented HTML, with chosen members marked (the fields the seam dropped).

Paths are the seams' own spelling (``choices[0].message.reasoning``,
``usage.cost``), so a dropped path from :mod:`tiny_agent.oversight.audit` marks exactly
the member it names.  Output is bounded: long strings are cut with their
length shown, nesting stops at :data:`MAX_DEPTH`, and the whole stops near
``budget`` characters, saying how much was left out.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from html import escape
from typing import Any, Final

import msgspec

MAX_DEPTH: Final = 48
STRING_CHARS: Final = 2_000
"""A string longer than this shows its start and how many characters are hidden."""
INDENT: Final = "  "


class Budget:
    """Characters left to write; once spent, the rest is counted, not written."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.spent = False

    def take(self, size: int) -> bool:
        if self.spent:
            return False
        self.left -= size
        if self.left < 0:
            self.spent = True
        return True


def json_html(value: Any, marked: frozenset[str] = frozenset(), budget: int = 65_536) -> str:
    """``value`` pretty-printed as HTML (escaped); members at ``marked`` paths wrapped in ``<mark>``."""
    limit = Budget(budget)
    pieces: list[str] = []
    for piece in _value(value, "", 0, marked, limit):
        if not limit.take(len(piece)):
            break
        pieces.append(piece)
    if limit.spent:
        whole = len(msgspec.json.encode(value))
        pieces.append(f'\n<span class="cut">… cut here: the whole body is {whole:,} bytes of JSON</span>')
    return "".join(pieces)


def _value(value: Any, path: str, depth: int, marked: frozenset[str], limit: Budget) -> Iterator[str]:
    if isinstance(value, dict):
        yield from _object(value, path, depth, marked, limit)
    elif isinstance(value, list):
        yield from _array(value, path, depth, marked, limit)
    else:
        yield _scalar(value)


def _object(value: dict[str, Any], path: str, depth: int, marked: frozenset[str], limit: Budget) -> Iterator[str]:
    if not value:
        yield "{}"
        return
    if depth >= MAX_DEPTH:
        yield f'{{<span class="cut">… {len(value)} members nested too deep to show</span>}}'
        return
    pad = INDENT * (depth + 1)
    yield "{"
    for position, (key, member) in enumerate(value.items()):
        child = f"{path}.{key}" if path else key
        yield "\n" + pad
        hit = child in marked
        if hit:
            yield '<mark class="dropped" title="dropped by the seam: not in the transcript">'
        yield f'<span class="key">{escape(_string(key))}</span>: '
        yield from _value(member, child, depth + 1, marked, limit)
        if hit:
            yield "</mark>"
        if position < len(value) - 1:
            yield ","
        if limit.spent:
            return
    yield "\n" + INDENT * depth + "}"


def _array(value: list[Any], path: str, depth: int, marked: frozenset[str], limit: Budget) -> Iterator[str]:
    if not value:
        yield "[]"
        return
    if depth >= MAX_DEPTH:
        yield f'[<span class="cut">… {len(value)} items nested too deep to show</span>]'
        return
    pad = INDENT * (depth + 1)
    yield "["
    for index, item in enumerate(value):
        child = f"{path}[{index}]"
        yield "\n" + pad
        hit = child in marked
        if hit:
            yield '<mark class="dropped" title="dropped by the seam: not in the transcript">'
        yield from _value(item, child, depth + 1, marked, limit)
        if hit:
            yield "</mark>"
        if index < len(value) - 1:
            yield ","
        if limit.spent:
            return
    yield "\n" + INDENT * depth + "]"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        if len(value) > STRING_CHARS:
            hidden = len(value) - STRING_CHARS
            shown = escape(_string(value[:STRING_CHARS]))
            return f'<span class="str">{shown}</span><span class="cut"> … {hidden:,} more characters</span>'
        return f'<span class="str">{escape(_string(value))}</span>'
    if value is None or isinstance(value, bool):
        return f'<span class="lit">{_literal(value)}</span>'
    return f'<span class="num">{escape(str(value))}</span>'


def _string(text: str) -> str:
    return msgspec.json.encode(text).decode("utf-8")


def _literal(value: bool | None) -> str:
    if value is None:
        return "null"
    return "true" if value else "false"
