"""Journals copied fact by fact: upgrade (v2 to v3), fork (a prefix, to v3) and export (to v2): docs/journal.md,
*v2 compatibility*.

Pure: committed lines of a journal the fold has accepted in, lines out (:mod:`tiny_agent.oversight.interop`
reads and writes).  A fact keeps its members' JSON text (``msgspec.Raw``); what changes is named where it
happens.  Every line made is checked by the fold (:class:`Rewriter`): a bad copy fails before anything is written.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Protocol

import msgspec

from tiny_agent.errors import CorruptionError, NotFound, TinyAgentError, UsageError
from tiny_agent.fold.contract import is_blank
from tiny_agent.fold.core import kind_of as operation_kind
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.spilled import spill
from tiny_agent.journal.facts import HeaderLine, SealFact, encode_header
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.state import CompactionOperation, RunOperation

Members = dict[str, msgspec.Raw]
"""One fact: its top-level member names and their JSON text, untouched."""

Lines = Iterable[tuple[int, bytes]]
"""A journal's committed lines with their numbers (the header is line 1)."""

_facts_of_line: Final = msgspec.json.Decoder(list[Members] | Members).decode
_members: Final = msgspec.json.Decoder(Members).decode
_text: Final = msgspec.json.Decoder(str).decode
_number: Final = msgspec.json.Decoder(int).decode
_encode: Final = msgspec.json.Encoder().encode

_NOT_IN_V2: Final = {"raw": "raw", "seal": "seals", "mcp": "mcp"}
"""Kinds of fact a v2 export leaves out, and the :class:`Omitted` counter of each."""

MIN_ENTRY_PREFIX: Final = 4
"""The shortest prefix of an entry id ``fork --at`` takes (shorter digits are a seq)."""


class CopyFailed(TinyAgentError):
    """A copy that would not be a valid journal (a bug): nothing was written."""

    label = "INTERNAL"


def facts_in(line: bytes) -> list[Members]:
    """The facts of a committed transaction line, each as its members' raw text."""
    value = _facts_of_line(line)
    return value if isinstance(value, list) else [value]


def kind_of(fact: Members) -> str:
    return _text(fact["kind"])


def _raw_int(value: int) -> msgspec.Raw:
    return msgspec.Raw(str(value).encode())


# -- writing new lines ----------------------------------------------------------------


class Spool(Protocol):
    """Where a copy's lines are kept as they are made, read back by the offset they start at: the copy's check folds
    them with their messages left there (:func:`~tiny_agent.fold.spilled.spill`), so a long copy holds the fold's books,
    not its transcript."""

    def keep(self, line: bytes) -> None:
        """Keep the next line (without its LF)."""

    def __call__(self, offset: int) -> bytes:
        """The kept line that starts at ``offset``, without its LF."""
        ...


class Rewriter:
    """The lines of a new journal from copied facts: ``seq`` renumbered, a seal ending each line (v3), each line checked.

    The header decides the version: a v3 line is always an array ending with
    a seal over the new journal's bytes; a v2 line is a bare object for one
    fact and an array for several (session-v2 §16).
    """

    def __init__(self, header: HeaderLine, spool: Spool | None = None) -> None:
        self.header_line = encode_header(header)
        self._fold = Fold()
        self._spool = spool
        if spool is not None:
            spool.keep(self.header_line)
        self._check(self._fold.apply_header, self.header_line)
        self._sealed = self._fold.profile.sealed
        if spool is not None:
            spill(self._fold, spool)

    def line(self, facts: list[Members], timestamp: int) -> bytes:
        """The next line holding ``facts`` (renumbered); ``timestamp`` stamps its seal (the transaction's own time)."""
        fold = self._fold
        seq = fold.next_seq
        out: list[Members | SealFact] = []
        for fact in facts:
            out.append({**fact, "seq": _raw_int(seq)})
            seq += 1
        if self._sealed:
            out.append(SealFact(seq=seq, id=uuid7(timestamp), timestamp=timestamp, chain=fold.chain))
        if not out:
            raise ValueError("a v2 line needs at least one fact")
        line = _encode(out) if self._sealed or len(out) > 1 else _encode(out[0])
        if self._spool is not None:
            self._spool.keep(line)  # before its check, which may read its own messages back
        self._check(fold.apply_line, line)
        return line

    def closing_lines(self, timestamp: int) -> list[bytes]:
        """v3: the seal-only line covering the last line, as a clean close writes it (none if already covered)."""
        fold = self._fold
        if not self._sealed or fold.lines < 2 or fold.state.sealed:
            return []
        return [self.line([], timestamp)]

    @staticmethod
    def _check(apply: Callable[[bytes], None], line: bytes) -> None:
        try:
            apply(line)
        except CorruptionError as error:
            raise CopyFailed(f"the copy would not be a valid journal ({error}); nothing was written (a bug)") from None


