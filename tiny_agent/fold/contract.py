"""The journal contract as data: member sets, enumerations, and one-rule checks.

Pure.  Every member set and enumeration is derived from the Struct or ``Literal`` that writes it,
so the writer and the reader cannot drift apart (tests/test_schema.py pins them to the spec's lists).
The checks raise :class:`Fault` with the contract's code and a one-line reason; the fold adds the line and seq.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final, NoReturn, TypeGuard, TypeVar, get_args

import msgspec

from tiny_agent.errors import ErrorCode
from tiny_agent.journal import facts
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.links import Origin, Parent
from tiny_agent.journal.state import (
    ConfigurationSnapshot,
    GitState,
    InstructionDigest,
    ReplayPolicy,
    SentOptions,
    StepKind,
    ToolDigest,
)
from tiny_agent.journal.transcript import (
    AssistantMessage,
    FunctionCall,
    PreExecutionReason,
    StopReason,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)


def member_names(struct: type[msgspec.Struct]) -> frozenset[str]:
    """The JSON member names a Struct encodes: its fields' encoded names, and its tag member if it has one."""
    names = {field.encode_name for field in msgspec.structs.fields(struct)}
    tag_field = struct.__struct_config__.tag_field
    if tag_field is not None:
        names.add(tag_field)
    return frozenset(names)


# -- closed objects (session-v2 §4, §7-§10, §13.1; v3) ------------------------------

V3_HEADER_KEYS: Final = member_names(facts.HeaderLine)
HEADER_KEYS: Final = V3_HEADER_KEYS - {"origin", "parent"}
"""The v2 header's members, exactly (session-v2 §4); v3 adds our optional ``origin`` and ``parent``, saying where a
session came from (:mod:`tiny_agent.journal.links`)."""
ORIGIN_KEYS: Final = member_names(Origin)
PARENT_KEYS: Final = member_names(Parent)

ENTRY_FACT_KEYS: Final = member_names(facts.EntryFact)
RECORD_FACT_KEYS: Final = member_names(facts.RecordFact)
USAGE_FACT_KEYS: Final = member_names(facts.UsageFact)
RAW_FACT_KEYS: Final = member_names(facts.RawFact)
SEAL_FACT_KEYS: Final = member_names(facts.SealFact)
MCP_FACT_KEYS: Final = member_names(facts.McpFact)
MCP_MESSAGE_KEYS: Final = member_names(facts.McpMessage)

USER_MESSAGE_KEYS: Final = member_names(UserMessage)
ASSISTANT_MESSAGE_KEYS: Final = member_names(AssistantMessage)
TOOL_MESSAGE_KEYS: Final = member_names(ToolMessage)
TOOL_CALL_KEYS: Final = member_names(ToolCall)
FUNCTION_KEYS: Final = member_names(FunctionCall)

USER_ENTRY_KEYS: Final = member_names(facts.UserEntry)
ASSISTANT_ENTRY_KEYS: Final = member_names(facts.AssistantEntry)
STARTED_RESULT_KEYS: Final = member_names(facts.StartedToolResultEntry)
PRE_EXECUTION_RESULT_KEYS: Final = member_names(facts.PreExecutionResultEntry)
RESULT_KEYS: Final = member_names(facts.ToolResult)
COMPACTION_ENTRY_KEYS: Final = member_names(facts.CompactionEntry)
RETAINED_KEYS: Final = member_names(facts.RetainedMessage)

RUN_STARTED_KEYS: Final = member_names(facts.RunStarted)
V3_COMPACTION_STARTED_KEYS: Final = member_names(facts.CompactionStarted)
COMPACTION_STARTED_KEYS: Final = V3_COMPACTION_STARTED_KEYS - {"piece"}
"""The v2 record's members, exactly (session-v2 §9.2); v3 adds the optional ``piece``."""
STEP_ATTEMPT_KEYS: Final = member_names(facts.StepAttempt)
STEP_FAILED_KEYS: Final = member_names(facts.StepFailed)
TOOL_STARTED_KEYS: Final = member_names(facts.ToolStarted)
ABORT_REQUESTED_KEYS: Final = member_names(facts.AbortRequested)
OPERATION_FINISHED_KEYS: Final = member_names(facts.OperationFinished)

