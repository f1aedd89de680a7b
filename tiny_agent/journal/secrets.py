"""What a secret is, and the one redactor every text leaving the process goes through (docs/tools.md, "Redaction").

Pure: no I/O (the output guard only wraps the streams it is given).
"""

from __future__ import annotations

import base64
import html
import json
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, AnyStr, Final, TextIO
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

import msgspec
from msgspec import UNSET

from tiny_agent.journal.facts import Fact

MARKER: Final = "[REDACTED]"
MIN_SECRET_LENGTH: Final = 8
_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/"}

SECRET_PARAMETER: Final = r"(?i)key|token|secret|sig|pass|pwd|auth|credential|code|session"


def is_secret_parameter(name: str, value: str = "") -> bool:
    """Whether a (decoded) query parameter is a credential: by its name, or a long letter-and-digit value."""
    if re.search(SECRET_PARAMETER, name):
        return True
    return len(value) >= 16 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


class Secrets:
    """The secret strings a process holds, compiled into the patterns that find them in any spelling (a plain class: no
    repr shows a value)."""

    __slots__ = ("_values", "_spelled", "_cores", "_core_bytes", "_escapes", "_escape_bytes", "_compiled")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: tuple[str, ...] = tuple(sorted({value for value in values if _worth_hiding(value)}, key=len, reverse=True))
        self._spelled = [[_spellings(character) for character in value] for value in self._values]
        # The fast look before a full search: a secret in plain (one holding another is found through it), or any escape.
        kept = self._values
        self._cores = tuple(value for value in kept if not any(other in value for other in kept if other != value))
        self._core_bytes = tuple(core.encode() for core in self._cores)
        characters = set("".join(kept))
        short = {_SHORT_ESCAPES[character] for character in characters & _SHORT_ESCAPES.keys()}
        html_escaped = any(html.escape(character) != character for character in characters)
        self._escapes = ("\\u", *short, *(["&"] if html_escaped else []))
        """How every escape in a spelling starts: text without any of these needs no full search."""
        self._escape_bytes = tuple(start.encode() for start in self._escapes)
        self._compiled: dict[str, re.Pattern[Any]] = {}

    def _regex(self, kind: str) -> re.Pattern[Any]:
        """A pattern compiled on first use (``text``, ``bytes``, ``escape``, ``escape-bytes``, ``start``)."""
        found = self._compiled.get(kind)
        if found is None:
            spelled = self._spelled
            if kind.startswith("escape"):
                source = "|".join(sorted({_either(forms[1:]) for each in spelled for forms in each}))
            else:
                source = "|".join((_prefix_pattern if kind == "start" else _pattern)(each) for each in spelled)
            found = self._compiled[kind] = re.compile(source.encode() if kind.endswith("bytes") else source)
        return found

    @property
    def values(self) -> tuple[str, ...]:
        """The secrets kept (long enough to be worth hiding), longest first."""
        return self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self._values + other._values)

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} values>)"

    def _may_hold(self, data: str | bytes) -> bool:
        """A fast look (substring search) that rules a text out; the full pattern runs only when this says yes."""
        text = type(data) is str
        for core in self._cores if text else self._core_bytes:
            if core in data:  # type: ignore[operator]
                return True
        for start in self._escapes if text else self._escape_bytes:
            if start in data:  # type: ignore[operator]
                return bool(self._regex("escape" if text else "escape-bytes").search(data))
        return False

    def held_from(self, text: str) -> int:
        """Where the tail of ``text`` that may be the start of a secret begins (``len(text)`` when none may)."""
        window = max((sum(max(map(len, forms)) for forms in each) for each in self._spelled), default=0)
        starts = {value[0] for value in self._values} | {"\\", "&"}
        for index in range(max(0, len(text) - window), len(text)):
            if text[index] in starts and self._regex("start").fullmatch(text, index):
                return index
        return len(text)


def key_secrets(key: str) -> list[str]:
    """A key and the one header value that carries it as a bearer token."""
    return [key, f"Bearer {key}"]


def collect_secrets(*, api_key: str | None = None, base_url: str | None = None) -> Secrets:
    """The secrets of a provider configuration: the key, its Authorization header, the base URL's credentials."""
    values: list[str] = []
    if api_key:
        values += key_secrets(api_key)
    if base_url:
        values += url_secrets(base_url)
    return Secrets(values)


