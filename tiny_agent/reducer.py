"""The fold: journal lines in, session state out, failing closed on the first fault.

Pure and deterministic: no I/O, no clock, no globals.  The fold is the parser
from untrusted JSON to typed state: each rule of session-v2 (and the v3
additions) is checked in the order the contract gives, because the contract
reports the *first* rule a fact breaks, and structural and semantic rules are
interleaved (an unknown operation outranks a malformed ``attempt``).  What it
accepts it stores as typed Structs.

Linear time: every fact is checked against indexes (sets and dicts keyed by
ID), state is updated in place, and nothing earlier is ever re-read.  The
price of updating in place is that a fold which raised is spent: the line that
failed may be half applied, so the fold refuses further use; a caller that
needs to go on (the writer, after refusing a candidate) starts a new fold.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
from typing import Any, Callable, Final, Iterable, NoReturn

import msgspec
from msgspec import UNSET

from tiny_agent.canonical import canonical_json, sha256_digest
from tiny_agent.errors import CorruptionError, ErrorCode
from tiny_agent.json_profile import (
    NOT_TEXT,
    LineDecoder,
    ProfileViolation,
    ProvenLineDecoder,
    decode_text,
    find_encoded_surrogate,
)
from tiny_agent.state import (
    IDLE,
    CompactionOperation,
    ConfigurationSnapshot,
    AppliedEntry,
    Header,
    RunOperation,
    SessionState,
    LatestAttempt,
    ToolCallState,
    ToolDigest,
)
from tiny_agent.transcript import (
    PRE_EXECUTION_REASONS,
    STOP_REASONS,
    SYNTHETIC_TEXTS,
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    compaction_summary_message,
)
from tiny_agent.wire import (
    MAX_SAFE_INTEGER,
    AssistantWire,
    EntryFactWire,
    LineWire,
    MessageEntry,
    OperationFinishedWire,
    RawFactWire,
    RecordFactWire,
    RunStartedWire,
    SealFactWire,
    StepAttemptWire,
    ToolStartedWire,
    ToolWire,
    UsageFactWire,
    UserWire,
)

SUPPORTED_VERSIONS: Final = (2, 3)

_uuid_match = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}").fullmatch
_digest_match = re.compile(r"sha256:[0-9a-f]{64}").fullmatch

HEADER_KEYS: Final = frozenset(
    ("kind", "version", "id", "createdAt", "cwd", "provider", "model", "environmentIdentity")
)
ENTRY_FACT_KEYS: Final = frozenset(("kind", "seq", "id", "timestamp", "entry"))
RECORD_FACT_KEYS: Final = frozenset(("kind", "seq", "id", "timestamp", "record"))
USAGE_FACT_KEYS: Final = frozenset(("kind", "seq", "id", "timestamp", "operationId", "usage", "attemptId", "toolStartedId"))
RAW_FACT_KEYS: Final = frozenset(("kind", "seq", "id", "timestamp", "operationId", "attemptId", "raw"))
SEAL_FACT_KEYS: Final = frozenset(("kind", "seq", "id", "timestamp", "chain"))

USER_MESSAGE_KEYS: Final = frozenset(("role", "content"))
ASSISTANT_MESSAGE_KEYS: Final = frozenset(("role", "content", "tool_calls"))
TOOL_MESSAGE_KEYS: Final = frozenset(("role", "content", "tool_call_id"))
TOOL_CALL_KEYS: Final = frozenset(("id", "type", "function"))
FUNCTION_KEYS: Final = frozenset(("name", "arguments"))

USER_ENTRY_KEYS: Final = frozenset(("type", "message"))
ASSISTANT_ENTRY_KEYS: Final = frozenset(("type", "stepId", "attemptId", "stopReason", "message"))
STARTED_RESULT_KEYS: Final = frozenset(("type", "stepId", "message", "toolName", "toolStartedId", "result"))
PRE_EXECUTION_RESULT_KEYS: Final = frozenset(
    ("type", "stepId", "assistantEntryId", "toolIndex", "message", "toolName", "result")
)
RESULT_KEYS: Final = frozenset(("type", "reason"))
COMPACTION_ENTRY_KEYS: Final = frozenset(
    ("type", "operationId", "summary", "compactedThroughEntryId", "retainedTail")
)
RETAINED_KEYS: Final = frozenset(("sourceEntryId", "message"))

RUN_STARTED_KEYS: Final = frozenset(("type", "operationId", "operationKind", "inputEntryId"))
COMPACTION_STARTED_KEYS: Final = frozenset(
    (
        "type",
        "operationId",
        "operationKind",
        "inputThroughEntryId",
        "resultEntryId",
        "compactedEntryIds",
        "retainedEntryIds",
        "sourceDigest",
    )
)
STEP_ATTEMPT_KEYS: Final = frozenset(
    (
        "type",
        "operationId",
        "stepId",
        "attemptId",
        "stepKind",
        "attempt",
        "contextThroughEntryId",
        "configurationSnapshot",
        "configurationDigest",
    )
)
STEP_FAILED_KEYS: Final = frozenset(("type", "operationId", "stepId", "attemptId", "error"))
TOOL_STARTED_KEYS: Final = frozenset(
    (
        "type",
        "operationId",
        "stepId",
        "assistantEntryId",
        "toolIndex",
        "toolCallId",
        "toolName",
        "arguments",
        "replay",
        "replayKey",
        "environmentIdentity",
        "resultEntryId",
    )
)
ABORT_REQUESTED_KEYS: Final = frozenset(("type", "operationId", "operationKind", "phase", "toolCallId", "reason"))
OPERATION_FINISHED_KEYS: Final = frozenset(
    ("type", "operationId", "operationKind", "outcome", "completion", "finalEntryId", "error")
)
ERROR_KEYS: Final = frozenset(("code", "message"))
USAGE_KEYS: Final = frozenset(("input", "output", "cacheRead", "cacheWrite"))
SNAPSHOT_KEYS: Final = frozenset(
    ("model", "systemPromptDigest", "tools", "adapterIdentity", "routingIdentity", "outputOptionsDigest")
)
TOOL_DIGEST_KEYS: Final = frozenset(("name", "definitionDigest"))
RAW_KEYS: Final = frozenset(("status", "contentType", "body", "bodyBase64"))

# Reservation flavours (session-v2 §6).
IDENTITY: Final = "identity"
TOOL_RESULT: Final = "tool-result"
COMPACTION_RESULT: Final = "compaction-result"

INVALID_FACT: Final = "INVALID_FACT"
INVALID_REFERENCE: Final = "INVALID_REFERENCE"
INVALID_TRANSITION: Final = "INVALID_TRANSITION"
INVALID_TRANSCRIPT: Final = "INVALID_TRANSCRIPT"
DUPLICATE_ID: Final = "DUPLICATE_ID"

# JavaScript's String.prototype.trim set; the contract leaves "whitespace" to
# the implementation (session-v2 §18 D6) and we follow the TypeScript reference.
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def is_blank(text: str) -> bool:
    """Empty or whitespace only, by the same rule as a ``normal`` completion's final answer."""
    return not text.strip(_JS_WHITESPACE)


class Fault(Exception):
    """A broken rule, before the fold knows the line (and whether a seq applies)."""

    def __init__(self, code: ErrorCode, reason: str, *, with_seq: bool = True) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason
        self.with_seq = with_seq


def _fail(code: ErrorCode, reason: str) -> NoReturn:
    raise Fault(code, reason)


def _is_uuid(value: object) -> bool:
    return type(value) is str and _uuid_match(value) is not None


def _is_digest(value: object) -> bool:
    return type(value) is str and _digest_match(value) is not None


def _is_safe_int(value: object, minimum: int = 0) -> bool:
    # bool is an int subclass; ``type(...) is int`` keeps true/false out.
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def _is_text(value: object) -> bool:
    """A non-empty string (session-v2 §3)."""
    return type(value) is str and value != ""


def _show(value: object) -> str:
    """A short rendering of a bad value for an error reason."""
    text = msgspec.json.encode(value).decode() if _encodable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _encodable(value: object) -> bool:
    return value is None or type(value) in (str, int, float, bool, list, dict)


def _unknown_key(value: dict[str, Any], allowed: frozenset[str], what: str) -> NoReturn:
    unknown = next(key for key in value if key not in allowed)
    _fail(INVALID_FACT, f'{what} has unknown key "{unknown}"')


def _not_uuid(value: object, what: str) -> NoReturn:
    _fail(INVALID_FACT, f"{what} is not a UUIDv7: {_show(value)}")


def _not_text(value: object, what: str) -> NoReturn:
    _fail(INVALID_FACT, f"{what} is not a non-empty string: {_show(value)}")


# The helpers below carry one rule each.  Hot paths spell the same test out
# inline (``type(v) is not str or _uuid_match(v) is None``) and call the
# ``_not_*`` function above only to raise: a Python call per field is a
# large share of what folding a fact costs.