ERROR_KEYS: Final = member_names(facts.ErrorInfo)
USAGE_KEYS: Final = member_names(Usage)
V2_USAGE_KEYS: Final = USAGE_KEYS - {"reasoning"}
"""The v2 usage object's members, exactly (§10); v3 adds the optional ``reasoning``."""
V3_SNAPSHOT_KEYS: Final = member_names(ConfigurationSnapshot)
SNAPSHOT_KEYS: Final = V3_SNAPSHOT_KEYS - {"instructions", "requestOptions", "git"}
"""The v2 snapshot's members, exactly (session-v2 §13.1); v3 adds the optional ``instructions``, ``requestOptions``, ``git``."""
TOOL_DIGEST_KEYS: Final = member_names(ToolDigest)
INSTRUCTION_KEYS: Final = member_names(InstructionDigest)
REQUEST_OPTIONS_KEYS: Final = member_names(SentOptions)
GIT_KEYS: Final = member_names(GitState)
RAW_KEYS: Final = member_names(facts.RawResponse)

USAGE_COUNTERS: Final[tuple[str, ...]] = tuple(field.encode_name for field in msgspec.structs.fields(Usage))
"""The counters in the order the contract checks them (§10, then v3's optional ``reasoning``): :class:`Usage`'s."""

# -- enumerations, from their Literal types --------------------------------------

STOP_REASON_WORDS: Final[tuple[StopReason, ...]] = get_args(StopReason)
STOP_REASONS: Final = frozenset(STOP_REASON_WORDS)
PRE_EXECUTION_REASON_WORDS: Final[tuple[PreExecutionReason, ...]] = get_args(PreExecutionReason)
RESULT_TYPE_WORDS: Final[tuple[str, ...]] = get_args(facts.ToolResultType)
STEP_KIND_WORDS: Final[tuple[StepKind, ...]] = get_args(StepKind)
REPLAY_WORDS: Final[tuple[ReplayPolicy, ...]] = get_args(ReplayPolicy)
OUTCOME_WORDS: Final[tuple[facts.Outcome, ...]] = get_args(facts.Outcome)
ABORT_PHASE_WORDS: Final[tuple[facts.AbortPhase, ...]] = get_args(facts.AbortPhase)

W = TypeVar("W", bound=str)


def is_word(value: object, words: tuple[W, ...]) -> TypeGuard[W]:
    """``value`` is one of ``words`` (a str test first: a list or dict value must not reach a hash)."""
    return type(value) is str and value in words


def one_of(words: tuple[str, ...]) -> str:
    """``a, b or c``: an enumeration in an error reason."""
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


# -- codes and reservation flavours ---------------------------------------------

INVALID_FACT: Final = "INVALID_FACT"
INVALID_REFERENCE: Final = "INVALID_REFERENCE"
INVALID_TRANSITION: Final = "INVALID_TRANSITION"
INVALID_TRANSCRIPT: Final = "INVALID_TRANSCRIPT"
DUPLICATE_ID: Final = "DUPLICATE_ID"

# What introduced a reserved ID, and so which fact may later carry it (§6).
IDENTITY: Final = "identity"
TOOL_RESULT: Final = "tool-result"
COMPACTION_RESULT: Final = "compaction-result"


class Fault(Exception):
    """A broken rule, before the fold knows the line (and whether a seq applies)."""

    def __init__(self, code: ErrorCode, reason: str, *, with_seq: bool = True) -> None:
        super().__init__(code, reason)
        self.code: ErrorCode = code
        self.reason = reason
        self.with_seq = with_seq


def fail(code: ErrorCode, reason: str) -> NoReturn:
    raise Fault(code, reason)


# -- value rules (§3) --------------------------------------------------------------

