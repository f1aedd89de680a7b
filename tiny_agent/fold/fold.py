"""The fold's lines and seal chain (session-v2 §2, session-v3), header (§4), envelope (§5) and dispatch
from a fact to its kind's rules (one module per concept).  Pure and deterministic."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final, NoReturn

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import contract
from tiny_agent.fold.compaction import compaction_entry, compaction_started
from tiny_agent.fold.contract import (
    DUPLICATE_ID,
    INVALID_FACT,
    INVALID_TRANSCRIPT,
    Fault,
    fail,
    is_digest,
    is_safe_int,
    is_text,
    is_uuid,
    member_names,
    require_keys,
    require_object,
    require_uuid,
    show,
    uuid_match,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.messages import assistant_entry, fast_assistant_entry, fast_user_entry, user_entry
from tiny_agent.fold.operations import abort_requested, fast_run_finished, fast_run_started, operation_finished, run_started
from tiny_agent.fold.steps import fast_step_attempt, raw_fact, step_attempt, step_failed
from tiny_agent.fold.tools import fast_tool_result, fast_tool_started, mcp_fact, tool_entry, tool_started
from tiny_agent.fold.transcript_rules import parse_message
from tiny_agent.fold.typed import (
    AssistantWire,
    EntryFactWire,
    OperationFinishedWire,
    RecordFactWire,
    RunStartedWire,
    SealFactWire,
    StepAttemptWire,
    ToolStartedWire,
    ToolWire,
    UsageFactWire,
    UserWire,
    builtins_of,
    line_type,
)
from tiny_agent.fold.usage import fast_usage, usage_fact
from tiny_agent.fold.version import PROFILES, VersionProfile
from tiny_agent.journal.facts import SealFact
from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation, ProvenLineDecoder
from tiny_agent.journal.links import Origin, Parent
from tiny_agent.journal.state import IDLE, Header, SessionState
from tiny_agent.journal.transcript import AssistantMessage, Usage, UserMessage


class Fold(FoldCore):
    """An incremental reduction of one journal: ``apply_header``, then ``apply_line`` for each committed line.

    ``state`` is advanced in place.  Any :class:`~tiny_agent.errors.CorruptionError` spends the fold:
    the line that failed may be half applied; a caller that needs to go on starts a new fold.  The
    reference path and the fast path (``fast_path=True``, the default): docs/performance.md, "Design".
    """

    __slots__ = ("_line_decoder", "_proven")

    def __init__(self, *, fast_path: bool = True) -> None:
        super().__init__()
        self._line_decoder = LineDecoder()
        self._proven = ProvenLineDecoder(line_type(self.profile.fact_kinds)) if fast_path else None

    @property
    def lines(self) -> int:
        """Committed lines folded, the header included."""
        return self.books.lines

    @property
    def committed_length(self) -> int:
        return self.books.length

    @property
    def next_seq(self) -> int:
        return self.books.next_seq

    @property
    def chain(self) -> str:
        """v3: the seal value the next line must carry (the chain through the last committed line)."""
        return "sha256:" + self.books.chain.hex()

    @property
    def version(self) -> int:
        """The header's version (2 before the header is applied)."""
        return self.profile.version

    def adopt(self, profile: VersionProfile) -> None:
        """Fold by the rules of the header's version: only its fact kinds exist, on both paths."""
        self.profile = profile
        if self._proven is not None:
            self._proven = ProvenLineDecoder(line_type(profile.fact_kinds))

    # -- lines (§2) --------------------------------------------------------------

    def apply_header(self, line: bytes) -> None:
        books = self.books
        if self.spent or books.lines:
            self._guard(header=True)
        books.lines = 1
        try:
            self._header(self._decode(line))
        except Fault as fault:
            self._spend(fault, None)
        if self.profile.sealed:
            books.chain = hashlib.sha256(line + b"\n").digest()
        books.length = len(line) + 1
        self.state.repairedLength = books.length

    def apply_line(self, line: bytes) -> None:
        """Apply one committed transaction line (without its LF), all or nothing."""
        books = self.books
        if self.spent or not books.lines:
            self._guard(header=False)
        books.lines += 1
        self.seq = None
        self.breach = None
        try:
            self._fold_line(line)
        except Fault as fault:
            self._spend(fault, self.seq if fault.with_seq else None)
        if self.profile.sealed:
            digest = hashlib.sha256(books.chain)
            digest.update(line)
            digest.update(b"\n")
            books.chain = digest.digest()
        books.length += len(line) + 1
        state = self.state
        state.repairedLength = books.length
        state.factCount = books.next_seq - 1

    def _guard(self, *, header: bool) -> NoReturn:
        order = "is already applied" if header else "must be applied first"
        raise RuntimeError("this fold already failed; start a new one" if self.spent else f"the header {order}")

    def _spend(self, fault: Fault, seq: int | None) -> NoReturn:
        self.spent = True
        raise CorruptionError(fault.code, self.books.lines, seq, fault.reason) from None

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
        if type(value) is not dict:
            _bad_header("header is not a JSON object")
        version = value.get("version")
        profile = PROFILES.get(version) if type(version) is int else None
        # Only a supported version's header may have its members: any other is held to the v2 list.
        allowed = profile.header_keys if profile is not None else contract.HEADER_KEYS
        require_keys(value, allowed, "header", "INVALID_HEADER")
        if value.get("kind") != "header":
            _bad_header('header kind is not "header"')
        if profile is None:
            expected = " or ".join(str(number) for number in PROFILES)
            raise Fault(
                "UNSUPPORTED_VERSION", f"header version {show(version)} is not supported (expected {expected})", with_seq=False
            )
        if not is_uuid(value.get("id")):
            _bad_header(f"header id is not a UUIDv7: {show(value.get('id'))}")
        if not is_safe_int(value.get("createdAt")):
            _bad_header("header createdAt is not a safe non-negative integer")
        for name in ("cwd", "provider", "model", "environmentIdentity"):
            if not is_text(value.get(name)):
                _bad_header(f"header {name} is not a non-empty string")
        origin = _link(Origin, value["origin"]) if "origin" in value else None
        parent = _link(Parent, value["parent"]) if "parent" in value else None
        self.adopt(profile)
        header = Header(
            value["id"], value["createdAt"], value["cwd"], value["provider"], value["model"], value["environmentIdentity"]
        )
        self.state = SessionState(header, profile.version, [], [], Usage(), IDLE, 0, origin=origin, parent=parent)

    # -- transactions (§5) and seals (v3) ---------------------------------------

    def _fold_line(self, line: bytes) -> None:
        """The fast path for every fact it can decode, the reference path for the rest."""
        proven = self._proven
        value = proven.decode(line) if proven is not None else None
        facts = value if type(value) is list or value is None else [value]
        if not facts:
            self._transaction(self._decode(line))
            return
        self.line_facts = len(facts)
        for index, fact in enumerate(facts):
            self.fact_index = index
            if not self._fast_fact(fact):
                builtins = builtins_of(fact)
                if builtins is None:
                    self._transaction(self._decode(line), index)
                    return
                self._fact(builtins)
        self._end_transaction(type(facts[-1]) is SealFactWire)

    def _transaction(self, value: Any, start: int = 0) -> None:
        """The reference path: every rule in the contract's order, from fact ``start`` on (after the fast path's)."""
        facts = value if type(value) is list else [value]
        if not facts:
            raise Fault("EMPTY_TRANSACTION", "empty transaction array", with_seq=False)
        self.line_facts = len(facts)
        for index in range(start, len(facts)):
            self.fact_index = index
            self._fact(facts[index])
        self._end_transaction(facts[-1]["kind"] == "seal")

    def _end_transaction(self, ends_with_seal: bool) -> None:
        """The rules of a whole line, once each of its facts is applied."""
        if self.profile.sealed:
            if not ends_with_seal:
                fail(INVALID_FACT, f"a v{self.version} transaction must end with a seal fact")
            self.state.sealed = self.line_facts == 1
        if self.breach is not None:
            fail(INVALID_TRANSCRIPT, self.breach)

    def _fact(self, fact: Any) -> None:
        """The reference envelope (session-v2 §5), then the kind's own rules."""
        if type(fact) is not dict:
            raise Fault(INVALID_FACT, "fact is not a JSON object", with_seq=False)
        books = self.books
        seq = fact.get("seq")
        if type(seq) is not int or seq != books.next_seq:
            self._bad_seq(seq)
        self.seq = seq
        fact_id = require_uuid(fact.get("id"), "fact id")
        if not is_safe_int(fact.get("timestamp")):
            fail(INVALID_FACT, f"fact timestamp is not a safe non-negative integer: {show(fact.get('timestamp'))}")
        if fact_id in books.fact_ids or fact_id in self.state.entries:
            fail(DUPLICATE_ID, f"fact id {fact_id} is already used by an earlier fact")
        kind = fact.get("kind")
        rule = REFERENCE_RULES.get(kind) if type(kind) is str and kind in self.profile.fact_kinds else None
        if rule is None:
            fail(INVALID_FACT, f"unknown fact kind {show(kind)}")
        rule(self, fact, fact_id)
        if fact_id in books.reserved:
            fail(DUPLICATE_ID, f"fact id {fact_id} is reserved by a record")
        if kind != "entry":
            books.fact_ids.add(fact_id)
        books.next_seq = seq + 1

    def _fast_fact(self, fact: Any) -> bool:
        """The envelope's fast twin, then the kind's (False leaves the fact untouched); ``fact`` is a fact shape."""
        books = self.books
        seq = fact.seq
        fact_id = fact.id
        if seq != books.next_seq or uuid_match(fact_id) is None or fact_id in books.fact_ids or fact_id in self.state.entries:
            return False
        kind = type(fact)
        if kind is EntryFactWire:
            if not FAST_TWINS[type(fact.entry.message)](self, fact, fact_id):
                return False
        else:
            # The envelope's last rule (no reserved ID) holds after the kind's: only entries release one.
            twin = FAST_TWINS.get(type(fact.record) if kind is RecordFactWire else kind)
            if twin is None or fact_id in books.reserved or not twin(self, fact, fact_id):
                return False
            books.fact_ids.add(fact_id)
        self.seq = seq
        books.next_seq = seq + 1
        return True

    def _bad_seq(self, seq: object) -> NoReturn:
        if type(seq) is not int or not is_safe_int(seq, 1):
            raise Fault(INVALID_FACT, f"fact seq is not a safe integer >= 1: {show(seq)}", with_seq=False)
        self.seq = seq
        raise Fault("SEQ_MISMATCH", f"expected seq {self.books.next_seq}, found {seq}")


