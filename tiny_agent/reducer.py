"""The fold's stable facade: what the rest of tiny-agent imports to reduce a journal.

The fold itself lives in :mod:`tiny_agent.fold`, one module per concept
(framing and the envelope, messages, tools, steps, operations, compaction,
usage, raw and seal facts, line streaming); this module re-exports the names
other modules and the tests use, so they need not know that layout.
"""

from __future__ import annotations

from tiny_agent.fold.contract import (
    ABORT_REQUESTED_KEYS,
    ASSISTANT_ENTRY_KEYS,
    ASSISTANT_MESSAGE_KEYS,
    COMPACTION_ENTRY_KEYS,
    COMPACTION_STARTED_KEYS,
    ENTRY_FACT_KEYS,
    ERROR_KEYS,
    FUNCTION_KEYS,
    HEADER_KEYS,
    OPERATION_FINISHED_KEYS,
    ORIGIN_KEYS,
    PARENT_KEYS,
    PRE_EXECUTION_RESULT_KEYS,
    RAW_FACT_KEYS,
    RAW_KEYS,
    RECORD_FACT_KEYS,
    RESULT_KEYS,
    RETAINED_KEYS,
    RUN_STARTED_KEYS,
    SEAL_FACT_KEYS,
    SNAPSHOT_KEYS,
    STARTED_RESULT_KEYS,
    STEP_ATTEMPT_KEYS,
    STEP_FAILED_KEYS,
    TOOL_CALL_KEYS,
    TOOL_DIGEST_KEYS,
    TOOL_MESSAGE_KEYS,
    TOOL_STARTED_KEYS,
    USAGE_FACT_KEYS,
    USAGE_KEYS,
    USER_ENTRY_KEYS,
    USER_MESSAGE_KEYS,
    V3_HEADER_KEYS,
    Fault,
    is_blank,
)
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import LineSplitter, reduce_bytes, reduce_chunks
from tiny_agent.fold.transcript_rules import parse_message, transcript_violation
from tiny_agent.fold.version import SUPPORTED_VERSIONS
from tiny_agent.json_profile import MAX_SAFE_INTEGER

__all__ = [
    "ABORT_REQUESTED_KEYS",
    "ASSISTANT_ENTRY_KEYS",
    "ASSISTANT_MESSAGE_KEYS",
    "COMPACTION_ENTRY_KEYS",
    "COMPACTION_STARTED_KEYS",
    "ENTRY_FACT_KEYS",
    "ERROR_KEYS",
    "FUNCTION_KEYS",
    "HEADER_KEYS",
    "LineSplitter",
    "MAX_SAFE_INTEGER",
    "OPERATION_FINISHED_KEYS",
    "ORIGIN_KEYS",
    "PARENT_KEYS",
    "PRE_EXECUTION_RESULT_KEYS",
    "RAW_FACT_KEYS",
    "RAW_KEYS",
    "RECORD_FACT_KEYS",
    "RESULT_KEYS",
    "RETAINED_KEYS",
    "RUN_STARTED_KEYS",
    "SEAL_FACT_KEYS",
    "SNAPSHOT_KEYS",
    "STARTED_RESULT_KEYS",
    "STEP_ATTEMPT_KEYS",
    "STEP_FAILED_KEYS",
    "SUPPORTED_VERSIONS",
    "TOOL_CALL_KEYS",
    "TOOL_DIGEST_KEYS",
    "TOOL_MESSAGE_KEYS",
    "TOOL_STARTED_KEYS",
    "USAGE_FACT_KEYS",
    "USAGE_KEYS",
    "USER_ENTRY_KEYS",
    "USER_MESSAGE_KEYS",
    "V3_HEADER_KEYS",
    "Fault",
    "Fold",
    "is_blank",
    "parse_message",
    "reduce_bytes",
    "reduce_chunks",
    "transcript_violation",
]
