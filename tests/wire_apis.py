"""Test plumbing shared by the Anthropic and Responses seam tests: fixture cases and the outcome checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from conftest import PROJECT_ROOT

from tiny_agent.fold.transcript_rules import parse_message
from tiny_agent.journal.transcript import AssistantMessage
from tiny_agent.wire.registry import API
from tiny_agent.wire.seam import Accepted, NormalizedStream, Outcome, Rejected

WIRE = PROJECT_ROOT / "fixtures" / "wire"

BODY_SUFFIX = ".json"
STREAM_SUFFIX = ".sse"
EXPECTED_SUFFIX = ".expected.json"


def cases(directory: Path) -> list[str]:
    """Every fixture with an expected outcome: ``name.json`` (a whole body) or ``name.sse`` (a stream)."""
    return sorted(path.name[: -len(EXPECTED_SUFFIX)] for path in directory.glob(f"*{EXPECTED_SUFFIX}"))


def inputs(directory: Path) -> set[str]:
    bodies = {
        path.name[: -len(BODY_SUFFIX)] for path in directory.glob(f"*{BODY_SUFFIX}") if not path.name.endswith(EXPECTED_SUFFIX)
    }
    streams = {path.name[: -len(STREAM_SUFFIX)] for path in directory.glob(f"*{STREAM_SUFFIX}")}
    assert not bodies & streams, f"a fixture is both a body and a stream: {sorted(bodies & streams)}"
    return bodies | streams


def outcome_record(outcome: Outcome) -> dict[str, Any]:
    """The outcome as ``tiny-agent normalize`` prints it (exit code and stdout), plus the usage derivation line."""
    if isinstance(outcome, Accepted):
        stdout: dict[str, Any] = {
            "message": outcome.message,
            "stopReason": outcome.stop_reason,
            "usage": outcome.usage,
            "dropped": outcome.dropped,
        }
        if outcome.hosted:
            stdout["hosted"] = outcome.hosted
        code = 0
    else:
        stdout = {"rejected": outcome.reason, "usage": outcome.usage}
        code = 65
    record = {"exit": code, "stdout": stdout, "derivation": outcome.derivation.explain()}
    return json.loads(msgspec.json.encode(record))


def fixture_record(
    directory: Path, name: str, whole: Callable[[bytes], Outcome], stream: Callable[[bytes], NormalizedStream]
) -> dict[str, Any]:
    """What the seam makes of one fixture; a stream also reports its reassembly."""
    body_path = directory / f"{name}{BODY_SUFFIX}"
    if body_path.exists():
        return outcome_record(whole(body_path.read_bytes()))
    return stream_record(stream((directory / f"{name}{STREAM_SUFFIX}").read_bytes()))


def fixture_files(directory: Path) -> list[Path]:
    """The bodies and streams of a fixture directory (not their expectations), in name order."""
    return sorted(path for path in directory.iterdir() if path.suffix in (BODY_SUFFIX, STREAM_SUFFIX) and EXPECTED_SUFFIX not in path.name)


def file_record(path: Path) -> dict[str, Any]:
    """One file of a directory that mixes APIs and holds a body and a stream of one name (refusals/, hosted-tools/):
    the name's first word is the API (``chat-openai-refusal.sse``); its expectation is ``<file name>.expected.json``."""
    api = API[path.name.split("-")[0]]
    if path.suffix == BODY_SUFFIX:
        return outcome_record(api.normalize_body(path.read_bytes()))
    return stream_record(api.normalize_stream(path.read_bytes()))


def stream_record(streamed: NormalizedStream) -> dict[str, Any]:
    record = outcome_record(streamed.outcome)
    reassembly = streamed.reassembly
    record["stream"] = {
        "events": reassembly.event_count,
        "bytes": reassembly.byte_size,
        "notCarried": reassembly.not_carried,
    }
    return record


def check_outcome(outcome: object) -> None:
    """Accepted messages pass the journal's own message check; rejections are one line."""
    assert isinstance(outcome, (Accepted, Rejected))
    if isinstance(outcome, Accepted):
        as_journal = msgspec.to_builtins(outcome.message)
        assert parse_message(as_journal) == outcome.message
        assert msgspec.json.decode(msgspec.json.encode(outcome.message), type=AssistantMessage) == outcome.message
        assert outcome.stop_reason in ("stop", "toolUse", "length", "refusal")
    else:
        assert outcome.reason
        assert "\n" not in outcome.reason and "\r" not in outcome.reason
    assert outcome.usage is None or min(value or 0 for value in msgspec.structs.astuple(outcome.usage)) >= 0
    assert outcome.derivation.usage == outcome.usage
    assert "\n" not in outcome.derivation.explain()
