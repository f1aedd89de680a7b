"""What the loopback server keeps of a request: the path, the decoded body, the headers, and no secret.

Credentials are kept as fingerprints only (docs/loopback.md, "Credentials: fingerprints only").  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlsplit

import msgspec

from tiny_agent.journal.secrets import is_secret_parameter
from tiny_agent.wire.registry import Api

CREDENTIAL_HEADERS: Final = frozenset(("authorization", "x-api-key", "api-key", "proxy-authorization"))

_KEY_LOOKING: Final = re.compile(
    r"(?:\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,})"  # OpenAI, Anthropic (sk-ant-...), OpenRouter (sk-or-...)
    r"|(?:\bBearer\s+\S{8,})"
    r"|(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{32,}"  # a long token of letters and digits
)


class RecordedRequest(msgspec.Struct, frozen=True):
    """docs/loopback.md, "What the server keeps": a credential's value is its fingerprint, in ``path`` and ``headers``."""

    path: str
    headers: dict[str, str]
    body: Any
    authorized: bool
    api: Api | None = None
    fingerprints: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def header_names(self) -> list[str]:
        return list(self.headers)


def fingerprint(credential: str) -> str:
    """``sha256:`` and the hex digest of the credential's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(credential.encode("utf-8")).hexdigest()


def record(path: str, headers: Iterable[tuple[str, str]], raw: bytes, api: Api | None) -> RecordedRequest:
    """The request as the server keeps it: no credential in any member."""
    kept: dict[str, str] = {}
    fingerprints: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        if lower in CREDENTIAL_HEADERS or _KEY_LOOKING.search(value):
            kept[lower], fingerprints[lower] = _hidden(value)
        else:
            kept[lower] = value
    return RecordedRequest(
        path=_safe_path(path),
        headers=kept,
        body=_json_or_none(raw),
        authorized=any(name in CREDENTIAL_HEADERS for name in fingerprints),
        api=api,
        fingerprints=fingerprints,
    )


def _hidden(value: str) -> tuple[str, str]:
    """What is shown for a credential header (its scheme, if any, and the fingerprint), and the fingerprint."""
    scheme, space, credential = value.strip().partition(" ")
    if space and scheme.isalpha() and credential.strip():
        digest = fingerprint(credential.strip())
        return f"{scheme} {digest}", digest
    digest = fingerprint(value.strip())
    return digest, digest


def _safe_path(target: str) -> str:
    parts = urlsplit(target)
    if not parts.query:
        return target
    pairs = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_parameter(name, value) or _KEY_LOOKING.search(value):
            value = fingerprint(value)
        pairs.append(f"{quote(name, safe='')}={quote(value, safe=':')}")
    return f"{parts.path}?{'&'.join(pairs)}"


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