def seal_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    """A seal: the last fact of its line, carrying the chain through the line before (session-v3)."""
    require_keys(fact, contract.SEAL_FACT_KEYS, "seal fact")
    if fold.fact_index != fold.line_facts - 1:
        fail(INVALID_FACT, "a seal must be the last fact of its transaction")
    chain = fact.get("chain")
    if chain != "sha256:" + fold.books.chain.hex():
        if not is_digest(chain):
            fail(INVALID_FACT, "seal chain is not a sha256 digest")
        raise Fault(
            "SEAL_MISMATCH",
            f"seal chain does not match lines 1-{fold.books.lines - 1}: a committed line was changed, "
            "removed, added or reordered after it was sealed",
        )


def fast_seal(fold: FoldCore, fact: SealFact, fact_id: str) -> bool:
    return fold.fact_index == fold.line_facts - 1 and fact.chain == "sha256:" + fold.books.chain.hex()


def _bad_header(reason: str) -> NoReturn:
    raise Fault("INVALID_HEADER", reason, with_seq=False)


LINK_RULES: Final[dict[type, tuple[tuple[str, Callable[[object], bool], str], ...]]] = {
    Origin: (
        ("path", is_text, "a non-empty string"),
        ("length", is_safe_int, "a safe non-negative integer"),
        ("sha256", is_digest, "a sha256 digest"),
    ),
    Parent: (
        ("session", is_uuid, "a UUIDv7"),
        ("line", lambda line: is_safe_int(line, 1), "a safe integer >= 1"),
        ("chain", is_digest, "a sha256 digest"),
    ),
}
"""The v3 header's links (:mod:`tiny_agent.journal.links`), member by member: a fault in them is INVALID_HEADER too."""