def basic_credentials(parts: SplitResult) -> str:
    """The ``Basic`` authorization value an HTTP client builds from a URL's user and password."""
    return base64.b64encode(f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()).decode("ascii")


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries, as written and percent-decoded: a password (and the Basic value made with it), a
    username alone, and secret query values."""
    parts = urlsplit(url)
    found: list[str] = []
    if parts.password is not None:
        basic = basic_credentials(parts)
        found += [parts.password, unquote(parts.password), basic, f"Basic {basic}"]
    elif parts.username:
        found += [parts.username, unquote(parts.username)]
    written = [piece.partition("=")[2] for piece in parts.query.split("&") if piece]
    decoded = parse_qsl(parts.query, keep_blank_values=True)
    for (name, value), as_written in zip(decoded, written, strict=False):
        if value and is_secret_parameter(name, value):
            found += [as_written, value]
    return found


# -- the process's secrets --------------------------------------------------------------

_known = Secrets()


def known() -> Secrets:
    """The secrets this process holds: what every choke point hides."""
    return _known


def remember(secrets: Secrets, *, replace: bool = False) -> None:
    """Add ``secrets`` to what the process hides (``replace``: start again from them)."""
    global _known
    _known = secrets if replace else _known | secrets


# -- redacting ----------------------------------------------------------------------------


def redact_text(text: str, secrets: Secrets | None = None) -> tuple[str, int]:
    """``text`` with every secret (in any spelling) replaced by the marker, and how many replacements were made."""
    return _redact(text, "text", MARKER, secrets)


def redact_bytes(data: bytes, secrets: Secrets | None = None) -> tuple[bytes, int]:
    """The same over bytes (a body that is not UTF-8 text), matching each secret's UTF-8 encoding."""
    return _redact(data, "bytes", MARKER.encode("ascii"), secrets)


def _redact(data: AnyStr, kind: str, marker: AnyStr, secrets: Secrets | None) -> tuple[AnyStr, int]:
    held = _known if secrets is None else secrets
    total = 0
    while held._values and held._may_hold(data):  # again: a replacement can join what is around it into a new occurrence
        data, count = held._regex(kind).subn(marker, data)
        if count == 0:
            break
        total += count
    return data, total


_INNER: Final = r'[^"\\\n]*(?:\\.[^"\\\n]*)*'
"""What is between the quotes of a JSON string, as written (no newline: a stream's events are lines)."""
_NAMES: Final = r'"([^"\\\n]*)"\s*:\s*"'
"""Member names whose value is a string."""


def redact_body(text: str, secrets: Secrets | None = None) -> tuple[str, int]:
    """A response body with every secret replaced, those a stream splits across the values of one member name too (the
    marker in the first piece, the rest removed from the others); then the body as a whole."""
    held = _known if secrets is None else secrets
    streamed = text.startswith(("data:", "event:", ":")) or "\ndata:" in text
    if not held or not (streamed or held._may_hold(text)):
        return text, 0
    edits: list[tuple[tuple[int, int], str]] = []
    count = 0
    for name in set(re.findall(_NAMES, text)):
        member = re.compile(f'"{re.escape(name)}"\\s*:\\s*"({_INNER})"')
        if not held._may_hold("".join(member.findall(text))):  # as written: a key in pieces, or an escape
            continue
        spans = [match.span(1) for match in member.finditer(text)]
        found, rewritten = _rewrite_joined([_decoded(text[start:end]) for start, end in spans], held)
        count += found
        edits += [(span, json.dumps(new)[1:-1]) for span, new in zip(spans, rewritten, strict=True) if new is not None]
    out, position = [], 0
    for (start, end), inner in sorted(edits):
        out += [text[position:start], inner]
        position = end
    text, rest = redact_text("".join(out) + text[position:], held)
    return text, count + rest


def _decoded(inner: str) -> str:
    if "\\" not in inner:
        return inner
    try:
        return str(json.loads(f'"{inner}"'))
    except ValueError:
        return inner


def _rewrite_joined(values: list[str], secrets: Secrets) -> tuple[int, list[str | None]]:
    """Pieces of one text with every secret in their join replaced (the marker where it starts, nothing after);
    None for a piece no secret touches."""
    joined = "".join(values)
    spans = [match.span() for match in secrets._regex("text").finditer(joined)]
    rewritten: list[str | None] = []
    end = 0
    for value in values:
        start, end = end, end + len(value)
        touching = [(first, last) for first, last in spans if last > start and first < end]
        out, position = [], start
        for first, last in touching:
            out += [joined[position : max(first, start)], MARKER if start <= first else ""]
            position = min(last, end)
        rewritten.append("".join(out) + joined[position:end] if touching else None)
    return len(spans), rewritten


def redact_facts(facts: list[Fact], secrets: Secrets | None = None) -> list[Fact]:
    """The facts of a transaction with every string redacted; a raw body's replacements counted in it."""
    held = _known if secrets is None else secrets
    if not held:
        return facts
    return [_scrubbed(fact, held)[0] for fact in facts]


