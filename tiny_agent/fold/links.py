"""The v3 header's links (``origin``, ``parent``): closed objects, checked like the rest of the header.

Pure.  Any fault is ``INVALID_HEADER`` at line 1 with no seq, as for every
other header member (session-v2 §4).  Only a v3 header gets here: the fold
holds a v2 header to the v2 member list, where these are unknown members.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tiny_agent.fold.contract import ORIGIN_KEYS, PARENT_KEYS, Fault, is_digest, is_safe_int, is_text, is_uuid, show
from tiny_agent.journal.links import Origin, Parent


def header_origin(value: Any) -> Origin:
    """``{"path", "length", "sha256"}``: a non-empty string, a safe integer, a digest."""
    members = _closed(value, ORIGIN_KEYS, "origin")
    path = members.get("path")
    length = members.get("length")
    sha256 = members.get("sha256")
    if not is_text(path):
        _bad(f"header origin path is not a non-empty string: {show(path)}")
    if not is_safe_int(length):
        _bad(f"header origin length is not a safe non-negative integer: {show(length)}")
    if not is_digest(sha256):
        _bad(f"header origin sha256 is not a sha256 digest: {show(sha256)}")
    return Origin(path=path, length=length, sha256=sha256)


def header_parent(value: Any) -> Parent:
    """``{"session", "line", "chain"}``: a UUIDv7, a safe integer >= 1, a digest."""
    members = _closed(value, PARENT_KEYS, "parent")
    session = members.get("session")
    line = members.get("line")
    chain = members.get("chain")
    if not is_uuid(session):
        _bad(f"header parent session is not a UUIDv7: {show(session)}")
    if not is_safe_int(line, 1):
        _bad(f"header parent line is not a safe integer >= 1: {show(line)}")
    if not is_digest(chain):
        _bad(f"header parent chain is not a sha256 digest: {show(chain)}")
    return Parent(session=session, line=line, chain=chain)


def _closed(value: Any, allowed: frozenset[str], what: str) -> dict[str, Any]:
    if type(value) is not dict:
        _bad(f"header {what} is not a JSON object")
    unknown = [key for key in value if key not in allowed]
    if unknown:
        _bad(f'header {what} has unknown key "{unknown[0]}"')
    return value


def _bad(reason: str) -> NoReturn:
    raise Fault("INVALID_HEADER", reason, with_seq=False)