def _link(link: type[Origin | Parent], value: Any) -> Any:
    name = link.__name__.lower()
    if type(value) is not dict:
        _bad_header(f"header {name} is not a JSON object")
    require_keys(value, member_names(link), f"header {name}", "INVALID_HEADER")
    for member, rule, what in LINK_RULES[link]:
        if not rule(value.get(member)):
            _bad_header(f"header {name} {member} is not {what}: {show(value.get(member))}")
    return link(**value)


# -- dispatch: each fact kind's reference rule -----------------------------------------------


def entry_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    """Entries (§8): a message entry by its message's role, or a compaction entry."""
    entry = _body(fact, contract.ENTRY_FACT_KEYS, "entry")
    entry_type = entry.get("type")
    if entry_type == "message":
        message = parse_message(entry.get("message"))
        if isinstance(message, UserMessage):
            user_entry(fold, entry, fact_id, message, fact["timestamp"])
        elif isinstance(message, AssistantMessage):
            assistant_entry(fold, entry, fact_id, message, fact["timestamp"])
        else:
            tool_entry(fold, entry, fact_id, message, fact["timestamp"])
    elif entry_type == "compaction":
        compaction_entry(fold, entry, fact_id, fact["timestamp"])
    else:
        fail(INVALID_FACT, f"unknown entry type {show(entry_type)}")


