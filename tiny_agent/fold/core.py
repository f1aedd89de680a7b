"""The fold's core: lines, the header, the fact envelope, the seal chain, and dispatch by kind.

Pure.  A line is folded by the fast path for as many facts as it can vouch
for and by the reference path from the first one it cannot (see
:class:`tiny_agent.fold.Fold`).  This module holds what both paths share:
framing (session-v2 §2), the header (§4), the envelope (§5), the ID
namespace (§6) and the few state-building steps every concept uses
(appending a message, starting an operation).  The kinds' own rules live in
the sibling modules, one concept each, every reference rule next to its
fast twin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.books import AttemptBook, Configuration, OperationBook
from tiny_agent.fold.contract import (
    DUPLICATE_ID,
    HEADER_KEYS,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    Fault,
    fail,
    is_safe_int,
    is_text,
    is_uuid,
    not_uuid,
    require_uuid,
    show,
    uuid_match,
)
from tiny_agent.fold.links import header_origin, header_parent
from tiny_agent.fold.typed import (
    EntryFactWire,
    LineWire,
    RawFactWire,
    RecordFactWire,
    SealFactWire,
    UsageFactWire,
)
from tiny_agent.fold.version import PROFILES, V2, VersionProfile
from tiny_agent.journal.facts import FactKind
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER, LineDecoder, ProfileViolation, ProvenLineDecoder
from tiny_agent.journal.state import IDLE, AppliedEntry, Header, SessionState, ToolCallState
from tiny_agent.journal.transcript import Message, Usage

ReferenceRule = Callable[[Any, dict[str, Any], str], None]
"""A kind's rules on an untrusted fact (a dict) with its validated ID; raises :class:`Fault`.

Rules are the mixins' plain functions, called with the fold as their first argument.
"""

WIRE_TYPES: Final[Mapping[FactKind, type]] = {
    "entry": EntryFactWire,
    "record": RecordFactWire,
    "usage": UsageFactWire,
    "raw": RawFactWire,
    "seal": SealFactWire,
}
"""The fast path's shape of each fact kind (``mcp`` facts are rare: the reference path folds them)."""