uuid_match: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}").fullmatch
"""A UUIDv7 in lowercase hex.  Hot paths call it inline: a Python call per field is a large share of a fact's cost."""
digest_match: Final = re.compile(r"sha256:[0-9a-f]{64}").fullmatch

# JavaScript's String.prototype.trim set; the contract leaves "whitespace" to
# the implementation (session-v2 §18 D6) and we follow the TypeScript reference.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def is_blank(text: str) -> bool:
    """Empty or whitespace only, by the same rule as a ``normal`` completion's final answer."""
    return not text.strip(JS_WHITESPACE)


def is_uuid(value: object) -> TypeGuard[str]:
    return type(value) is str and uuid_match(value) is not None


def is_digest(value: object) -> TypeGuard[str]:
    return type(value) is str and digest_match(value) is not None


def is_safe_int(value: object, minimum: int = 0) -> TypeGuard[int]:
    # bool is an int subclass; ``type(...) is int`` keeps true/false out.
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def is_text(value: object) -> TypeGuard[str]:
    """A non-empty string (session-v2 §3)."""
    return type(value) is str and value != ""


def show(value: object) -> str:
    """A short rendering of a bad value for an error reason."""
    if type(value) is msgspec.Raw:
        # Only an integer literal too long for Python to convert is kept as Raw (json_profile).
        return f"an integer literal of {len(value)} characters"
    encodable = value is None or type(value) in (str, int, float, bool, list, dict)
    text = msgspec.json.encode(value).decode() if encodable else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the checks: each raises the rule's own code ------------------------------------


def require_keys(value: dict[str, Any], allowed: frozenset[str], what: str, code: ErrorCode = INVALID_FACT) -> None:
    if not value.keys() <= allowed:
        unknown = next(key for key in value if key not in allowed)
        fail(code, f'{what} has unknown key "{unknown}"')


def require_uuid(value: object, what: str) -> str:
    if type(value) is not str or uuid_match(value) is None:
        fail(INVALID_FACT, f"{what} is not a UUIDv7: {show(value)}")
    return value


def require_text(value: object, what: str) -> str:
    if type(value) is not str or not value:
        fail(INVALID_FACT, f"{what} is not a non-empty string: {show(value)}")
    return value


def require_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(INVALID_FACT, f"{what} is not an object")
    return value


def require_error(value: object, what: str) -> None:
    """A closed ``{code, message}`` object of non-empty strings (stepFailed, a failed operation)."""
    error = require_object(value, what)
    require_keys(error, ERROR_KEYS, what)
    if not is_text(error.get("code")) or not is_text(error.get("message")):
        fail(INVALID_FACT, f"{what} needs non-empty string code and message")


def check_body(raw: dict[str, Any], what: str) -> None:
    """Exactly one of ``body`` and ``bodyBase64``; the optional ``redactions`` and ``incomplete`` (a raw fact, an mcp message)."""
    has_text = "body" in raw
    if has_text == ("bodyBase64" in raw):
        fail(INVALID_FACT, f"{what} needs exactly one of body and bodyBase64")
    body = raw["body"] if has_text else raw["bodyBase64"]
    if type(body) is not str:
        fail(INVALID_FACT, f"{what} body is not a string")
    if not has_text:
        try:
            base64.b64decode(body, validate=True)
        except binascii.Error:
            fail(INVALID_FACT, f"{what}.bodyBase64 is not valid base64")
    if "contentEncoding" in raw and not is_text(raw["contentEncoding"]):  # raw only: mcp messages have no such member
        fail(INVALID_FACT, f"{what}.contentEncoding is not a non-empty string: {show(raw['contentEncoding'])}")
    if "redactions" in raw and not is_safe_int(raw["redactions"], 1):
        fail(INVALID_FACT, f"{what}.redactions is not a safe integer >= 1: {show(raw['redactions'])}")
    if "incomplete" in raw and not is_text(raw["incomplete"]):
        fail(INVALID_FACT, f"{what}.incomplete is not a non-empty string: {show(raw['incomplete'])}")