def record_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    """Records (§9), by their type."""
    record = _body(fact, contract.RECORD_FACT_KEYS, "record")
    record_type = record.get("type")
    rule = RECORD_RULES.get(record_type) if type(record_type) is str else None
    if rule is None:
        fail(INVALID_FACT, f"unknown record type {show(record_type)}")
    rule(fold, record, fact_id)


def _body(fact: dict[str, Any], keys: frozenset[str], member: str) -> dict[str, Any]:
    require_keys(fact, keys, f"{member} fact")
    return require_object(fact.get(member), member)


REFERENCE_RULES: Final = {
    "entry": entry_fact,
    "record": record_fact,
    "usage": usage_fact,
    "raw": raw_fact,
    "mcp": mcp_fact,
    "seal": seal_fact,
}
"""Each fact kind's reference rule (the header's profile says which kinds exist)."""

FAST_TWINS: Final[dict[type, Callable[[Any, Any, str], bool]]] = {
    UserWire: fast_user_entry,
    AssistantWire: fast_assistant_entry,
    ToolWire: fast_tool_result,
    RunStartedWire: fast_run_started,
    StepAttemptWire: fast_step_attempt,
    ToolStartedWire: fast_tool_started,
    OperationFinishedWire: fast_run_finished,
    UsageFactWire: fast_usage,
    SealFactWire: fast_seal,
}
"""Each fast twin, by the shape of the message, record or fact it takes."""

RECORD_RULES: Final = {
    "runStarted": run_started,
    "compactionStarted": compaction_started,
    "stepAttempt": step_attempt,
    "stepFailed": step_failed,
    "toolStarted": tool_started,
    "abortRequested": abort_requested,
    "operationFinished": operation_finished,
}
"""Each record type's reference rule (session-v2 §9)."""
