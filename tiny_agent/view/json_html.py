"""JSON values as escaped, indented HTML, the members at chosen paths (the seams' own spelling, as audit names what they
dropped) marked; bounded as docs/view.md says (*Big sessions*).  Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from html import escape
from typing import Any, Final

import msgspec

MAX_DEPTH: Final = 48
STRING_CHARS: Final = 2_000
INDENT: Final = "  "
_LITERALS: Final = {None: "null", True: "true", False: "false"}


class _Printer:
    """Writes a value as HTML within a budget of characters; once spent, the rest is counted, not written."""

    def __init__(self, marked: frozenset[str], budget: int) -> None:
        self.marked = marked
        self.left = budget
        self.spent = False

    def take(self, size: int) -> bool:
        if self.spent:
            return False
        self.left -= size
        self.spent = self.left < 0
        return True

    def value(self, value: Any, path: str, depth: int) -> Iterator[str]:
        if isinstance(value, dict):
            members = ((f"{path}.{key}" if path else key, key, member) for key, member in value.items())
            yield from self.container("{}", "members", len(value), members, depth)
        elif isinstance(value, list):
            items = ((f"{path}[{index}]", None, item) for index, item in enumerate(value))
            yield from self.container("[]", "items", len(value), items, depth)
        else:
            yield _scalar(value)

    def container(
        self, brackets: str, what: str, count: int, children: Iterable[tuple[str, str | None, Any]], depth: int
    ) -> Iterator[str]:
        """An object or an array: each child ``(path, key or None, value)`` on a line of its own."""
        if not count:
            yield brackets
            return
        if depth >= MAX_DEPTH:
            yield f'{brackets[0]}<span class="cut">… {count} {what} nested too deep to show</span>{brackets[1]}'
            return
        yield brackets[0]
        for position, (child, key, member) in enumerate(children):
            yield "\n" + INDENT * (depth + 1)
            hit = child in self.marked
            if hit:
                yield '<mark class="dropped" title="dropped by the seam: not in the transcript">'
            if key is not None:
                yield f'<span class="key">{escape(_string(key))}</span>: '
            yield from self.value(member, child, depth + 1)
            if hit:
                yield "</mark>"
            if position < count - 1:
                yield ","
            if self.spent:
                return
        yield "\n" + INDENT * depth + brackets[1]


def json_html(value: Any, marked: frozenset[str] = frozenset(), budget: int = 65_536) -> str:
    """``value`` pretty-printed as HTML (escaped); members at ``marked`` paths wrapped in ``<mark>``."""
    printer = _Printer(marked, budget)
    pieces: list[str] = []
    for piece in printer.value(value, "", 0):
        if not printer.take(len(piece)):
            break
        pieces.append(piece)
    if printer.spent:
        whole = len(msgspec.json.encode(value))
        pieces.append(f'\n<span class="cut">… cut here: the whole body is {whole:,} bytes of JSON</span>')
    return "".join(pieces)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        if len(value) > STRING_CHARS:
            hidden = len(value) - STRING_CHARS
            shown = escape(_string(value[:STRING_CHARS]))
            return f'<span class="str">{shown}</span><span class="cut"> … {hidden:,} more characters</span>'
        return f'<span class="str">{escape(_string(value))}</span>'
    if value is None or isinstance(value, bool):
        return f'<span class="lit">{_LITERALS[value]}</span>'
    return f'<span class="num">{escape(str(value))}</span>'


def _string(text: str) -> str:
    return msgspec.json.encode(text).decode("utf-8")