# -- upgrade and fork ---------------------------------------------------------------------


def copied(
    lines: Lines, header: HeaderLine, closed_at: int, through: int | None = None, spool: Spool | None = None
) -> Iterator[bytes]:
    """The v3 journal of the facts of lines 2..``through`` (all) of another, sealed anew (its own seals dropped):
    an upgrade of a v2 journal, or a fork."""
    copy = Rewriter(header, spool)
    yield copy.header_line
    for number, line in itertools.islice(lines, through):
        if number > 1:
            facts = facts_in(line)
            yield copy.line([fact for fact in facts if kind_of(fact) != "seal"], _number(facts[-1]["timestamp"]))
    yield from copy.closing_lines(closed_at)


def chain_through(lines: Lines, through: int) -> tuple[str | None, int]:
    """A journal's chain value through line ``through``, and how many lines it has up to there.

    v3: the seal chain (``c0`` over the header line, then ``ck = SHA-256(c(k-1) || line k)``).
    v2, which has no seals: SHA-256 of its first ``through`` lines.  None when
    the journal has fewer lines.
    """
    chain = b""
    flat = hashlib.sha256()
    sealed = False
    seen = 0
    for number, line in lines:
        if number > through:
            break
        seen = number
        if number == 1:
            sealed = _header_version(line) >= 3
        if sealed:
            step = hashlib.sha256(chain)
            step.update(line)
            step.update(b"\n")
            chain = step.digest()
        else:
            flat.update(line)
            flat.update(b"\n")
    if seen < through:
        return None, seen
    return "sha256:" + (chain.hex() if sealed else flat.hexdigest()), seen


def _header_version(line: bytes) -> int:
    version = msgspec.json.decode(line, type=dict[str, object]).get("version")
    return version if type(version) is int else 0


# -- where a fork branches ----------------------------------------------------------------


class ForkPoint(msgspec.Struct, frozen=True):
    line: int
    """The fork keeps the parent's lines through this one (a transaction is never split)."""
    last_seq: int
    """The seq of that line's last fact."""
    named: str
    """What ``--at`` named, for messages: ``seq 14`` or ``entry <id>``."""


def find_fork_point(lines: Lines, at: str) -> ForkPoint:
    """The line ``at`` names: ``seq:N`` or a number (a seq); ``entry:X`` or X (an entry id, a prefix of it or of its last group).

    A number of four digits or more may be both a seq and an entry's prefix:
    then it is ambiguous and must be spelled out.
    """
    seq, prefix = _what_at_names(at)
    seq_hit: ForkPoint | None = None
    entries: dict[str, ForkPoint] = {}
    for number, line in lines:
        if number == 1:
            continue
        facts = facts_in(line)
        last_seq = _number(facts[-1]["seq"])
        for fact in facts:
            if seq is not None and _number(fact["seq"]) == seq:
                seq_hit = ForkPoint(line=number, last_seq=last_seq, named=f"seq {seq}")
            if prefix is not None and kind_of(fact) == "entry":
                entry_id = _text(fact["id"])
                if entry_id.startswith(prefix) or entry_id.rsplit("-", 1)[-1].startswith(prefix):
                    entries[entry_id] = ForkPoint(line=number, last_seq=last_seq, named=f"entry {entry_id}")
    return _one_point(at, seq_hit, entries)