class FoldCore:
    """Lines in, state out; the rules of each kind come from the concept mixins.

    ``state`` exists once the header is applied.

    Keep the instance attributes at 30 or fewer (tests/test_fold_layout.py
    checks): CPython 3.11 shares one key table among the instances of a
    class only up to 30 keys, and past that every ``self.x`` of the hot
    path falls back to a slower lookup (measured: replay 5-8% slower).
    Constant tables therefore live on the class, not on the instance.
    """

    state: SessionState

    def __init__(self, *, fast_path: bool = True) -> None:
        self.lines = 0
        self.committed_length = 0
        self.profile: VersionProfile = V2
        """Replaced by the header's profile (:mod:`tiny_agent.fold.version`)."""
        self.message_ids: list[str] = []
        """IDs of the message entries, in order (``transcript[i]`` is entry ``message_ids[i]``)."""
        self._spent = False
        self._sealed = False
        """The profile's ``sealed``, kept flat: every line asks."""
        self._next_seq = 1
        self._seq: int | None = None
        """The seq of the fact being folded, once it is known (errors carry it)."""
        self._fact_ids: set[str] = set()
        self._reserved: dict[str, str] = {}
        self._entry_order: list[str] = []
        self._outstanding: set[str] = set()
        """Tool call IDs the transcript has not answered yet (the role rule, §12)."""
        self._transcript_breach: str | None = None
        self._operations: dict[str, OperationBook] = {}
        self._current: OperationBook | None = None
        self._attempts: dict[str | None, AttemptBook] = {}
        """By attempt ID.  Only str keys are stored; the key type admits an entry's optional ``attemptId`` in lookups."""
        self._step_attempts: dict[str, list[AttemptBook]] = {}
        self._tool_started: dict[str, ToolCallState] = {}
        self._used_pairs: set[tuple[str, int]] = set()
        self._configurations: dict[str, Configuration] = {}
        self._chain = b""
        self._facts_in_line = 0
        self._fact_index = 0
        self._line_decoder = LineDecoder()
        self._proven = ProvenLineDecoder(LineWire) if fast_path else None
        self._fast_kinds: frozenset[type] = frozenset()
        """The wire types of the kinds the header's version has."""

    # The kinds' rules, supplied by the concept mixins (the composed fold is
    # tiny_agent.fold.fold.Fold).  The fast path calls each one from its own
    # call site: CPython 3.11 specializes a call only where the callee never
    # changes, and a table of rules called from one site measured ~5% slower.

    def _reference_rules(self) -> Mapping[str, ReferenceRule]:
        """Every fact kind's reference rule; the header's profile picks the kinds that exist."""
        raise NotImplementedError

    def _fast_entry_fact(self, fact: EntryFactWire, fact_id: str) -> bool:
        raise NotImplementedError

    def _fast_record_fact(self, fact: RecordFactWire, fact_id: str) -> bool:
        raise NotImplementedError

    def _fast_usage(self, fact: UsageFactWire, fact_id: str) -> bool:
        raise NotImplementedError

    def _fast_raw(self, fact: RawFactWire, fact_id: str) -> bool:
        raise NotImplementedError

    def _fast_seal(self, fact: SealFactWire, fact_id: str) -> bool:
        raise NotImplementedError

    @property
    def version(self) -> int:
        """The header's version (2 before the header is applied)."""
        return self.profile.version

    # -- lines --------------------------------------------------------------

    @property
    def chain(self) -> str:
        """v3: the seal value the next line must carry (the chain through the last committed line)."""
        return "sha256:" + self._chain.hex()

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def apply_header(self, line: bytes) -> None:
        if self._spent or self.lines:
            self._guard(header=True)
        self.lines = 1
        try:
            self._header(self._decode(line))
        except Fault as fault:
            self._spend(fault, None)
        if self._sealed:
            self._chain = hashlib.sha256(line + b"\n").digest()
        self.committed_length = len(line) + 1
        self.state.repairedLength = self.committed_length

    def apply_line(self, line: bytes) -> None:
        """Apply one committed transaction line (without its LF), all or nothing."""
        if self._spent or not self.lines:
            self._guard(header=False)
        self.lines += 1
        self._seq = None
        self._transcript_breach = None
        try:
            self._fold_line(line)
        except Fault as fault:
            self._spend(fault, self._seq if fault.with_seq else None)
        if self._sealed:
            digest = hashlib.sha256(self._chain)
            digest.update(line)
            digest.update(b"\n")
            self._chain = digest.digest()
        self.committed_length += len(line) + 1
        state = self.state
        state.repairedLength = self.committed_length
        state.factCount = self._next_seq - 1

    def _guard(self, *, header: bool) -> NoReturn:
        if self._spent:
            raise RuntimeError("this fold already failed; start a new one")
        if header:
            raise RuntimeError("the header is already applied")
        raise RuntimeError("the header must be applied first")

    def _spend(self, fault: Fault, seq: int | None) -> NoReturn:
        self._spent = True
        raise CorruptionError(fault.code, self.lines, seq, fault.reason) from None

    def _decode(self, line: bytes) -> Any:
        if not line:
            raise Fault("BLANK_LINE", "blank line", with_seq=False)
        if line[-1] == 0x0D:
            raise Fault("CRLF_NOT_ALLOWED", "line ends with CR (CRLF line endings are not allowed)", with_seq=False)
        try:
            return self._line_decoder.decode(line)
        except ProfileViolation as violation:
            raise Fault("MALFORMED_JSON", str(violation), with_seq=False) from None

    # -- the header (§4) ------------------------------------------------------

    def _header(self, value: Any) -> None:
        def bad(reason: str) -> NoReturn:
            raise Fault("INVALID_HEADER", reason, with_seq=False)

        if type(value) is not dict:
            bad("header is not a JSON object")
        version = value.get("version")
        profile = PROFILES.get(version) if type(version) is int else None
        # Only a supported version's header may have that version's members: a
        # v2 header (and one of no known version) is held to the v2 list, so the
        # contract's order of checks is unchanged for it.
        allowed = profile.header_keys if profile is not None else HEADER_KEYS
        if not value.keys() <= allowed:
            unknown = next(key for key in value if key not in allowed)
            bad(f'header has unknown key "{unknown}"')
        if value.get("kind") != "header":
            bad('header kind is not "header"')
        if profile is None:
            expected = " or ".join(str(number) for number in PROFILES)
            raise Fault(
                "UNSUPPORTED_VERSION", f"header version {show(version)} is not supported (expected {expected})", with_seq=False
            )
        if not is_uuid(value.get("id")):
            bad(f"header id is not a UUIDv7: {show(value.get('id'))}")
        if not is_safe_int(value.get("createdAt")):
            bad("header createdAt is not a safe non-negative integer")
        for name in ("cwd", "provider", "model", "environmentIdentity"):
            if not is_text(value.get(name)):
                bad(f"header {name} is not a non-empty string")
        origin = header_origin(value["origin"]) if "origin" in value else None
        parent = header_parent(value["parent"]) if "parent" in value else None
        self._adopt(profile)
        self.state = SessionState(
            header=Header(
                id=value["id"],
                createdAt=value["createdAt"],
                cwd=value["cwd"],
                provider=value["provider"],
                model=value["model"],
                environmentIdentity=value["environmentIdentity"],
            ),
            version=profile.version,
            transcript=[],
            activeContext=[],
            usage=Usage(),
            operation=IDLE,
            repairedLength=0,
            origin=origin,
            parent=parent,
        )

    def _adopt(self, profile: VersionProfile) -> None:
        """Fold by the rules of the header's version: only its fact kinds exist, on both paths."""
        self.profile = profile
        self._sealed = profile.sealed
        self._fast_kinds = frozenset(WIRE_TYPES[kind] for kind in profile.fact_kinds if kind in WIRE_TYPES)

    # -- transactions (§5) ------------------------------------------------------

    def _fold_line(self, line: bytes) -> None:
        """The fast path for as many facts as it can vouch for, the reference path for the rest."""
        vouched = 0
        proven = self._proven
        value = proven.decode(line) if proven is not None else None
        if value is not None:
            facts = value if type(value) is list else [value]
            self._facts_in_line = len(facts)
            fast_fact = self._fast_fact
            for fact in facts:
                self._fact_index = vouched
                if not fast_fact(fact):
                    break
                vouched += 1
            if facts and vouched == len(facts):
                self._end_transaction(type(facts[-1]) is SealFactWire)
                return
        self._transaction(self._decode(line), vouched)

    def _transaction(self, value: Any, start: int = 0) -> None:
        """The reference path: every rule in the contract's order, from fact ``start`` on.

        ``start`` > 0 when the fast path applied the line's first facts (each
        of which the reference path would have applied the same way).
        """
        if type(value) is list:
            if not value:
                raise Fault("EMPTY_TRANSACTION", "empty transaction array", with_seq=False)
            self._facts_in_line = len(value)
            for index in range(start, len(value)):
                self._fact_index = index
                self._fact(value[index])
            last = value[-1]
        else:
            self._facts_in_line = 1
            self._fact_index = 0
            self._fact(value)
            last = value
        self._end_transaction(last["kind"] == "seal")

    def _end_transaction(self, ends_with_seal: bool) -> None:
        """The rules of a whole line, once each of its facts is applied."""
        if self._sealed:
            if not ends_with_seal:
                fail(INVALID_FACT, f"a v{self.version} transaction must end with a seal fact")
            self.state.sealed = self._facts_in_line == 1
        if self._transcript_breach is not None:
            fail(INVALID_TRANSCRIPT, self._transcript_breach)

    def _fact(self, fact: Any) -> None:
        """The reference envelope (session-v2 §5), then the kind's own rules."""
        if type(fact) is not dict:
            raise Fault(INVALID_FACT, "fact is not a JSON object", with_seq=False)
        seq = fact.get("seq")
        if type(seq) is not int or seq != self._next_seq:
            self._bad_seq(seq)
        self._seq = seq
        fact_id = fact.get("id")
        if type(fact_id) is not str or uuid_match(fact_id) is None:
            not_uuid(fact_id, "fact id")
        timestamp = fact.get("timestamp")
        if type(timestamp) is not int or not 0 <= timestamp <= MAX_SAFE_INTEGER:
            fail(INVALID_FACT, f"fact timestamp is not a safe non-negative integer: {show(timestamp)}")
        if fact_id in self._fact_ids:
            fail(DUPLICATE_ID, f"fact id {fact_id} is already used by an earlier fact")
        kind = fact.get("kind")
        rule = self._reference_rules().get(kind) if type(kind) is str and kind in self.profile.fact_kinds else None
        if rule is None:
            fail(INVALID_FACT, f"unknown fact kind {show(kind)}")
        rule(self, fact, fact_id)
        if fact_id in self._reserved:
            fail(DUPLICATE_ID, f"fact id {fact_id} is reserved by a record")
        self._commit_fact(fact_id, seq)

    def _fast_fact(self, fact: Any) -> bool:
        """The envelope's fast twin; then the kind's (never raises: False leaves the fact untouched).

        ``fact`` is a ``FactWire``, typed ``Any`` here so that one ``type()``
        call and identity tests can dispatch it (mypy narrows only on a
        ``type()`` per test, and this runs for every fact); each kind's rule
        is typed.
        """
        seq = fact.seq
        fact_id = fact.id
        if seq != self._next_seq or uuid_match(fact_id) is None or fact_id in self._fact_ids:
            return False
        kind = type(fact)
        # The envelope's last rule (no fact takes an ID a record reserved) holds
        # after the kind's rules; only entries carry, and release, a reservation.
        if kind is EntryFactWire:
            applied = self._fast_entry_fact(fact, fact_id)
        elif fact_id in self._reserved:
            return False
        elif kind is SealFactWire:
            # (Raw and seal facts exist only in some versions: otherwise the reference path names the fault.)
            applied = kind in self._fast_kinds and self._fast_seal(fact, fact_id)
        elif kind is RecordFactWire:
            applied = self._fast_record_fact(fact, fact_id)
        elif kind is UsageFactWire:
            applied = self._fast_usage(fact, fact_id)
        else:
            applied = kind in self._fast_kinds and self._fast_raw(fact, fact_id)
        if not applied:
            return False
        self._seq = seq
        self._commit_fact(fact_id, seq)
        return True

    def _commit_fact(self, fact_id: str, seq: int) -> None:
        self._fact_ids.add(fact_id)
        self._next_seq = seq + 1

    def _bad_seq(self, seq: object) -> NoReturn:
        if type(seq) is not int or not is_safe_int(seq, 1):
            raise Fault(INVALID_FACT, f"fact seq is not a safe integer >= 1: {show(seq)}", with_seq=False)
        self._seq = seq
        raise Fault("SEQ_MISMATCH", f"expected seq {self._next_seq}, found {seq}")

    # -- the ID namespace (§6) ----------------------------------------------------

    def _reserve(self, value: object, flavour: str, what: str) -> str:
        if type(value) is not str or uuid_match(value) is None:
            not_uuid(value, what)
        if value in self._fact_ids or value in self._reserved:
            fail(DUPLICATE_ID, f"{what} {value} is already in use")
        self._reserved[value] = flavour
        return value

    def _reservable(self, value: str, fact_id: str) -> bool:
        """The fast twin of :meth:`_reserve`'s checks, and the envelope's: the reserved ID is not the fact's own."""
        return (
            value != fact_id
            and uuid_match(value) is not None
            and value not in self._fact_ids
            and value not in self._reserved
        )

    # -- operations (§9.0) and messages (§8.1): what every concept builds on ----------

    def _lookup_operation(self, value: object, what: str) -> OperationBook:
        """§9.0: a known, unfinished operation (at most one is unfinished: the current one)."""
        operation = self._operations.get(value) if type(value) is str else None
        if operation is None:
            require_uuid(value, what)
            fail(INVALID_REFERENCE, f"{what} {value} names no operation")
        if operation is not self._current:
            fail(INVALID_TRANSITION, f"operation {value} is already finished")
        return operation

    def _begin(self, operation: OperationBook) -> None:
        self._operations[operation.state.operationId] = operation
        self._current = operation
        self.state.operation = operation.state

    def _append_message(self, record: AppliedEntry, message: Message, breach: str | None) -> None:
        """Apply a message entry that passed every rule; a role-rule ``breach`` fails the line at its end.

        The one message object is shared by the transcript, the active
        context and the entry index.
        """
        state = self.state
        fact_id = record.id
        state.entries[fact_id] = record
        self._entry_order.append(fact_id)
        self.message_ids.append(fact_id)
        state.transcript.append(message)
        state.activeContext.append(message)
        state.contextBoundary = fact_id
        if breach is not None and self._transcript_breach is None:
            self._transcript_breach = breach
