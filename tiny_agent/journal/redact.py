"""Secrets out of everything that is kept or shown: the API key, its header, credentials in a URL.

A provider may echo what it was sent — a 401 body quoting ``Bearer sk-...``,
a model repeating the key it was shown, a proxy's error page quoting the
request URL — and the journal keeps bodies as received.  Before such bytes
are journaled or printed, :func:`redact_text` / :func:`redact_bytes` replace
every exact occurrence of a secret the process holds with :data:`MARKER` and
say how many they replaced.

Rules:

- Only exact occurrences are found: the secret as is, and the forms a JSON
  encoder may turn it into inside a string (``"`` and ``\\`` escaped,
  ``/`` written ``\\/``, ``<``, ``>`` and ``&`` written ``\\u003c``..., and
  non-ASCII written ``\\uXXXX`` in either case of hex).  A body is raw text,
  so a key inside a JSON string appears in its escaped form; without these
  forms a key with a ``/`` in it would survive a PHP or Go encoder's echo.
- Secrets shorter than :data:`MIN_SECRET_LENGTH` are ignored: a 4-character
  password would turn every ``test`` or ``1234`` in a transcript into the
  marker, and a secret that short is no protection anyway.
- Longer secrets are matched first (``Bearer <key>`` is one replacement, not
  ``Bearer [REDACTED]``), in a left-to-right scan.  The scan is repeated
  until it finds nothing, because a secret containing ``[`` or ``]`` can
  reappear across a marker the scan just wrote (``ab[REDAC`` in
  ``ab`` + marker); ordinary keys never need a second pass to change anything.
- A secret that is itself a piece of a run of markers (``REDACTED``) is
  dropped: it reveals nothing, and keeping it would let the marker match
  forever.  Without such secrets every repeated match consumes at least one
  character that is not part of a marker, so the repetition ends.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Iterable
from typing import AnyStr, Final
from urllib.parse import unquote, unquote_plus, urlsplit

MARKER: Final = "[REDACTED]"
MIN_SECRET_LENGTH: Final = 8

SECRET_PARAMETER_WORDS: Final = ("key", "token", "secret", "password", "passwd", "auth", "credential", "signature")
"""A query parameter whose name contains one of these (any case) carries a credential."""

SECRET_PARAMETER_NAMES: Final = frozenset({"sig", "code", "pwd", "pass"})
"""Short names matched whole: as substrings they would hit ordinary names (``design``, ``passage``)."""


class Secrets:
    """The secret strings a process holds, ready to be searched for.

    A plain class rather than a Struct on purpose: its ``repr`` must never
    show a value (a Struct's would), and it keeps the compiled patterns.
    """

    __slots__ = ("_values", "_text_pattern", "_bytes_pattern")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: tuple[str, ...] = tuple(sorted({value for value in values if _worth_hiding(value)}, key=len, reverse=True))
        forms = sorted({form for value in self._values for form in _encoded_forms(value)}, key=len, reverse=True)
        self._text_pattern = re.compile("|".join(re.escape(form) for form in forms)) if forms else None
        self._bytes_pattern = re.compile(b"|".join(re.escape(form.encode("utf-8")) for form in forms)) if forms else None

    @property
    def values(self) -> tuple[str, ...]:
        """The secrets kept (long enough to be worth hiding), longest first."""
        return self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self._values + other._values)

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} values>)"

    __str__ = __repr__


def collect_secrets(*, api_key: str | None = None, base_url: str | None = None, extra: Iterable[str] = ()) -> Secrets:
    """The secrets of a provider configuration: the key, its Authorization header, the base URL's credentials."""
    values = list(extra)
    if api_key:
        values += [api_key, f"Bearer {api_key}"]
    if base_url:
        values += url_secrets(base_url)
    return Secrets(values)


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its userinfo and its secret-looking query values.

    Both the form written in the URL and its percent-decoded form are kept,
    since a server may echo either.  A username alone (``https://TOKEN@host``)
    is a token; a username beside a password is kept only inside the Basic
    authorization value that an HTTP client builds from the pair.
    """
    parts = urlsplit(url)
    found: list[str] = []
    username = parts.username
    password = parts.password
    if password is not None:
        found += [password, unquote(password)]
        pair = f"{unquote(username or '')}:{unquote(password)}".encode()
        basic = base64.b64encode(pair).decode("ascii")
        found += [basic, f"Basic {basic}"]
    elif username:
        found += [username, unquote(username)]
    for piece in parts.query.split("&"):
        name, _, value = piece.partition("=")
        if value and is_secret_parameter(unquote_plus(name)):
            found += [value, unquote_plus(value)]
    return found


def is_secret_parameter(name: str) -> bool:
    """Whether a query parameter's name says its value is a credential."""
    lowered = name.lower()
    return lowered in SECRET_PARAMETER_NAMES or any(word in lowered for word in SECRET_PARAMETER_WORDS)


def redact_text(text: str, secrets: Secrets) -> tuple[str, int]:
    """``text`` with every secret replaced by the marker, and how many replacements were made."""
    return _replace_until_none_left(secrets._text_pattern, MARKER, text)


def redact_bytes(data: bytes, secrets: Secrets) -> tuple[bytes, int]:
    """The same over bytes (a body that is not UTF-8 text), matching each secret's UTF-8 encoding."""
    return _replace_until_none_left(secrets._bytes_pattern, MARKER.encode("ascii"), data)


def _replace_until_none_left(pattern: re.Pattern[AnyStr] | None, marker: AnyStr, data: AnyStr) -> tuple[AnyStr, int]:
    """Replace until nothing matches: a replacement can join the text around it into a new occurrence."""
    total = 0
    while pattern is not None:
        data, count = pattern.subn(marker, data)
        if count == 0:
            break
        total += count
    return data, total


def strip_url_credentials(url: str) -> str:
    """``url`` without userinfo and without secret-looking query parameters; everything else exactly as written."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return _strip_query(url)
    authority_start = scheme_end + 3
    authority_end = len(url)
    for delimiter in "/?#":
        found = url.find(delimiter, authority_start)
        if found >= 0:
            authority_end = min(authority_end, found)
    host = url[authority_start:authority_end].rpartition("@")[2]
    return url[:authority_start] + host + _strip_query(url[authority_end:])


def _strip_query(rest: str) -> str:
    """A URL's path, query and fragment with the secret-looking query parameters removed."""
    before_fragment, hash_sign, fragment = rest.partition("#")
    path, question_mark, query = before_fragment.partition("?")
    if not question_mark:
        return rest
    kept = [piece for piece in query.split("&") if not is_secret_parameter(unquote_plus(piece.partition("=")[0]))]
    kept_query = "?" + "&".join(kept) if kept else ""
    return path + kept_query + hash_sign + fragment


def _worth_hiding(value: str) -> bool:
    if len(value) < MIN_SECRET_LENGTH:
        return False
    marker_run = MARKER * (len(value) // len(MARKER) + 2)
    return value not in marker_run


def _encoded_forms(secret: str) -> set[str]:
    """The secret as written, and every form a JSON encoder may give it inside a string."""
    forms = {secret}
    for ascii_only, slash, html, upper_hex in itertools.product((False, True), repeat=4):
        form = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        if html:
            form = form.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        if slash:
            form = form.replace("/", "\\/")
        if upper_hex:
            form = re.sub(r"\\u([0-9a-f]{4})", lambda match: "\\u" + match.group(1).upper(), form)
        forms.add(form)
    return forms