def _what_at_names(at: str) -> tuple[int | None, str | None]:
    """The seq and the entry prefix ``at`` may name (either may be None)."""
    text = at.strip()
    if text.startswith("seq:") and text[4:].isdigit():
        return int(text[4:]), None
    if text.startswith("entry:"):
        return None, _entry_prefix(text[6:], at)
    if text.isdigit():
        return int(text), text if len(text) >= MIN_ENTRY_PREFIX else None
    return None, _entry_prefix(text, at)


def _entry_prefix(text: str, at: str) -> str:
    if len(text) < MIN_ENTRY_PREFIX or text.strip("0123456789abcdef-"):
        raise UsageError(
            f"--at {at!r}: give a seq (a number, or seq:N) or an entry id, or at least {MIN_ENTRY_PREFIX} "
            f"characters of one (lowercase hex)"
        )
    return text


def _one_point(at: str, seq_hit: ForkPoint | None, entries: dict[str, ForkPoint]) -> ForkPoint:
    if seq_hit is not None and entries:
        first = next(iter(entries))
        raise UsageError(f"--at {at}: is seq {at} and also fits entry {first}; write seq:{at} or entry:{at}")
    if seq_hit is not None:
        return seq_hit
    if len(entries) == 1:
        return next(iter(entries.values()))
    if entries:
        shown = ", ".join(list(entries)[:3])
        raise UsageError(f"--at {at}: fits {len(entries)} entries ({shown}); give more of the id")
    raise NotFound(f"--at {at}: no fact with that seq and no entry with that id in the session")


# -- is a point inside an operation? --------------------------------------------------------


class PrefixScan(msgspec.Struct):
    chain: str
    """The parent's chain through the fork point (see :func:`chain_through`)."""
    open_operation: str | None = None
    """The operation still open after the fork point (``run <id>``), if one is."""
    branch_before: int | None = None
    """The seq just before that operation began (0: it began at the first line)."""
    keep_through: int | None = None
    """The seq of the last fact of the line that finished it, if the parent has it."""


def scan_prefix(lines: Lines, through: int) -> PrefixScan:
    """Fold the parent to see whether an operation is open after line ``through``, and if so where it begins and ends."""
    fold = Fold()
    flat = hashlib.sha256()
    scan: PrefixScan | None = None
    began = (0, 0)
    current: str | None = None
    for number, line in lines:
        before = fold.next_seq - 1
        if number == 1:
            fold.apply_header(line)
        else:
            fold.apply_line(line)
        if number <= through:
            flat.update(line)
            flat.update(b"\n")
        operation = _open_operation(fold)
        if operation is not None and operation != current:
            began = (number, before)
        current = operation
        if number == through:
            chain = fold.chain if fold.profile.sealed else "sha256:" + flat.hexdigest()
            scan = PrefixScan(chain=chain, open_operation=operation, branch_before=began[1] if operation else None)
            if operation is None:
                return scan
        elif scan is not None and operation is None:
            scan.keep_through = fold.next_seq - 1
            return scan
    if scan is None:
        raise ValueError(f"the journal has no line {through}")
    return scan


def _open_operation(fold: Fold) -> str | None:
    operation = fold.state.operation
    if type(operation) is not RunOperation and type(operation) is not CompactionOperation:
        return None
    return f"{operation_kind(operation)} {operation.operationId}"


