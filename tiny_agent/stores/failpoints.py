"""Crash injection for tests: ``TINY_AGENT_FAILPOINT=<point>[#N]`` kills this process (SIGKILL) at a named point.

The points (``after-commit:<label>``, ``mid-write:<label>``, ``before-tool:<name>``, ``before-link:<label>``,
``enospc:<label>``...) are listed in docs/recovery.md, *Failpoints and the crash suite*.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Final

FAILPOINT_ENV: Final = "TINY_AGENT_FAILPOINT"

_counts: dict[str, int] = {}


def hit(point: str) -> bool:
    """True when the armed failpoint is ``point`` and this is its Nth occurrence."""
    armed, _, nth = os.environ.get(FAILPOINT_ENV, "").partition("#")
    if armed != point:
        return False
    _counts[point] = _counts.get(point, 0) + 1
    return _counts[point] == (int(nth) if nth.isdigit() else 1)


def crash() -> None:
    """Die the way a power cut or the OOM killer would: no cleanup, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


def maybe_crash(point: str) -> None:
    if hit(point):
        crash()


def disk_full(point: str) -> None:
    """Raise the OSError a full disk raises, when the armed failpoint is ``enospc:<point>``."""
    if hit(f"enospc:{point}"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