def _scrubbed(value: Any, secrets: Secrets) -> tuple[Any, int]:
    """``value`` with every string redacted, and how many replacements (0: ``value`` itself, unchanged)."""
    if type(value) is str:
        return redact_text(value, secrets)
    if type(value) is list:
        results = [_scrubbed(item, secrets) for item in value]
        changed = sum(count for _, count in results)
        return ([item for item, _ in results] if changed else value), changed
    if type(value) is dict:
        pairs = [(_scrubbed(name, secrets), _scrubbed(item, secrets)) for name, item in value.items()]
        changed = sum(name[1] + item[1] for name, item in pairs)
        return ({name[0]: item[0] for name, item in pairs} if changed else value), changed
    if not isinstance(value, msgspec.Struct):
        return value, 0
    changes: dict[str, Any] = {}
    changed = in_body = 0
    for field in value.__struct_fields__:
        old = getattr(value, field)
        if field == "body" and type(old) is str and hasattr(value, "bodyBase64"):  # a response or an MCP message
            new, count = redact_body(old, secrets)
            in_body += count
        elif field == "bodyBase64" and type(old) is str:
            data, count = redact_bytes(base64.b64decode(old), secrets)
            new, in_body = base64.b64encode(data).decode("ascii"), in_body + count
        else:
            new, count = _scrubbed(old, secrets)
        if count:
            changes[field] = new
            changed += count
    if in_body:
        earlier = getattr(value, "redactions", UNSET)
        changes["redactions"] = in_body + (0 if earlier is UNSET else earlier)
    return (msgspec.structs.replace(value, **changes) if changes else value), changed


class SecretStream:
    """Text that arrives in pieces (a streamed answer), let out redacted: what may start a secret is held back."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        joined = redact_text(self._held + text)[0]
        cut = _known.held_from(joined)
        self._held = joined[cut:]
        return joined[:cut]

    def finish(self) -> str:
        rest, self._held = self._held, ""
        return rest


# -- the process's output ------------------------------------------------------------------


class _Guarded:
    """A stream whose every write is redacted first (a text stream's ``buffer`` too); the rest is the stream's own."""

    def __init__(self, stream: TextIO | IO[bytes], text: bool = True) -> None:
        self._stream: Any = stream
        if text:
            self.buffer = _Guarded(stream.buffer, text=False) if hasattr(stream, "buffer") else None

    def write(self, data: str | bytes) -> int:
        self._stream.write(redact_text(data)[0] if isinstance(data, str) else redact_bytes(bytes(data))[0])
        return len(data)

    def writelines(self, lines: Iterable[str | bytes]) -> None:
        # The stream's own writelines would bypass write, and so the redaction.
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guarded_output(secrets: Secrets) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` (text and bytes) redacted for the life of a command that holds ``secrets``."""
    held = _known
    remember(secrets, replace=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (_Guarded(stream) if stream is not None else stream for stream in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        remember(held, replace=True)


# -- spellings -------------------------------------------------------------------------------


def _worth_hiding(value: str) -> bool:
    if len(value) < MIN_SECRET_LENGTH:
        return False
    marker_run = MARKER * (len(value) // len(MARKER) + 2)
    return value not in marker_run


Spelling = list[str]
"""One way to write a character, as regex tokens that each match one character (``\\\\``, ``u``, ``0``, ``[bB]``)."""


def _spellings(character: str) -> list[Spelling]:
    """The character as itself first, then as a JSON encoder (``\\u006b``, ``\\u006B``, ``\\/``) or an HTML escaper writes it."""
    units = character.encode("utf-16-be").hex()
    escape = [token for index in range(0, len(units), 4) for token in ("\\\\", "u", *units[index : index + 4])]
    forms = [[re.escape(character)], [f"[{token}{token.upper()}]" if token in "abcdef" else token for token in escape]]
    written = [_SHORT_ESCAPES.get(character, character)]
    if html.escape(character) != character:
        written += [html.escape(character), f"&#{ord(character)};", f"&#x{ord(character):x};"]
    return forms + [[re.escape(each) for each in form] for form in written if form != character]


def _either(forms: list[Spelling]) -> str:
    return "(?:" + "|".join("".join(form) for form in sorted(forms, key=len, reverse=True)) + ")"


def _pattern(spelled: list[list[Spelling]]) -> str:
    """One secret in any spelling: a group per character, longest spelling first."""
    return "".join(_either(forms) for forms in spelled)


def _prefix_pattern(spelled: list[list[Spelling]]) -> str:
    """Any start of one secret in any spelling, down to a piece of one character's escape."""
    pattern = ""
    for forms in reversed(spelled):
        pieces = "|".join(sorted({"".join(form[:cut]) for form in forms for cut in range(1, len(form))}, key=len, reverse=True))
        pattern = f"(?:{_either(forms)}(?:{pattern})?" + (f"|{pieces}" if pieces else "") + ")"
    return pattern