def inside_operation(point: ForkPoint, scan: PrefixScan) -> str:
    """Why a fork at ``point`` is refused, and the points that would do (one line)."""
    ways = []
    if scan.keep_through is not None:
        ways.append(f"--at {scan.keep_through} to keep it (the line that finishes it)")
    if scan.branch_before:
        ways.append(f"--at {scan.branch_before} to branch before it")
    remedy = " or ".join(ways) if ways else "finish it first (`tiny-agent resume`), then fork"
    return (
        f"{point.named} (line {point.line}) is inside {scan.open_operation}, which is still open there; a fork starts idle "
        f"and never makes up an ending the parent did not write: fork with {remedy}"
    )


# -- export to v2 ---------------------------------------------------------------------------


class Omitted(msgspec.Struct):
    """What a v2 export left out, counted as it goes."""

    raw: int = 0
    seals: int = 0
    mcp: int = 0
    steps_folded: int = 0
    attempts_dropped: int = 0
    usage_moved: int = 0
    pieces: int = 0
    refusals: int = 0
    silent_refusals: int = 0
    reasoning: int = 0

    def describe(self, lineage: str | None) -> str:
        """One line: what the v2 journal does not hold."""
        parts = [f"{self.raw} raw fact(s) (the responses as received)", f"{self.seals} seal fact(s)"]
        if self.mcp:
            parts.append(f"{self.mcp} mcp fact(s) (MCP messages as they crossed the wire)")
        if self.steps_folded:
            parts.append(
                f"transport retries of {self.steps_folded} step(s) ({self.attempts_dropped} middle attempt(s) dropped, "
                f"{self.usage_moved} of their usage fact(s) moved to attempt 1, each last attempt renumbered 2)"
            )
        if self.pieces:
            parts.append(f"the piece numbers of {self.pieces} compaction(s)")
        if self.refusals:
            silent = f"; {self.silent_refusals} without text end their run failed (code refusal)" if self.silent_refusals else ""
            parts.append(f"the stopReason of {self.refusals} refusal(s), written as stop{silent}")
        if self.reasoning:
            parts.append(f"the reasoning counter of {self.reasoning} usage fact(s) (its tokens stay in output)")
        if lineage is not None:
            parts.append(f"the header's {lineage}")
        return "left out: " + "; ".join(parts)


def retried_steps(lines: Lines) -> dict[str, int]:
    """The highest attempt number of each step that was retried (what folding its retries needs); a step tried once is
    not held, so a long session's export holds its retries, not its steps."""
    steps: dict[str, int] = {}
    for number, line in lines:
        if number == 1:
            continue
        for fact in facts_in(line):
            record = _attempt_record(fact)
            if record is None:
                continue
            attempt = _number(record["attempt"])
            if attempt > 1:
                step_id = _text(record["stepId"])
                steps[step_id] = max(steps.get(step_id, 0), attempt)
    return steps


def _attempt_record(fact: Members) -> Members | None:
    if kind_of(fact) != "record":
        return None
    record = _members(fact["record"])
    return record if _text(record["type"]) == "stepAttempt" else None


