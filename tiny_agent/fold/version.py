"""What a journal's header version changes in the fold, in one place (v3's additions: docs/journal.md).  Pure."""

from __future__ import annotations

from typing import Final

import msgspec

from tiny_agent.fold.contract import (
    COMPACTION_STARTED_KEYS,
    HEADER_KEYS,
    SNAPSHOT_KEYS,
    STOP_REASON_WORDS,
    USAGE_KEYS,
    V2_USAGE_KEYS,
    V3_COMPACTION_STARTED_KEYS,
    V3_HEADER_KEYS,
    V3_SNAPSHOT_KEYS,
)
from tiny_agent.journal.facts import FactKind
from tiny_agent.journal.transcript import StopReason


class VersionProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    version: int
    header_keys: frozenset[str]
    fact_kinds: frozenset[FactKind]
    sealed: bool
    """Every line ends with a seal fact carrying the chain through the line before it (v3)."""
    max_attempt: int
    """The highest attempt number a step may reach; a higher one is INVALID_FACT."""
    snapshot_keys: frozenset[str]
    compaction_started_keys: frozenset[str]
    stop_reasons: tuple[StopReason, ...]
    usage_keys: frozenset[str]


V2: Final = VersionProfile(
    version=2,
    header_keys=HEADER_KEYS,
    fact_kinds=frozenset(("entry", "record", "usage")),
    sealed=False,
    max_attempt=2,
    snapshot_keys=SNAPSHOT_KEYS,
    compaction_started_keys=COMPACTION_STARTED_KEYS,
    stop_reasons=STOP_REASON_WORDS[:3],
    usage_keys=V2_USAGE_KEYS,
)

V3: Final = VersionProfile(
    version=3,
    header_keys=V3_HEADER_KEYS,
    fact_kinds=frozenset(("entry", "record", "usage", "raw", "seal", "mcp")),
    sealed=True,
    # Transport retries (429, 5xx, a cut-off stream) may take a step well past
    # v2's one retry; the bound keeps a runaway writer from growing a step forever.
    max_attempt=16,
    snapshot_keys=V3_SNAPSHOT_KEYS,
    compaction_started_keys=V3_COMPACTION_STARTED_KEYS,
    stop_reasons=STOP_REASON_WORDS,
    usage_keys=USAGE_KEYS,
)

PROFILES: Final[dict[int, VersionProfile]] = {profile.version: profile for profile in (V2, V3)}

SUPPORTED_VERSIONS: Final[tuple[int, ...]] = tuple(PROFILES)