def _require_keys(value: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not value.keys() <= allowed:
        _unknown_key(value, allowed, what)


def _require_uuid(value: object, what: str) -> str:
    if type(value) is not str or _uuid_match(value) is None:
        _not_uuid(value, what)
    return value


def _require_text(value: object, what: str) -> str:
    if type(value) is not str or not value:
        _not_text(value, what)
    return value


def _require_object(value: object, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        _fail(INVALID_FACT, f"{what} is not an object")
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------
# Messages (session-v2 §7)
# --------------------------------------------------------------------------


def parse_message(value: object, what: str = "message") -> Message:
    """Check a journal message against the exact-key contract and return it typed."""
    if type(value) is not dict:
        _fail(INVALID_FACT, f"{what} is not an object")
    role = value.get("role")
    if role == "user":
        if not value.keys() <= USER_MESSAGE_KEYS:
            _unknown_key(value, USER_MESSAGE_KEYS, f"user {what}")
        content = value.get("content")
        if type(content) is not str or not content:
            _not_text(content, f"user {what} content")
        return UserMessage(content)
    if role == "assistant":
        return _parse_assistant(value, what)
    if role == "tool":
        if not value.keys() <= TOOL_MESSAGE_KEYS:
            _unknown_key(value, TOOL_MESSAGE_KEYS, f"tool {what}")
        content = value.get("content")
        if type(content) is not str:
            _fail(INVALID_FACT, f"tool {what} content is not a string")
        call_id = value.get("tool_call_id")
        if type(call_id) is not str or not call_id:
            _not_text(call_id, f"tool {what} tool_call_id")
        return ToolMessage(content, call_id)
    _fail(INVALID_FACT, f"{what} role is not user, assistant or tool: {_show(role)}")


def _parse_assistant(value: dict[str, Any], what: str) -> AssistantMessage:
    if not value.keys() <= ASSISTANT_MESSAGE_KEYS:
        _unknown_key(value, ASSISTANT_MESSAGE_KEYS, f"assistant {what}")
    if "content" not in value:
        _fail(INVALID_FACT, f"assistant {what} has no content member (it must be a string or null)")
    content = value["content"]
    if content is not None and type(content) is not str:
        _fail(INVALID_FACT, f"assistant {what} content is neither a string nor null")
    raw_calls = value.get("tool_calls", UNSET)
    if raw_calls is UNSET:
        return AssistantMessage(content)
    if type(raw_calls) is not list or not raw_calls:
        _fail(INVALID_FACT, f"assistant {what} tool_calls is not a non-empty array")
    calls = []
    for index, call in enumerate(raw_calls):
        if type(call) is not dict or not call.keys() <= TOOL_CALL_KEYS:
            _bad_tool_call(call, f"assistant {what} tool_calls[{index}]")
        call_id = call.get("id")
        function = call.get("function")
        if (
            type(call_id) is not str
            or not call_id
            or call.get("type") != "function"
            or type(function) is not dict
            or not function.keys() <= FUNCTION_KEYS
        ):
            _bad_tool_call(call, f"assistant {what} tool_calls[{index}]")
        name = function.get("name")
        arguments = function.get("arguments")
        if type(name) is not str or not name or type(arguments) is not str:
            _bad_tool_call(call, f"assistant {what} tool_calls[{index}]")
        calls.append(ToolCall(call_id, "function", FunctionCall(name, arguments)))
    if len(calls) > 1 and len({call.id for call in calls}) != len(calls):
        _fail(INVALID_TRANSCRIPT, f"assistant {what} repeats a tool call id")
    return AssistantMessage(content, calls)


def _bad_tool_call(value: object, what: str) -> NoReturn:
    """Name the first rule a tool call breaks (all of them are INVALID_FACT)."""
    call = _require_object(value, what)
    _require_keys(call, TOOL_CALL_KEYS, what)
    _require_text(call.get("id"), f"{what}.id")
    if call.get("type") != "function":
        _fail(INVALID_FACT, f'{what}.type is not "function"')
    function = _require_object(call.get("function"), f"{what}.function")
    _require_keys(function, FUNCTION_KEYS, f"{what}.function")
    _require_text(function.get("name"), f"{what}.function.name")
    _fail(INVALID_FACT, f"{what}.function.arguments is not a string")


def transcript_violation(messages: Iterable[Message]) -> str | None:
    """The first breach of the role rule (session-v2 §12) in a message list, or None."""
    outstanding: set[str] = set()
    for index, message in enumerate(messages):
        reason = _role_rule(outstanding, message)
        if reason is not None:
            return f"message {index}: {reason}"
    return None


def _role_rule(outstanding: set[str], message: Message) -> str | None:
    """Advance the outstanding-call set by one message; the breach it causes, if any."""
    kind = type(message)
    if kind is ToolMessage:
        if message.tool_call_id not in outstanding:  # type: ignore[union-attr]
            return f'tool result for "{message.tool_call_id}" answers no outstanding call'  # type: ignore[union-attr]
        outstanding.discard(message.tool_call_id)  # type: ignore[union-attr]
        return None
    if outstanding:
        pending = ", ".join(sorted(outstanding))
        who = "assistant" if kind is AssistantMessage else "user"
        reason = f"{who} message while tool calls are unanswered ({pending})"
    else:
        reason = None
    if kind is AssistantMessage:
        outstanding.clear()
        if message.tool_calls is not UNSET:  # type: ignore[union-attr]
            outstanding.update(call.id for call in message.tool_calls)  # type: ignore[union-attr]
    return reason


# --------------------------------------------------------------------------
# Internal bookkeeping records
# --------------------------------------------------------------------------


class _Attempt(msgspec.Struct, gc=False):
    id: str
    operation_id: str
    step_id: str
    step_kind: str
    number: int
    context_through: str
    digest: str
    tool_names: frozenset[str]
    open: bool = True
    failed: bool = False
    settled_entry_id: str | None = None
    raw_id: str | None = None


class _Operation(msgspec.Struct):
    kind: str
    state: RunOperation | CompactionOperation
    latest_step_id: str | None = None
    pending: int = 0
    """Started tool calls still waiting for their result (kept as a count: steps check it often)."""


class _Configuration(msgspec.Struct, gc=False):
    source: dict[str, Any]
    snapshot: ConfigurationSnapshot
    digest: str
    tool_names: frozenset[str]


class _SourceDigest:
    """Running SHA-256 over the canonical source list (session-v2 §13.3).

    Compactions normally summarise through the newest message, so the hash is
    extended forward and copied at each request instead of recomputed from the
    start: total work stays linear in the number of messages.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b"[")
        self._count = 0

    def through(self, fold: Fold, message_count: int) -> str:
        if message_count < self._count:
            self.__init__()  # type: ignore[misc]
        while self._count < message_count:
            entry_id = fold.message_ids[self._count]
            record = fold.state.entries[entry_id]
            if self._count:
                self._hash.update(b",")
            item = {"sourceEntryId": entry_id, "message": msgspec.to_builtins(record.message)}
            self._hash.update(canonical_json(item))
            self._count += 1
        final = self._hash.copy()
        final.update(b"]")
        return "sha256:" + final.hexdigest()


# --------------------------------------------------------------------------
# The fold
# --------------------------------------------------------------------------


class Fold:
    """An incremental reduction of one journal, line by line.

    ``apply_header`` then ``apply_line`` for each committed line, in order.
    ``state`` is the reduced state so far (advanced in place).  Any
    :class:`CorruptionError` spends the fold.

    Two paths fold a line.  The reference path reads it as untrusted dicts
    and checks every rule in the contract's order: it is the definition of
    what the fold accepts and of which error it reports.  The fast path
    (``fast_path=True``, the default) decodes an ordinary line straight into
    typed Structs (:mod:`tiny_agent.wire`) and applies a fact only when every
    rule holds; it never raises.  For each fact it first checks, then
    applies, so the first fact it cannot vouch for is still untouched and the
    reference path takes over from that fact, finding its first fault.  The
    two paths share the code that applies a fact; the differential tests
    (tests/test_fast_path.py) hold their outcomes identical.
    """

    def __init__(self, *, fast_path: bool = True) -> None:
        self.state: SessionState = None  # type: ignore[assignment]
        self.lines = 0
        self.committed_length = 0
        self.version = 0
        self.message_ids: list[str] = []
        self._spent = False
        self._next_seq = 1
        self._seq: int | None = None
        self._fact_ids: set[str] = set()
        self._reserved: dict[str, str] = {}
        self._entry_order: list[str] = []
        self._outstanding: set[str] = set()
        self._transcript_breach: str | None = None
        self._operations: dict[str, _Operation] = {}
        self._current: _Operation | None = None
        self._attempts: dict[str, _Attempt] = {}
        self._step_attempts: dict[str, list[_Attempt]] = {}
        self._tool_started: dict[str, ToolCallState] = {}
        self._used_pairs: set[tuple[str, int]] = set()
        self._configurations: dict[object, _Configuration] = {}
        self._source_digest = _SourceDigest()
        self._usage = [0, 0, 0, 0]
        self._chain: bytes = b""
        self._facts_in_line = 0
        self._fact_index = 0
        self._line_decoder = LineDecoder()
        self._proven = ProvenLineDecoder(LineWire) if fast_path else None
        self._handlers: dict[str, Callable[[dict[str, Any], str], None]] = {
            "entry": self._entry_fact,
            "record": self._record_fact,
            "usage": self._usage_fact,
        }
        self._records: dict[str, Callable[[dict[str, Any], str], None]] = {
            "runStarted": self._run_started,
            "compactionStarted": self._compaction_started,
            "stepAttempt": self._step_attempt,
            "stepFailed": self._step_failed,
            "toolStarted": self._tool_started_record,
            "abortRequested": self._abort_requested,
            "operationFinished": self._operation_finished,
        }

    # -- lines --------------------------------------------------------------

    @property
    def chain(self) -> str:
        """v3: the seal value the next line must carry (the chain through the last committed line)."""
        return "sha256:" + self._chain.hex()

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def apply_header(self, line: bytes) -> None:
        self._guard()
        self.lines = 1
        try:
            self._header(self._decode(line))
        except Fault as fault:
            self._spend(fault, None)
        if self.version == 3:
            self._chain = hashlib.sha256(line + b"\n").digest()
        self.committed_length = len(line) + 1
        self.state.repairedLength = self.committed_length

    def apply_line(self, line: bytes) -> None:
        """Apply one committed transaction line (without its LF), all or nothing."""
        if self._spent or self.state is None:
            self._guard()
        self.lines += 1
        self._seq = None
        self._transcript_breach = None
        try:
            self._fold_line(line)
        except Fault as fault:
            self._spend(fault, self._seq if fault.with_seq else None)
        if self.version == 3:
            digest = hashlib.sha256(self._chain)
            digest.update(line)
            digest.update(b"\n")
            self._chain = digest.digest()
        self.committed_length += len(line) + 1
        state = self.state
        state.repairedLength = self.committed_length
        state.factCount = self._next_seq - 1

    def _guard(self) -> None:
        if self._spent:
            raise RuntimeError("this fold already failed; start a new one")
        if self.lines and self.state is None:
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

    # -- header (§4) --------------------------------------------------------

    def _header(self, value: Any) -> None:
        def bad(reason: str) -> NoReturn:
            raise Fault("INVALID_HEADER", reason, with_seq=False)

        if type(value) is not dict:
            bad("header is not a JSON object")
        if not value.keys() <= HEADER_KEYS:
            unknown = next(key for key in value if key not in HEADER_KEYS)
            bad(f'header has unknown key "{unknown}"')
        if value.get("kind") != "header":
            bad('header kind is not "header"')
        version = value.get("version")
        if type(version) is not int or version not in SUPPORTED_VERSIONS:
            raise Fault(
                "UNSUPPORTED_VERSION",
                f"header version {_show(version)} is not supported (expected 2 or 3)",
                with_seq=False,
            )
        if not _is_uuid(value.get("id")):
            bad(f"header id is not a UUIDv7: {_show(value.get('id'))}")
        if not _is_safe_int(value.get("createdAt")):
            bad("header createdAt is not a safe non-negative integer")
        for name in ("cwd", "provider", "model", "environmentIdentity"):
            if not _is_text(value.get(name)):
                bad(f"header {name} is not a non-empty string")
        self.version = version
        self.state = SessionState(
            header=Header(
                id=value["id"],
                createdAt=value["createdAt"],
                cwd=value["cwd"],
                provider=value["provider"],
                model=value["model"],
                environmentIdentity=value["environmentIdentity"],
            ),
            version=version,
            transcript=[],
            activeContext=[],
            usage=Usage(),
            operation=IDLE,
            repairedLength=0,
        )
        if version == 3:
            self._handlers["raw"] = self._raw_fact
            self._handlers["seal"] = self._seal_fact

    # -- transactions (§5) --------------------------------------------------

    def _fold_line(self, line: bytes) -> None:
        """The fast path for as many facts as it can vouch for, the reference path for the rest."""
        vouched = 0
        value = self._proven.decode(line) if self._proven is not None else None
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
        if self.version == 3:
            if not ends_with_seal:
                _fail(INVALID_FACT, "a v3 transaction must end with a seal fact")
            self.state.sealed = self._facts_in_line == 1
        if self._transcript_breach is not None:
            _fail(INVALID_TRANSCRIPT, self._transcript_breach)

    def _fact(self, fact: Any) -> None:
        """The envelope (session-v2 §5), then the kind's own rules."""
        if type(fact) is not dict:
            raise Fault(INVALID_FACT, "fact is not a JSON object", with_seq=False)
        seq = fact.get("seq")
        if type(seq) is not int or seq != self._next_seq:
            self._bad_seq(seq)
        self._seq = seq
        fact_id = fact.get("id")
        if type(fact_id) is not str or _uuid_match(fact_id) is None:
            _not_uuid(fact_id, "fact id")
        timestamp = fact.get("timestamp")
        if type(timestamp) is not int or not 0 <= timestamp <= MAX_SAFE_INTEGER:
            _fail(INVALID_FACT, f"fact timestamp is not a safe non-negative integer: {_show(timestamp)}")
        if fact_id in self._fact_ids:
            _fail(DUPLICATE_ID, f"fact id {fact_id} is already used by an earlier fact")
        kind = fact.get("kind")
        handler = self._handlers.get(kind) if type(kind) is str else None
        if handler is None:
            _fail(INVALID_FACT, f"unknown fact kind {_show(kind)}")
        handler(fact, fact_id)
        if fact_id in self._reserved:
            _fail(DUPLICATE_ID, f"fact id {fact_id} is reserved by a record")
        self._commit_fact(fact_id, seq)

    def _commit_fact(self, fact_id: str, seq: int) -> None:
        self._fact_ids.add(fact_id)
        self._next_seq = seq + 1

    def _bad_seq(self, seq: object) -> NoReturn:
        if not _is_safe_int(seq, 1):
            raise Fault(INVALID_FACT, f"fact seq is not a safe integer >= 1: {_show(seq)}", with_seq=False)
        self._seq = seq  # type: ignore[assignment]
        raise Fault("SEQ_MISMATCH", f"expected seq {self._next_seq}, found {seq}")

    # -- the ID namespace (§6) ----------------------------------------------

    def _reserve(self, value: object, flavour: str, what: str) -> str:
        if type(value) is not str or _uuid_match(value) is None:
            _not_uuid(value, what)
        if value in self._fact_ids or value in self._reserved:
            _fail(DUPLICATE_ID, f"{what} {value} is already in use")
        self._reserved[value] = flavour
        return value

    # -- entries (§8) -------------------------------------------------------

    def _entry_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= ENTRY_FACT_KEYS:
            _unknown_key(fact, ENTRY_FACT_KEYS, "entry fact")
        entry = fact.get("entry")
        if type(entry) is not dict:
            _fail(INVALID_FACT, "entry is not an object")
        entry_type = entry.get("type")
        if entry_type == "message":
            self._message_entry(entry, fact_id, fact["timestamp"])
        elif entry_type == "compaction":
            self._compaction_entry(entry, fact_id, fact["timestamp"])
        else:
            _fail(INVALID_FACT, f"unknown entry type {_show(entry_type)}")

    def _message_entry(self, entry: dict[str, Any], fact_id: str, timestamp: int) -> None:
        message = parse_message(entry.get("message"))
        kind = type(message)
        state = self.state
        position = len(self._entry_order)
        if kind is UserMessage:
            if fact_id in self._reserved:
                _fail(DUPLICATE_ID, f"user entry id {fact_id} is reserved by a record")
            if not entry.keys() <= USER_ENTRY_KEYS:
                _unknown_key(entry, USER_ENTRY_KEYS, "user entry")
            record = AppliedEntry(fact_id, position, message, len(state.transcript), None, None, None, None, timestamp)
        elif kind is AssistantMessage:
            record = self._assistant_entry(entry, fact_id, message, timestamp)  # type: ignore[arg-type]
        else:
            record = self._tool_entry(entry, fact_id, message, timestamp)  # type: ignore[arg-type]
        self._append_message(record, message)

    def _append_message(self, record: AppliedEntry, message: Message) -> None:
        """Apply a message entry that passed every rule; a role-rule breach fails the line at its end."""
        state = self.state
        fact_id = record.id
        state.entries[fact_id] = record
        self._entry_order.append(fact_id)
        self.message_ids.append(fact_id)
        state.transcript.append(message)
        state.activeContext.append(message)
        state.contextBoundary = fact_id
        breach = _role_rule(self._outstanding, message)
        if breach is not None and self._transcript_breach is None:
            self._transcript_breach = breach

    def _assistant_entry(
        self, entry: dict[str, Any], fact_id: str, message: AssistantMessage, timestamp: int
    ) -> AppliedEntry:
        if fact_id in self._reserved:
            _fail(DUPLICATE_ID, f"assistant entry id {fact_id} is reserved by a record")
        if not entry.keys() <= ASSISTANT_ENTRY_KEYS:
            _unknown_key(entry, ASSISTANT_ENTRY_KEYS, "assistant entry")
        step_id = entry.get("stepId")
        attempt_id = entry.get("attemptId")
        attempt = self._attempts.get(attempt_id) if type(attempt_id) is str else None
        if attempt is None or attempt.step_id != step_id:
            # An attempt we know has valid IDs; anything else gets the checks in order.
            _require_uuid(step_id, "assistant entry stepId")
            _require_uuid(attempt_id, "assistant entry attemptId")
        stop_reason = entry.get("stopReason")
        if type(stop_reason) is not str or stop_reason not in STOP_REASONS:
            _fail(INVALID_FACT, f"assistant entry stopReason is not stop, toolUse or length: {_show(stop_reason)}")
        if attempt is None:
            _fail(INVALID_REFERENCE, f"assistant entry names unknown attempt {attempt_id}")
        if attempt.step_id != step_id:
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}, not {step_id}")
        if not attempt.open:
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
        if attempt.step_kind != "assistant":
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} is a compaction attempt")
        current = self._current
        if current is None or current.kind != "run" or current.state.operationId != attempt.operation_id:
            _fail(INVALID_TRANSITION, f"the operation of attempt {attempt_id} is not the current run")
        has_calls = message.tool_calls is not UNSET
        if stop_reason == "toolUse" and not has_calls:
            _fail(INVALID_TRANSCRIPT, "stopReason toolUse but the message has no tool_calls")
        if stop_reason == "stop" and has_calls:
            _fail(INVALID_TRANSCRIPT, "stopReason stop but the message has tool_calls")
        return self._settle_assistant(current, attempt, fact_id, message, stop_reason, timestamp)

    def _settle_assistant(
        self, current: _Operation, attempt: _Attempt, fact_id: str, message: AssistantMessage, stop_reason: str, timestamp: int
    ) -> AppliedEntry:
        """Close the attempt an assistant entry settles; the entry's record, to append."""
        attempt.open = False
        attempt.settled_entry_id = fact_id
        step = current.state.step
        step.status = "settled"  # type: ignore[union-attr]
        step.settledEntryId = fact_id  # type: ignore[union-attr]
        step.stopReason = stop_reason  # type: ignore[union-attr]
        return AppliedEntry(
            fact_id,
            len(self._entry_order),
            message,
            len(self.state.transcript),
            attempt.operation_id,
            attempt.step_id,
            attempt.id,
            stop_reason,  # type: ignore[arg-type]
            timestamp,
        )

    def _tool_entry(self, entry: dict[str, Any], fact_id: str, message: ToolMessage, timestamp: int) -> AppliedEntry:
        pre_execution = "assistantEntryId" in entry or "toolIndex" in entry
        allowed = PRE_EXECUTION_RESULT_KEYS if pre_execution else STARTED_RESULT_KEYS
        if not entry.keys() <= allowed:
            _unknown_key(entry, allowed, "tool result entry")
        result = entry.get("result")
        if type(result) is not dict:
            _fail(INVALID_FACT, "tool result is not an object")
        if not result.keys() <= RESULT_KEYS:
            _unknown_key(result, RESULT_KEYS, "tool result")
        step_id = entry.get("stepId")
        if type(step_id) is not str or _uuid_match(step_id) is None:
            _not_uuid(step_id, "tool result stepId")
        tool_name = entry.get("toolName")
        if type(tool_name) is not str or not tool_name:
            _not_text(tool_name, "tool result toolName")
        if pre_execution:
            operation_id = self._pre_execution_result(entry, message, result, step_id, tool_name)
        else:
            operation_id = self._started_result(entry, fact_id, message, result, step_id, tool_name)
        return AppliedEntry(
            fact_id, len(self._entry_order), message, len(self.state.transcript), operation_id, step_id, None, None, timestamp
        )

    def _started_result(
        self,
        entry: dict[str, Any],
        fact_id: str,
        message: ToolMessage,
        result: dict[str, Any],
        step_id: str,
        tool_name: str,
    ) -> str:
        if self._reserved.get(fact_id) != TOOL_RESULT:
            _fail(INVALID_REFERENCE, f"tool result id {fact_id} was not reserved by a toolStarted record")
        result_type = result.get("type")
        if result_type == "success" or result_type == "error":
            if "reason" in result:
                _fail(INVALID_FACT, f"a {result_type} tool result has a reason")
        elif result_type == "synthetic":
            if result.get("reason") != "interrupted":
                _fail(INVALID_FACT, "a started tool result can only be synthetic for reason interrupted")
            if message.content != SYNTHETIC_TEXTS["interrupted"]:
                _fail(INVALID_TRANSCRIPT, "interrupted tool result content is not the fixed interrupted text")
        else:
            _fail(INVALID_FACT, f"tool result type is not success, error or synthetic: {_show(result_type)}")
        started_id = entry.get("toolStartedId")
        started = self._tool_started.get(started_id) if type(started_id) is str else None
        if started is None:
            _require_uuid(started_id, "tool result toolStartedId")
            _fail(INVALID_REFERENCE, f"toolStartedId {started_id} names no toolStarted record")
        mismatch = _started_mismatch(started, step_id, fact_id, message.tool_call_id, tool_name)
        if mismatch is not None:
            _fail(INVALID_REFERENCE, f"tool result does not match toolStarted {started_id}: {mismatch}")
        self._complete_tool(started, fact_id)
        return started.operationId

    def _complete_tool(self, started: ToolCallState, result_id: str) -> None:
        started.status = "completed"
        self._operations[started.operationId].pending -= 1
        del self._reserved[result_id]

    def _pre_execution_result(
        self, entry: dict[str, Any], message: ToolMessage, result: dict[str, Any], step_id: str, tool_name: str
    ) -> str:
        reason = result.get("reason")
        if result.get("type") != "synthetic" or type(reason) is not str or reason not in PRE_EXECUTION_REASONS:
            _fail(
                INVALID_FACT,
                "a pre-execution tool result must be synthetic with reason "
                "invalidArguments, unknownTool, truncated or aborted",
            )
        assistant_id = _require_uuid(entry.get("assistantEntryId"), "tool result assistantEntryId")
        tool_index = entry.get("toolIndex")
        if not _is_safe_int(tool_index):
            _fail(INVALID_FACT, f"tool result toolIndex is not a safe non-negative integer: {_show(tool_index)}")
        current = self._current
        if current is None or current.kind != "run":
            _fail(INVALID_REFERENCE, "a pre-execution tool result needs a current run")
        run_id = current.state.operationId
        target = self.state.entries.get(assistant_id)
        if target is None or target.message is None or target.operationId != run_id or target.stepId != step_id:
            _fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a message of this run and step")
        calls = target.message.tool_calls if type(target.message) is AssistantMessage else UNSET
        if calls is UNSET or tool_index >= len(calls):  # type: ignore[arg-type,operator]
            _fail(INVALID_REFERENCE, f"entry {assistant_id} has no tool call at index {tool_index}")
        call = calls[tool_index]  # type: ignore[index]
        if call.id != message.tool_call_id or call.function.name != tool_name:
            _fail(
                INVALID_REFERENCE,
                f"tool call {tool_index} of entry {assistant_id} is not {message.tool_call_id}/{tool_name}",
            )
        pair = (assistant_id, tool_index)
        if pair in self._used_pairs:
            _fail(INVALID_TRANSITION, f"tool call {tool_index} of entry {assistant_id} was already started or answered")
        if message.content != SYNTHETIC_TEXTS[reason]:
            _fail(INVALID_TRANSCRIPT, f"{reason} tool result content is not the fixed {reason} text")
        self._used_pairs.add(pair)  # type: ignore[arg-type]
        return run_id

    def _compaction_entry(self, entry: dict[str, Any], fact_id: str, timestamp: int) -> None:
        if self._reserved.get(fact_id) != COMPACTION_RESULT:
            _fail(INVALID_REFERENCE, f"compaction entry id {fact_id} was not reserved by compactionStarted")
        _require_keys(entry, COMPACTION_ENTRY_KEYS, "compaction entry")
        operation = self._lookup_operation(entry.get("operationId"), "compaction entry operationId")
        if operation.kind != "compaction":
            _fail(INVALID_TRANSITION, "compaction entry does not belong to a compaction")
        compaction: CompactionOperation = operation.state  # type: ignore[assignment]
        if compaction.resultEntryId != fact_id:
            _fail(INVALID_REFERENCE, f"compaction entry id is not the reserved result id {compaction.resultEntryId}")
        through_id = _require_uuid(entry.get("compactedThroughEntryId"), "compactedThroughEntryId")
        entries = self.state.entries
        through = entries.get(through_id)
        if through is None:
            _fail(INVALID_REFERENCE, f"compactedThroughEntryId {through_id} names no entry")
        summary = entry.get("summary")
        if type(summary) is not str:
            _fail(INVALID_FACT, "compaction summary is not a string")
        tail = entry.get("retainedTail")
        if type(tail) is not list:
            _fail(INVALID_FACT, "compaction retainedTail is not an array")
        input_position = entries[compaction.inputThroughEntryId].position
        if input_position < through.position:
            _fail(INVALID_REFERENCE, "compactedThroughEntryId lies after the compaction's input boundary")
        expected = [
            entry_id
            for entry_id in self._entry_order[through.position + 1 : input_position + 1]
            if entries[entry_id].message is not None
        ]
        retained = self._retained_tail(tail, expected)
        breach = transcript_violation(retained)
        if breach is not None:
            _fail(INVALID_TRANSCRIPT, f"retained tail breaks the role rule: {breach}")
        step = compaction.step
        attempt = self._attempts.get(step.attemptId) if step is not UNSET else None
        if attempt is None or not attempt.open or attempt.step_kind != "compaction":
            _fail(INVALID_TRANSITION, "compaction entry without an open compaction attempt")
        attempt.open = False
        attempt.settled_entry_id = fact_id
        step.status = "settled"  # type: ignore[union-attr]
        step.settledEntryId = fact_id  # type: ignore[union-attr]
        del self._reserved[fact_id]
        entries[fact_id] = AppliedEntry(
            fact_id, len(self._entry_order), None, -1, compaction.operationId, attempt.step_id, attempt.id, None, timestamp
        )
        self._entry_order.append(fact_id)
        self.state.activeContext = [compaction_summary_message(summary), *retained]
        self.state.contextBoundary = compaction.inputThroughEntryId

    def _retained_tail(self, tail: list[Any], expected: list[str]) -> list[Message]:
        retained: list[Message] = []
        for index, item in enumerate(tail):
            what = f"retainedTail[{index}]"
            element = _require_object(item, what)
            _require_keys(element, RETAINED_KEYS, what)
            source_id = _require_uuid(element.get("sourceEntryId"), f"{what}.sourceEntryId")
            message = parse_message(element.get("message"), f"{what}.message")
            if index >= len(expected) or source_id != expected[index]:
                _fail(INVALID_REFERENCE, f"{what} is not the next message after compactedThroughEntryId")
            if self.state.entries[source_id].message != message:
                _fail(INVALID_REFERENCE, f"{what}.message differs from the stored message {source_id}")
            retained.append(message)
        if len(retained) != len(expected):
            _fail(INVALID_REFERENCE, f"retainedTail holds {len(retained)} messages, expected {len(expected)}")
        return retained

    # -- records (§9) -------------------------------------------------------

    def _record_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= RECORD_FACT_KEYS:
            _unknown_key(fact, RECORD_FACT_KEYS, "record fact")
        record = fact.get("record")
        if type(record) is not dict:
            _fail(INVALID_FACT, "record is not an object")
        record_type = record.get("type")
        handler = self._records.get(record_type) if type(record_type) is str else None
        if handler is None:
            _fail(INVALID_FACT, f"unknown record type {_show(record_type)}")
        handler(record, fact_id)

    def _lookup_operation(self, value: object, what: str) -> _Operation:
        """§9.0: a known, unfinished operation (at most one is unfinished: the current one)."""
        operation = self._operations.get(value) if type(value) is str else None
        if operation is None:
            _require_uuid(value, what)
            _fail(INVALID_REFERENCE, f"{what} {value} names no operation")
        if operation is not self._current:
            _fail(INVALID_TRANSITION, f"operation {value} is already finished")
        return operation

    def _run_started(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= RUN_STARTED_KEYS:
            _unknown_key(record, RUN_STARTED_KEYS, "runStarted record")
        if record.get("operationKind") != "run":
            _fail(INVALID_TRANSITION, 'runStarted operationKind is not "run"')
        if self._current is not None:
            _fail(INVALID_TRANSITION, "runStarted while another operation is unfinished")
        operation_id = self._reserve(record.get("operationId"), IDENTITY, "runStarted operationId")
        input_id = record.get("inputEntryId")
        entry = self.state.entries.get(input_id) if type(input_id) is str else None
        if entry is None or type(entry.message) is not UserMessage:
            _require_uuid(input_id, "runStarted inputEntryId")
            _fail(INVALID_REFERENCE, f"inputEntryId {input_id} is not a user message entry")
        self._begin_run(operation_id, input_id)

    def _begin_run(self, operation_id: str, input_id: str) -> None:
        run = RunOperation(operationId=operation_id, inputEntryId=input_id, toolCalls=[])
        self._begin(_Operation(kind="run", state=run))
        self.state.runCount += 1

    def _begin(self, operation: _Operation) -> None:
        self._operations[operation.state.operationId] = operation
        self._current = operation
        self.state.operation = operation.state

    def _compaction_started(self, record: dict[str, Any], fact_id: str) -> None:
        _require_keys(record, COMPACTION_STARTED_KEYS, "compactionStarted record")
        if record.get("operationKind") != "compaction":
            _fail(INVALID_TRANSITION, 'compactionStarted operationKind is not "compaction"')
        if self._current is not None:
            _fail(INVALID_TRANSITION, "compactionStarted while another operation is unfinished")
        operation_id = self._reserve(record.get("operationId"), IDENTITY, "compactionStarted operationId")
        through_id = _require_uuid(record.get("inputThroughEntryId"), "compactionStarted inputThroughEntryId")
        result_id = self._reserve(record.get("resultEntryId"), COMPACTION_RESULT, "compactionStarted resultEntryId")
        through = self.state.entries.get(through_id)
        if through is None:
            _fail(INVALID_REFERENCE, f"inputThroughEntryId {through_id} names no entry")
        compacted = record.get("compactedEntryIds")
        retained = record.get("retainedEntryIds")
        if type(compacted) is not list or not compacted:
            _fail(INVALID_FACT, "compactedEntryIds is not a non-empty array")
        if type(retained) is not list:
            _fail(INVALID_FACT, "retainedEntryIds is not an array")
        for identifier in (*compacted, *retained):
            _require_uuid(identifier, "compactedEntryIds/retainedEntryIds element")
        message_count = through.transcriptIndex + 1 if through.message is not None else -1
        if message_count < 0 or compacted + retained != self.message_ids[:message_count]:
            _fail(
                INVALID_REFERENCE,
                "compactedEntryIds + retainedEntryIds are not the session's message entries through inputThroughEntryId",
            )
        source_digest = record.get("sourceDigest")
        if not _is_digest(source_digest):
            _fail(INVALID_FACT, "sourceDigest is not a sha256 digest")
        if source_digest != self._source_digest.through(self, message_count):
            _fail(INVALID_REFERENCE, "sourceDigest does not match the messages through inputThroughEntryId")
        compaction = CompactionOperation(
            operationId=operation_id, inputThroughEntryId=through_id, resultEntryId=result_id
        )
        self._begin(_Operation(kind="compaction", state=compaction))

    def _step_attempt(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= STEP_ATTEMPT_KEYS:
            _unknown_key(record, STEP_ATTEMPT_KEYS, "stepAttempt record")
        operation = self._lookup_operation(record.get("operationId"), "stepAttempt operationId")
        number = record.get("attempt")
        if not _is_safe_int(number, 1):
            _fail(INVALID_FACT, f"stepAttempt attempt is not a safe integer >= 1: {_show(number)}")
        if number == 1:
            step_id = self._reserve(record.get("stepId"), IDENTITY, "stepAttempt stepId")
        else:
            step_id = _require_uuid(record.get("stepId"), "stepAttempt stepId")
        attempt_id = self._reserve(record.get("attemptId"), IDENTITY, "stepAttempt attemptId")
        step_kind = record.get("stepKind")
        if number > 2:
            _fail(INVALID_FACT, f"stepAttempt attempt {number} exceeds the two allowed attempts")
        if step_kind != "assistant" and step_kind != "compaction":
            _fail(INVALID_FACT, f"stepAttempt stepKind is not assistant or compaction: {_show(step_kind)}")
        expected_kind = "assistant" if operation.kind == "run" else "compaction"
        if step_kind != expected_kind:
            _fail(INVALID_TRANSITION, f"a {operation.kind} operation cannot take a {step_kind} step")
        context_id = record.get("contextThroughEntryId")
        if type(context_id) is not str or context_id not in self.state.entries:
            _require_uuid(context_id, "stepAttempt contextThroughEntryId")
            _fail(INVALID_REFERENCE, f"contextThroughEntryId {context_id} names no entry")
        if number == 1 and context_id != self.state.contextBoundary:
            _fail(
                INVALID_TRANSITION,
                f"attempt 1 must see the context through {self.state.contextBoundary}, not {context_id}",
            )
        digest = record.get("configurationDigest")
        configuration = self._configuration(record.get("configurationSnapshot"), digest)
        if digest != configuration.digest:
            if not _is_digest(digest):
                _fail(INVALID_FACT, "configurationDigest is not a sha256 digest")
            _fail(INVALID_FACT, f"configurationDigest is not the digest of the snapshot ({configuration.digest})")
        if number == 1:
            self._check_new_step(operation)
        else:
            self._check_retry(operation, step_id, step_kind, context_id, digest)
        self._open_attempt(operation, attempt_id, step_id, step_kind, number, context_id, configuration)

    def _open_attempt(
        self,
        operation: _Operation,
        attempt_id: str,
        step_id: str,
        step_kind: str,
        number: int,
        context_id: str,
        configuration: _Configuration,
    ) -> None:
        operation_id = operation.state.operationId
        digest = configuration.digest
        attempt = _Attempt(
            attempt_id, operation_id, step_id, step_kind, number, context_id, digest, configuration.tool_names
        )
        self._attempts[attempt_id] = attempt
        if number == 1:
            self._step_attempts[step_id] = [attempt]
        else:
            self._step_attempts[step_id].append(attempt)
        operation.latest_step_id = step_id
        operation.state.step = LatestAttempt(
            operation_id,
            step_id,
            attempt_id,
            number,
            step_kind,
            "attempting",
            context_id,
            configuration.snapshot,
            digest,
        )

    def _check_new_step(self, operation: _Operation) -> None:
        step = operation.state.step
        if step is UNSET:
            return
        if step.status != "settled":
            _fail(INVALID_TRANSITION, f"a new step cannot start while step {step.stepId} is {step.status}")
        if operation.kind != "run":
            _fail(INVALID_TRANSITION, "a compaction has exactly one step")
        if step.stopReason != "toolUse":
            _fail(INVALID_TRANSITION, f"a new step cannot follow a step that ended with {step.stopReason}")
        if operation.pending:
            pending = _first_pending(operation.state)  # type: ignore[arg-type]
            _fail(INVALID_TRANSITION, f"a new step cannot start while tool call {pending.toolCallId} is pending")

    def _check_retry(self, operation: _Operation, step_id: str, step_kind: str, context_id: str, digest: str) -> None:
        earlier = self._step_attempts.get(step_id, ())
        if len(earlier) != 1:
            _fail(INVALID_TRANSITION, f"attempt 2 of step {step_id} needs exactly one earlier attempt")
        first = earlier[0]
        if first.number != 1 or not first.open:
            _fail(INVALID_TRANSITION, f"attempt 2 of step {step_id} needs attempt 1 still open")
        if first.step_kind != step_kind or first.operation_id != operation.state.operationId:
            _fail(INVALID_TRANSITION, f"attempt 2 of step {step_id} changes the step kind or operation")
        if first.context_through != context_id:
            _fail(INVALID_TRANSITION, "attempt 2 must repeat attempt 1's contextThroughEntryId")
        if first.digest != digest:
            _fail(INVALID_TRANSITION, "attempt 2 must repeat attempt 1's configurationDigest")
        first.open = False

    def _configuration(self, value: object, claimed_digest: object) -> _Configuration:
        """Validate a configuration snapshot (§13.1) and digest it (§13.2), once per distinct snapshot.

        Sessions reuse one snapshot for step after step, so the last snapshot
        seen under a claimed digest is remembered and an equal one (a C-level
        dict comparison) skips validation and hashing.
        """
        snapshot = _require_object(value, "configurationSnapshot")
        known = self._configurations.get(claimed_digest) if type(claimed_digest) is str else None
        if known is not None and known.source == snapshot:
            return known
        configuration = _new_configuration(snapshot)
        self._configurations[configuration.digest] = configuration
        return configuration

    def _step_failed(self, record: dict[str, Any], fact_id: str) -> None:
        _require_keys(record, STEP_FAILED_KEYS, "stepFailed record")
        operation = self._lookup_operation(record.get("operationId"), "stepFailed operationId")
        attempt_id = _require_uuid(record.get("attemptId"), "stepFailed attemptId")
        _require_error(record.get("error"), "stepFailed error")
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            _fail(INVALID_REFERENCE, f"stepFailed names unknown attempt {attempt_id}")
        if attempt.operation_id != operation.state.operationId:
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to another operation")
        if attempt.step_id != record.get("stepId"):
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}")
        if not attempt.open:
            _fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
        attempt.open = False
        attempt.failed = True
        operation.state.step.status = "failed"  # type: ignore[union-attr]

    def _tool_started_record(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= TOOL_STARTED_KEYS:
            _unknown_key(record, TOOL_STARTED_KEYS, "toolStarted record")
        operation = self._lookup_operation(record.get("operationId"), "toolStarted operationId")
        if operation.kind != "run":
            _fail(INVALID_TRANSITION, "toolStarted outside a run")
        run: RunOperation = operation.state  # type: ignore[assignment]
        assistant_id = record.get("assistantEntryId")
        target = self.state.entries.get(assistant_id) if type(assistant_id) is str else None
        if target is None or target.operationId != run.operationId or target.stopReason != "toolUse":
            _require_uuid(assistant_id, "toolStarted assistantEntryId")
            _fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a toolUse message of this run")
        tool_index = record.get("toolIndex")
        if type(tool_index) is not int or not 0 <= tool_index <= MAX_SAFE_INTEGER:
            _fail(INVALID_FACT, f"toolStarted toolIndex is not a safe non-negative integer: {_show(tool_index)}")
        call_id = record.get("toolCallId")
        if type(call_id) is not str or not call_id:
            _not_text(call_id, "toolStarted toolCallId")
        tool_name = record.get("toolName")
        if type(tool_name) is not str or not tool_name:
            _not_text(tool_name, "toolStarted toolName")
        calls = target.message.tool_calls  # type: ignore[union-attr]
        if tool_index >= len(calls):  # type: ignore[arg-type]
            _fail(INVALID_REFERENCE, f"entry {assistant_id} has no tool call at index {tool_index}")
        call = calls[tool_index]  # type: ignore[index]
        if call.id != call_id or call.function.name != tool_name:
            _fail(INVALID_REFERENCE, f"tool call {tool_index} of entry {assistant_id} is not {call_id}/{tool_name}")
        step_id = record.get("stepId")
        if target.stepId != step_id:
            _fail(INVALID_REFERENCE, f"entry {assistant_id} belongs to step {target.stepId}, not {_show(step_id)}")
        pair = (assistant_id, tool_index)
        if pair in self._used_pairs:
            _fail(INVALID_TRANSITION, f"tool call {tool_index} of entry {assistant_id} was already started or answered")
        arguments = record.get("arguments")
        if type(arguments) is not dict:
            _fail(INVALID_FACT, "toolStarted arguments is not a JSON object")
        replay = record.get("replay")
        if replay != "safe" and replay != "never":
            _fail(INVALID_FACT, f"toolStarted replay is not safe or never: {_show(replay)}")
        replay_key = record.get("replayKey")
        if type(replay_key) is not str or not replay_key:
            _not_text(replay_key, "toolStarted replayKey")
        environment = record.get("environmentIdentity")
        if type(environment) is not str or not environment:
            _not_text(environment, "toolStarted environmentIdentity")
        if tool_name not in self._attempts[target.attemptId].tool_names:  # type: ignore[index]
            _fail(INVALID_TRANSITION, f"tool {tool_name} is not declared in the configuration of its step")
        result_id = self._reserve(record.get("resultEntryId"), TOOL_RESULT, "toolStarted resultEntryId")
        started = ToolCallState(
            run.operationId,
            fact_id,
            step_id,  # type: ignore[arg-type]
            assistant_id,
            tool_index,
            call_id,
            tool_name,
            arguments,
            replay,  # type: ignore[arg-type]
            replay_key,
            environment,
            result_id,
            "pending",
        )
        self._start_tool(operation, started, pair)

    def _start_tool(self, operation: _Operation, started: ToolCallState, pair: tuple[str, int]) -> None:
        self._used_pairs.add(pair)
        self._tool_started[started.toolStartedId] = started
        operation.state.toolCalls.append(started)  # type: ignore[union-attr]
        operation.pending += 1

    def _abort_requested(self, record: dict[str, Any], fact_id: str) -> None:
        _require_keys(record, ABORT_REQUESTED_KEYS, "abortRequested record")
        operation = self._lookup_operation(record.get("operationId"), "abortRequested operationId")
        if record.get("operationKind") != operation.kind:
            _fail(INVALID_TRANSITION, f"abortRequested operationKind is not {operation.kind}")
        if record.get("reason") != "escape":
            _fail(INVALID_TRANSITION, 'abortRequested reason is not "escape"')
        phase = record.get("phase")
        if phase != "model" and phase != "tool" and phase != "compact":
            _fail(INVALID_FACT, f"abortRequested phase is not model, tool or compact: {_show(phase)}")
        if (type(record.get("toolCallId")) is str) != (phase == "tool"):
            _fail(INVALID_FACT, "abortRequested toolCallId must be a string exactly when phase is tool")
        if operation.state.abortRequested:
            _fail(INVALID_TRANSITION, "an abort was already requested for this operation")
        operation.state.abortRequested = True

    def _operation_finished(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= OPERATION_FINISHED_KEYS:
            _unknown_key(record, OPERATION_FINISHED_KEYS, "operationFinished record")
        operation = self._lookup_operation(record.get("operationId"), "operationFinished operationId")
        if record.get("operationKind") != operation.kind:
            _fail(INVALID_TRANSITION, f"operationFinished operationKind is not {operation.kind}")
        outcome = record.get("outcome")
        if outcome != "completed" and outcome != "aborted" and outcome != "failed":
            _fail(INVALID_TRANSITION, f"operationFinished outcome is not completed, aborted or failed: {_show(outcome)}")
        if outcome == "completed":
            if operation.kind == "run":
                self._check_run_completed(operation, record)
            else:
                self._check_compaction_completed(operation, record)
        elif outcome == "aborted":
            self._check_aborted(operation, record)
        elif "finalEntryId" in record:
            _fail(INVALID_FACT, "a failed operation has no finalEntryId")
        if outcome != "completed" and "completion" in record:
            _fail(INVALID_FACT, f"an {outcome} operation has no completion")
        if outcome == "failed":
            _require_error(record.get("error"), "operationFinished error")
        elif "error" in record:
            _fail(INVALID_FACT, f"an {outcome} operation has no error")
        self._finish_operation()

    def _finish_operation(self) -> None:
        self._current = None
        self.state.operation = IDLE

    def _check_run_completed(self, operation: _Operation, record: dict[str, Any]) -> None:
        completion = record.get("completion")
        if completion != "normal" and completion != "truncated":
            _fail(INVALID_FACT, "a completed run needs completion normal or truncated")
        final_id = record.get("finalEntryId")
        if type(final_id) is not str or _uuid_match(final_id) is None:
            _not_uuid(final_id, "operationFinished finalEntryId")
        run: RunOperation = operation.state  # type: ignore[assignment]
        final = self.state.entries.get(final_id)
        if final is None or final.message is None or final.operationId != run.operationId:
            _fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not a message of this run")
        wanted = "stop" if completion == "normal" else "length"
        if final.stopReason != wanted:
            _fail(INVALID_REFERENCE, f"a {completion} completion needs a final entry that stopped with {wanted}")
        attempt = self._attempts.get(final.attemptId)  # type: ignore[arg-type]
        if (
            attempt is None
            or attempt.open
            or attempt.failed
            or attempt.step_id != operation.latest_step_id
            or attempt.settled_entry_id != final_id
        ):
            _fail(INVALID_REFERENCE, f"finalEntryId {final_id} did not settle the run's latest step")
        message = final.message
        if completion == "normal":
            content = message.content if type(message) is AssistantMessage else None
            if content is None or is_blank(content):
                _fail(INVALID_TRANSCRIPT, "a normal completion needs a final answer with non-blank content")
        elif type(message) is not AssistantMessage or message.tool_calls is UNSET:
            _fail(INVALID_TRANSCRIPT, "a truncated completion needs a final entry with tool calls")
        if operation.pending:
            pending = _first_pending(run)
            _fail(INVALID_TRANSCRIPT, f"run completed while tool call {pending.toolCallId} is pending")  # type: ignore[union-attr]

    def _check_compaction_completed(self, operation: _Operation, record: dict[str, Any]) -> None:
        if "completion" in record:
            _fail(INVALID_FACT, "a completed compaction has no completion")
        final_id = _require_uuid(record.get("finalEntryId"), "operationFinished finalEntryId")
        compaction: CompactionOperation = operation.state  # type: ignore[assignment]
        step = compaction.step
        if (
            final_id != compaction.resultEntryId
            or final_id not in self.state.entries
            or step is UNSET
            or step.settledEntryId != final_id
        ):
            _fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not this compaction's settled result entry")

    def _check_aborted(self, operation: _Operation, record: dict[str, Any]) -> None:
        if "finalEntryId" in record:
            _fail(INVALID_TRANSITION, "an aborted operation has no finalEntryId")
        state = operation.state
        if not state.abortRequested:
            _fail(INVALID_TRANSITION, "operation aborted without an abort request")
        if operation.pending:
            pending = _first_pending(state)  # type: ignore[arg-type]
            _fail(INVALID_TRANSITION, f"operation aborted while tool call {pending.toolCallId} is pending")  # type: ignore[union-attr]
        if state.step is not UNSET and state.step.status == "attempting":
            _fail(INVALID_TRANSITION, "operation aborted while a model attempt is open")

    # -- usage (§10) --------------------------------------------------------

    def _usage_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= USAGE_FACT_KEYS:
            _unknown_key(fact, USAGE_FACT_KEYS, "usage fact")
        operation_id = fact.get("operationId")
        if type(operation_id) is not str or operation_id not in self._operations:
            _require_uuid(operation_id, "usage operationId")
            _fail(INVALID_REFERENCE, f"usage operationId {operation_id} names no operation")
        has_attempt = "attemptId" in fact
        if has_attempt == ("toolStartedId" in fact):
            _fail(INVALID_FACT, "usage fact needs exactly one of attemptId and toolStartedId")
        if has_attempt:
            owner_id = fact["attemptId"]
            owner = self._attempts.get(owner_id) if type(owner_id) is str else None
            if owner is None or owner.operation_id != operation_id:
                _require_uuid(owner_id, "usage attemptId")
                _fail(INVALID_REFERENCE, f"usage attemptId {owner_id} is not an attempt of operation {operation_id}")
        else:
            owner_id = fact["toolStartedId"]
            started = self._tool_started.get(owner_id) if type(owner_id) is str else None
            if started is None or started.operationId != operation_id:
                _require_uuid(owner_id, "usage toolStartedId")
                _fail(INVALID_REFERENCE, f"usage toolStartedId {owner_id} is not a tool of operation {operation_id}")
        usage = fact.get("usage")
        if type(usage) is not dict:
            _fail(INVALID_FACT, "usage is not an object")
        if not usage.keys() <= USAGE_KEYS:
            _unknown_key(usage, USAGE_KEYS, "usage")
        totals = self._usage
        counters = (usage.get("input"), usage.get("output"), usage.get("cacheRead"), usage.get("cacheWrite"))
        for index, value in enumerate(counters):
            if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
                _fail(INVALID_FACT, f"usage.{_COUNTERS[index]} is not a safe non-negative integer: {_show(value)}")
            if totals[index] + value > MAX_SAFE_INTEGER:
                _fail(INVALID_FACT, f"usage.{_COUNTERS[index]} overflows the session total")
        self._add_usage(counters)  # type: ignore[arg-type]

    def _add_usage(self, counters: tuple[int, int, int, int]) -> None:
        totals = self._usage
        for index, value in enumerate(counters):
            totals[index] += value
        self.state.usage = Usage(totals[0], totals[1], totals[2], totals[3])

    # -- v3: raw and seal ---------------------------------------------------

    def _raw_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        _require_keys(fact, RAW_FACT_KEYS, "raw fact")
        if self._facts_in_line != 2 or self._fact_index != 0:
            _fail(INVALID_FACT, "a raw fact must be its own transaction (followed only by its seal)")
        operation = self._lookup_operation(fact.get("operationId"), "raw operationId")
        attempt_id = _require_uuid(fact.get("attemptId"), "raw attemptId")
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.operation_id != operation.state.operationId:
            _fail(INVALID_REFERENCE, f"raw attemptId {attempt_id} is not an attempt of this operation")
        if not attempt.open:
            _fail(INVALID_TRANSITION, f"raw fact for attempt {attempt_id}, which is no longer open")
        if attempt.raw_id is not None:
            _fail(INVALID_TRANSITION, f"attempt {attempt_id} already has its raw fact {attempt.raw_id}")
        _check_raw_response(fact.get("raw"))
        attempt.raw_id = fact_id
        operation.state.step.rawId = fact_id  # type: ignore[union-attr]

    def _seal_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= SEAL_FACT_KEYS:
            _unknown_key(fact, SEAL_FACT_KEYS, "seal fact")
        if self._fact_index != self._facts_in_line - 1:
            _fail(INVALID_FACT, "a seal must be the last fact of its transaction")
        chain = fact.get("chain")
        if chain != self.chain:
            if not _is_digest(chain):
                _fail(INVALID_FACT, "seal chain is not a sha256 digest")
            raise Fault(
                "SEAL_MISMATCH",
                f"seal chain does not match lines 1-{self.lines - 1}: a committed line was changed, "
                "removed, added or reordered after it was sealed",
            )

    # -- the fast path ---------------------------------------------------------
    #
    # Each ``_fast_*`` method answers "does every rule of the reference path
    # hold for this fact?" and, only if so, applies it through the same
    # ``_append_message`` / ``_settle_assistant`` / ... helpers the reference
    # path uses.  Returning False means "not vouched for", never "invalid":
    # the reference path then decides, so a check here may be stricter than
    # the contract (costing speed on unusual facts) but never looser.  The
    # order of the checks is free, because no error is reported from here.
    # Members the wire types make typed (ints, strings, closed objects) need
    # no type checks; IDs found in the fold's indexes are valid UUIDv7s
    # already (only an applied ID gets there), so equality with one replaces
    # the pattern match.

    def _fast_fact(self, fact: Any) -> bool:
        """The envelope (§5), then the kind's own rules."""
        seq = fact.seq
        fact_id = fact.id
        if seq != self._next_seq or _uuid_match(fact_id) is None or fact_id in self._fact_ids:
            return False
        kind = type(fact)
        if kind is EntryFactWire:
            applied = self._fast_entry(fact.entry, fact_id, fact.timestamp)
        elif fact_id in self._reserved:
            # The envelope's last rule (no fact takes an ID a record reserved) is
            # checked after the handler; only entries release reservations.
            return False
        elif kind is SealFactWire:
            applied = self._fast_seal(fact)
        elif kind is RecordFactWire:
            applied = self._fast_record(fact.record, fact_id)
        elif kind is UsageFactWire:
            applied = self._fast_usage(fact)
        else:
            applied = self._fast_raw(fact, fact_id)
        if applied:
            self._seq = seq
            self._commit_fact(fact_id, seq)
        return applied

    # entries (§8)

    def _fast_entry(self, entry: MessageEntry, fact_id: str, timestamp: int) -> bool:
        message = entry.message
        kind = type(message)
        if kind is UserWire:
            return self._fast_user_entry(entry, message, fact_id, timestamp)  # type: ignore[arg-type]
        if kind is AssistantWire:
            return self._fast_assistant_entry(entry, message, fact_id, timestamp)  # type: ignore[arg-type]
        return self._fast_tool_entry(entry, message, fact_id, timestamp)  # type: ignore[arg-type]

    def _fast_user_entry(self, entry: MessageEntry, wire: UserWire, fact_id: str, timestamp: int) -> bool:
        if (
            entry.stepId is not UNSET
            or entry.attemptId is not UNSET
            or entry.stopReason is not UNSET
            or entry.toolName is not UNSET
            or entry.toolStartedId is not UNSET
            or entry.result is not UNSET
            or fact_id in self._reserved
        ):
            return False
        content = decode_text(wire.content)
        if type(content) is not str or not content:
            return False
        message = UserMessage(content)
        record = AppliedEntry(
            fact_id, len(self._entry_order), message, len(self.state.transcript), None, None, None, None, timestamp
        )
        self._append_message(record, message)
        return True

    def _fast_assistant_entry(self, entry: MessageEntry, wire: AssistantWire, fact_id: str, timestamp: int) -> bool:
        if (
            entry.toolName is not UNSET
            or entry.toolStartedId is not UNSET
            or entry.result is not UNSET
            or entry.stopReason is UNSET
            or fact_id in self._reserved
        ):
            return False
        attempt = self._attempts.get(entry.attemptId)  # type: ignore[arg-type]
        current = self._current
        stop_reason = entry.stopReason
        if (
            attempt is None
            or attempt.step_id != entry.stepId
            or not attempt.open
            or attempt.step_kind != "assistant"
            or current is None
            or current.kind != "run"
            or current.state.operationId != attempt.operation_id
        ):
            return False
        calls = wire.tool_calls
        if calls is UNSET:
            if stop_reason == "toolUse":
                return False
        elif stop_reason == "stop" or not _plain_tool_calls(calls):
            return False
        content = decode_text(wire.content, nullable=True)
        if content is NOT_TEXT:
            return False
        message = AssistantMessage(content) if calls is UNSET else AssistantMessage(content, calls)  # type: ignore[arg-type]
        record = self._settle_assistant(current, attempt, fact_id, message, stop_reason, timestamp)  # type: ignore[arg-type]
        self._append_message(record, message)
        return True

    def _fast_tool_entry(self, entry: MessageEntry, wire: ToolWire, fact_id: str, timestamp: int) -> bool:
        """A started call's success or error (pre-execution and synthetic results take the reference path)."""
        if (
            entry.attemptId is not UNSET
            or entry.stopReason is not UNSET
            or entry.result is UNSET
            or self._reserved.get(fact_id) != TOOL_RESULT
        ):
            return False
        started = self._tool_started.get(entry.toolStartedId)  # type: ignore[arg-type]
        if started is None or _started_mismatch(started, entry.stepId, fact_id, wire.tool_call_id, entry.toolName) is not None:  # type: ignore[arg-type]
            return False
        content = decode_text(wire.content)
        if content is NOT_TEXT:
            return False
        message = ToolMessage(content, started.toolCallId)  # type: ignore[arg-type]
        self._complete_tool(started, fact_id)
        record = AppliedEntry(
            fact_id,
            len(self._entry_order),
            message,
            len(self.state.transcript),
            started.operationId,
            started.stepId,
            None,
            None,
            timestamp,
        )
        self._append_message(record, message)
        return True

    # records (§9)

    def _fast_record(self, record: Any, fact_id: str) -> bool:
        kind = type(record)
        if kind is ToolStartedWire:
            return self._fast_tool_started(record, fact_id)
        if kind is StepAttemptWire:
            return self._fast_step_attempt(record, fact_id)
        if kind is RunStartedWire:
            return self._fast_run_started(record, fact_id)
        return self._fast_run_finished(record)

    def _reservable(self, value: str, fact_id: str) -> bool:
        """The rules of :meth:`_reserve`, and the envelope's: the reserved ID is not the fact's own."""
        return (
            value != fact_id
            and _uuid_match(value) is not None
            and value not in self._fact_ids
            and value not in self._reserved
        )

    def _fast_run_started(self, record: RunStartedWire, fact_id: str) -> bool:
        operation_id = record.operationId
        if self._current is not None or not self._reservable(operation_id, fact_id):
            return False
        entry = self.state.entries.get(record.inputEntryId)
        if entry is None or type(entry.message) is not UserMessage:
            return False
        self._reserved[operation_id] = IDENTITY
        self._begin_run(operation_id, entry.id)
        return True

    def _fast_step_attempt(self, record: StepAttemptWire, fact_id: str) -> bool:
        operation = self._current
        step_id = record.stepId
        attempt_id = record.attemptId
        context_id = record.contextThroughEntryId
        # The context boundary is always an applied entry, so a context equal
        # to it names one (the reference path checks that first).
        if (
            operation is None
            or operation.kind != "run"
            or operation.state.operationId != record.operationId
            or context_id != self.state.contextBoundary
            or step_id == attempt_id
            or not self._reservable(step_id, fact_id)
            or not self._reservable(attempt_id, fact_id)
        ):
            return False
        # A snapshot equal to one already validated under the claimed digest is
        # valid and has that digest; an unseen one takes the reference path once.
        configuration = self._configurations.get(record.configurationDigest)
        if configuration is None or configuration.snapshot != record.configurationSnapshot:
            return False
        step = operation.state.step
        if step is not UNSET and (step.status != "settled" or step.stopReason != "toolUse" or operation.pending):
            return False
        self._reserved[step_id] = IDENTITY
        self._reserved[attempt_id] = IDENTITY
        self._open_attempt(operation, attempt_id, step_id, "assistant", 1, context_id, configuration)
        return True

    def _fast_tool_started(self, record: ToolStartedWire, fact_id: str) -> bool:
        operation = self._current
        if operation is None or operation.kind != "run" or operation.state.operationId != record.operationId:
            return False
        target = self.state.entries.get(record.assistantEntryId)
        if (
            target is None
            or target.operationId != record.operationId
            or target.stopReason != "toolUse"
            or target.stepId != record.stepId
        ):
            return False
        calls = target.message.tool_calls  # type: ignore[union-attr]
        tool_index = record.toolIndex
        if tool_index >= len(calls):
            return False
        call = calls[tool_index]
        tool_name = record.toolName
        pair = (target.id, tool_index)
        if (
            call.id != record.toolCallId
            or call.function.name != tool_name
            or pair in self._used_pairs
            or tool_name not in self._attempts[target.attemptId].tool_names  # type: ignore[index]
            or not self._reservable(record.resultEntryId, fact_id)
        ):
            return False
        self._reserved[record.resultEntryId] = TOOL_RESULT
        started = ToolCallState(
            operation.state.operationId,
            fact_id,
            target.stepId,  # type: ignore[arg-type]
            target.id,
            tool_index,
            call.id,
            call.function.name,
            record.arguments,
            record.replay,
            record.replayKey,
            record.environmentIdentity,
            record.resultEntryId,
            "pending",
        )
        self._start_tool(operation, started, pair)
        return True

    def _fast_run_finished(self, record: OperationFinishedWire) -> bool:
        operation = self._current
        if (
            operation is None
            or operation.kind != "run"
            or operation.state.operationId != record.operationId
            or operation.pending
        ):
            return False
        completion = record.completion
        wanted = "stop" if completion == "normal" else "length"
        final_id = record.finalEntryId
        final = self.state.entries.get(final_id)
        if final is None or final.message is None or final.operationId != record.operationId or final.stopReason != wanted:
            return False
        attempt = self._attempts.get(final.attemptId)  # type: ignore[arg-type]
        if (
            attempt is None
            or attempt.open
            or attempt.failed
            or attempt.step_id != operation.latest_step_id
            or attempt.settled_entry_id != final_id
        ):
            return False
        message: AssistantMessage = final.message  # type: ignore[assignment]
        if completion == "normal":
            if message.content is None or not message.content.strip(_JS_WHITESPACE):
                return False
        elif message.tool_calls is UNSET:
            return False
        self._finish_operation()
        return True

    # usage (§10), raw responses and seals (v3)

    def _fast_usage(self, fact: UsageFactWire) -> bool:
        operation_id = fact.operationId
        if operation_id not in self._operations:
            return False
        if fact.attemptId is not UNSET:
            attempt = self._attempts.get(fact.attemptId)
            if fact.toolStartedId is not UNSET or attempt is None or attempt.operation_id != operation_id:
                return False
        else:
            started = self._tool_started.get(fact.toolStartedId)  # type: ignore[arg-type]
            if started is None or started.operationId != operation_id:
                return False
        usage = fact.usage
        counters = (usage.input, usage.output, usage.cacheRead, usage.cacheWrite)
        totals = self._usage
        for index, value in enumerate(counters):
            if totals[index] + value > MAX_SAFE_INTEGER:
                return False
        self._add_usage(counters)
        return True

    def _fast_raw(self, fact: RawFactWire, fact_id: str) -> bool:
        operation = self._current
        attempt = self._attempts.get(fact.attemptId)
        if (
            self.version != 3
            or self._facts_in_line != 2
            or self._fact_index != 0
            or operation is None
            or operation.state.operationId != fact.operationId
            or attempt is None
            or attempt.operation_id != fact.operationId
            or not attempt.open
            or attempt.raw_id is not None
        ):
            return False
        attempt.raw_id = fact_id
        operation.state.step.rawId = fact_id  # type: ignore[union-attr]
        return True

    def _fast_seal(self, fact: SealFactWire) -> bool:
        return self.version == 3 and self._fact_index == self._facts_in_line - 1 and fact.chain == self.chain


def _new_configuration(snapshot: dict[str, Any]) -> _Configuration:
    _require_keys(snapshot, SNAPSHOT_KEYS, "configurationSnapshot")
    for name in ("model", "adapterIdentity", "routingIdentity"):
        _require_text(snapshot.get(name), f"configurationSnapshot.{name}")
    for name in ("systemPromptDigest", "outputOptionsDigest"):
        if not _is_digest(snapshot.get(name)):
            _fail(INVALID_FACT, f"configurationSnapshot.{name} is not a sha256 digest")
    tools = snapshot.get("tools")
    if type(tools) is not list:
        _fail(INVALID_FACT, "configurationSnapshot.tools is not an array")
    declared: list[ToolDigest] = []
    for index, tool in enumerate(tools):
        what = f"configurationSnapshot.tools[{index}]"
        _require_keys(_require_object(tool, what), TOOL_DIGEST_KEYS, what)
        name = _require_text(tool.get("name"), f"{what}.name")
        if not _is_digest(tool.get("definitionDigest")):
            _fail(INVALID_FACT, f"{what}.definitionDigest is not a sha256 digest")
        declared.append(ToolDigest(name=name, definitionDigest=tool["definitionDigest"]))
    names = frozenset(tool.name for tool in declared)
    if len(names) != len(declared):
        _fail(INVALID_FACT, "configurationSnapshot.tools repeats a tool name")
    normalized = ConfigurationSnapshot(
        model=snapshot["model"],
        systemPromptDigest=snapshot["systemPromptDigest"],
        tools=declared,
        adapterIdentity=snapshot["adapterIdentity"],
        routingIdentity=snapshot["routingIdentity"],
        outputOptionsDigest=snapshot["outputOptionsDigest"],
    )
    return _Configuration(
        source=snapshot, snapshot=normalized, digest=sha256_digest(canonical_json(normalized)), tool_names=names
    )


_COUNTERS: Final = ("input", "output", "cacheRead", "cacheWrite")


def _require_error(value: object, what: str) -> None:
    error = _require_object(value, what)
    _require_keys(error, ERROR_KEYS, what)
    if not _is_text(error.get("code")) or not _is_text(error.get("message")):
        _fail(INVALID_FACT, f"{what} needs non-empty string code and message")


def _check_raw_response(value: object) -> None:
    raw = _require_object(value, "raw")
    _require_keys(raw, RAW_KEYS, "raw")
    if not _is_safe_int(raw.get("status")):
        _fail(INVALID_FACT, "raw.status is not a safe non-negative integer")
    if "contentType" not in raw or (raw["contentType"] is not None and type(raw["contentType"]) is not str):
        _fail(INVALID_FACT, "raw.contentType is not a string or null")
    has_text = "body" in raw
    if has_text == ("bodyBase64" in raw):
        _fail(INVALID_FACT, "raw needs exactly one of body and bodyBase64")
    body = raw["body"] if has_text else raw["bodyBase64"]
    if type(body) is not str:
        _fail(INVALID_FACT, "raw body is not a string")
    if not has_text:
        try:
            base64.b64decode(body, validate=True)
        except binascii.Error:
            _fail(INVALID_FACT, "raw.bodyBase64 is not valid base64")


def _started_mismatch(started: ToolCallState, step_id: str, fact_id: str, call_id: str, tool_name: str) -> str | None:
    if started.stepId != step_id:
        return "stepId differs"
    if started.resultEntryId != fact_id:
        return "it reserved another result id"
    if started.toolCallId != call_id:
        return "tool_call_id differs"
    if started.toolName != tool_name:
        return "toolName differs"
    if started.status != "pending":
        return "the call is already answered"
    return None


def _plain_tool_calls(calls: list[ToolCall]) -> bool:
    """§7's tool-call rules that the wire types leave to the fold: non-empty ids and names, ids unique."""
    if not calls:
        return False
    for call in calls:
        if not call.id or not call.function.name:
            return False
    return len(calls) == 1 or len({call.id for call in calls}) == len(calls)


def _first_pending(run: RunOperation) -> ToolCallState | None:
    for call in run.toolCalls:
        if call.status == "pending":
            return call
    return None


# --------------------------------------------------------------------------
# Whole journals
# --------------------------------------------------------------------------


def reduce_bytes(data: bytes) -> SessionState:
    """Reduce a whole journal held in memory (session-v2 §2)."""
    return reduce_chunks((data,))


def reduce_chunks(chunks: Iterable[bytes], fold: Fold | None = None) -> SessionState:
    """Reduce a journal given as consecutive byte chunks (a file read in pieces).

    Only complete lines are folded; bytes after the last LF are the torn tail
    and are never decoded.  The whole-file checks that outrank every per-line
    error (an encoded surrogate anywhere, invalid UTF-8 anywhere) run only
    once a line has failed: a line that msgspec decodes has proven its own
    bytes to be well-formed UTF-8 without surrogates, so a journal whose every
    line decodes needs no separate pass.

    Pass ``fold`` to keep folding after the last line (a writer does).
    """
    splitter = _LineSplitter(Fold() if fold is None else fold)
    for chunk in chunks:
        splitter.feed(chunk)
    return splitter.finish()


class _LineSplitter:
    """Cuts chunks into committed lines for a fold; after a failure, scans what is left."""

    def __init__(self, fold: Fold) -> None:
        self._fold = fold
        self._parts: list[bytes] = []
        self._lines = 0
        self._failure: CorruptionError | None = None
        self._audit: _WholeFileAudit | None = None

    def feed(self, chunk: bytes) -> None:
        if self._audit is not None:
            self._audit.feed(chunk)
            return
        first_lf = chunk.find(b"\n")
        if first_lf == -1:
            self._parts.append(chunk)
            return
        start = 0
        if self._parts:
            self._parts.append(chunk[: first_lf + 1])
            head = b"".join(self._parts)
            self._parts = []
            if not self._fold_lines(head, 0):
                self._audit.feed(chunk[first_lf + 1 :])  # type: ignore[union-attr]
                return
            start = first_lf + 1
        if self._fold_lines(chunk, start) and start < len(chunk):
            tail_start = chunk.rfind(b"\n") + 1
            if tail_start < len(chunk):
                self._parts.append(chunk[tail_start:])

    def _fold_lines(self, data: bytes, start: int) -> bool:
        """Fold every complete line of ``data`` from ``start``; False once one fails."""
        fold = self._fold
        find = data.find
        end = find(b"\n", start)
        while end != -1:
            line = data[start:end]
            self._lines += 1
            try:
                if self._lines == 1:
                    if not line:
                        raise CorruptionError("MISSING_HEADER", 1, None, "line 1 is empty")
                    fold.apply_header(line)
                else:
                    fold.apply_line(line)
            except CorruptionError as error:
                self._failure = error
                self._audit = _WholeFileAudit(first_line=self._lines)
                self._audit.feed(data[start:])
                return False
            start = end + 1
            end = find(b"\n", start)
        return True

    def finish(self) -> SessionState:
        if self._failure is not None:
            raise self._audit.verdict() or self._failure  # type: ignore[union-attr]
        if self._lines == 0:
            raise CorruptionError("MISSING_HEADER", 1, None, "no complete header line (the file has no LF)")
        return self._fold.state


class _WholeFileAudit:
    """After a line failed: the checks that outrank it (session-v2 §2 steps 2-3).

    Every line before ``first_line`` decoded cleanly, so only the bytes from
    that line to the last LF need looking at.
    """

    def __init__(self, first_line: int) -> None:
        self._line = first_line
        self._carry = b""
        self._surrogate_line: int | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._utf8_ok = True

    def feed(self, chunk: bytes) -> None:
        data = self._carry + chunk if self._carry else chunk
        last_lf = data.rfind(b"\n")
        if last_lf == -1:
            self._carry = data
            return
        committed = data[: last_lf + 1]
        self._carry = data[last_lf + 1 :]
        if self._surrogate_line is None:
            offset = find_encoded_surrogate(committed, 0, len(committed))
            if offset != -1:
                self._surrogate_line = self._line + committed.count(b"\n", 0, offset)
        if self._utf8_ok:
            try:
                self._utf8.decode(committed)
            except UnicodeDecodeError:
                self._utf8_ok = False
        self._line += committed.count(b"\n")

    def verdict(self) -> CorruptionError | None:
        if self._surrogate_line is not None:
            return CorruptionError(
                "MALFORMED_JSON", self._surrogate_line, None, "an encoded UTF-16 surrogate (bytes ED A0..BF) in the line"
            )
        if not self._utf8_ok:
            return CorruptionError("INVALID_UTF8", 1, None, "the journal is not well-formed UTF-8")
        return None
