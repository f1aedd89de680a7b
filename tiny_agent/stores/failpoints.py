"""Crash injection for tests: kill this process with SIGKILL at a named point.

``TINY_AGENT_FAILPOINT=after-commit:<label>`` kills the process right after a
transaction with that label is durable; ``mid-write:<label>`` kills it after
writing only half of that transaction's line, leaving a torn tail on disk.
Labels name what a transaction does (``run-started``, ``step-attempt``,
``raw``, ``settle``, ``step-failed``, ``tool-started``, ``tool-result``,
``synthetic``, ``abort``, ``finish``, ``seal``).  An optional ``#N`` suffix
fires on the Nth matching transaction of the process (``after-commit:raw#2``).
``before-tool:<name>`` / ``after-tool:<name>`` kill around a tool's execution.
``before-link:<label>`` kills a command that makes a whole journal (``upgrade``,
``fork``, ``export -o``) with it complete in its staging file, before it is
linked into place.
``enospc:<label>`` does not kill: the append of that transaction fails as a
full disk would (``OSError(ENOSPC)``), for the cases a real small filesystem
cannot time precisely (the closing seal of a run).

Unset (the normal case), every check is one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Final

FAILPOINT_ENV: Final = "TINY_AGENT_FAILPOINT"

_counts: dict[str, int] = {}


def _armed() -> tuple[str, int] | None:
    spec = os.environ.get(FAILPOINT_ENV)
    if not spec:
        return None
    point, _, nth = spec.partition("#")
    return point, int(nth) if nth.isdigit() else 1


def hit(point: str) -> bool:
    """True when the armed failpoint is ``point`` and this is its Nth occurrence."""
    armed = _armed()
    if armed is None or armed[0] != point:
        return False
    _counts[point] = _counts.get(point, 0) + 1
    return _counts[point] == armed[1]


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