class V2Export:
    """A journal's facts as a v2 journal (docs/journal.md, *Export*): no raw, mcp or seal facts, a step's attempt 1
    and its last (renumbered 2), the usage of the attempts between moved onto attempt 1."""

    def __init__(self, header: HeaderLine, retried: dict[str, int], spool: Spool | None = None) -> None:
        self._copy = Rewriter(header, spool)
        self._retried = retried
        """Each retried step's highest attempt number (:func:`retried_steps`)."""
        self._first: dict[str, str] = {}
        """Each retried step's attempt 1 id, met before its later attempts: where the usage of dropped attempts goes."""
        self._moved_to: dict[str, str] = {}
        self._silent: set[str] = set()
        """Refusals without text: v2's `normal` completion needs text, so their run is written as failed."""
        self.omitted = Omitted()

    def lines(self, lines: Lines) -> Iterator[bytes]:
        yield self._copy.header_line
        for number, line in lines:
            if number == 1:
                continue
            kept = [fact for fact in map(self._fact, facts_in(line)) if fact is not None]
            if kept:
                yield self._copy.line(kept, 0)

    def _fact(self, fact: Members) -> Members | None:
        kind = kind_of(fact)
        counter = _NOT_IN_V2.get(kind)
        if counter is not None:
            setattr(self.omitted, counter, getattr(self.omitted, counter) + 1)
            return None
        if kind == "usage":
            return self._usage(fact)
        if kind == "entry" and b'"refusal"' in bytes(fact["entry"]):
            return self._refusal(fact)
        if kind == "record" and self._silent and b'"operationFinished"' in bytes(fact["record"]):
            return self._finished(fact)
        record = _attempt_record(fact)
        if record is not None:
            return self._attempt(fact, record)
        record = _members(fact["record"]) if kind == "record" else {}
        if record.pop("piece", None) is None:  # compactionStarted's v3 member
            return fact
        self.omitted.pieces += 1
        return {**fact, "record": msgspec.Raw(_encode(record))}

    def _attempt(self, fact: Members, record: Members) -> Members | None:
        """Attempts kept as v2 has them, their snapshots without the v3 ``requestOptions`` and ``git`` (never digested)."""
        attempt = _number(record["attempt"])
        step_id = _text(record["stepId"])
        last = self._retried.get(step_id, 1)
        if attempt == 1 and last > 1:
            self._first[step_id] = _text(record["attemptId"])
        if 1 < attempt < last:
            self._moved_to[_text(record["attemptId"])] = self._first[step_id]
            self.omitted.attempts_dropped += 1
            return None
        if attempt > 2:
            self.omitted.steps_folded += 1
            record["attempt"] = _raw_int(2)
        snapshot = _members(record["configurationSnapshot"])
        extras = [snapshot.pop(name, None) for name in ("requestOptions", "git")]
        if extras == [None, None] and attempt <= 2:
            return fact
        record["configurationSnapshot"] = msgspec.Raw(_encode(snapshot))
        return {**fact, "record": msgspec.Raw(_encode(record))}

    def _refusal(self, fact: Members) -> Members:
        """A v3 refusal as v2's ``stop`` (the text is the answer either way)."""
        entry = _members(fact["entry"])
        if "stopReason" not in entry or _text(entry["stopReason"]) != "refusal":
            return fact
        entry["stopReason"] = msgspec.Raw(b'"stop"')
        self.omitted.refusals += 1
        content = msgspec.json.decode(entry["message"]).get("content")
        if type(content) is not str or is_blank(content):
            self._silent.add(_text(fact["id"]))
            self.omitted.silent_refusals += 1
        return {**fact, "entry": msgspec.Raw(_encode(entry))}

    def _finished(self, fact: Members) -> Members:
        record = _members(fact["record"])
        if "finalEntryId" not in record or _text(record["finalEntryId"]) not in self._silent:
            return fact
        del record["completion"], record["finalEntryId"]
        record["outcome"] = msgspec.Raw(b'"failed"')
        record["error"] = msgspec.Raw(b'{"code":"refusal","message":"the model declined to answer without a word"}')
        return {**fact, "record": msgspec.Raw(_encode(record))}

    def _usage(self, fact: Members) -> Members:
        """A usage fact without v3's ``reasoning`` (part of ``output`` already), on attempt 1 if its attempt is dropped."""
        usage = _members(fact["usage"])
        if usage.pop("reasoning", None) is not None:
            self.omitted.reasoning += 1
            fact = {**fact, "usage": msgspec.Raw(_encode(usage))}
        moved = self._moved_to.get(_text(fact["attemptId"])) if "attemptId" in fact else None
        if moved is None:
            return fact
        self.omitted.usage_moved += 1
        return {**fact, "attemptId": msgspec.Raw(_encode(moved))}
