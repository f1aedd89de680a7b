"""The reduced state's output: ``to_json_bytes`` against ``to_json``, and one object per message.

``to_json_bytes`` encodes the conformance shape straight from the state; it
must give exactly the bytes of encoding ``to_json()``.  The transcript, the
active context and the entry index must share message objects rather than
hold copies (a replay's memory is mostly messages).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from builders import write_tool_session
from conftest import PROJECT_ROOT, conformance_dir
from spec_example import example_bytes

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import Fold, reduce_bytes, reduce_chunks
from tiny_agent.journal.state import SessionState
from tiny_agent.journal.transcript import COMPACTED_HISTORY_PREFIX, UserMessage

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"


def _fixture_journals() -> dict[str, bytes]:
    manifest = conformance_dir() / "fixtures" / "manifest.json"
    return {
        case["name"]: (manifest.parent / case["file"]).read_bytes()
        for case in json.loads(manifest.read_text())["fixtures"]
    }


def _example_journals() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(EXAMPLES.glob("*.jsonl"))}


def _reduced(data: bytes, *, fast_path: bool = True) -> SessionState | None:
    try:
        return reduce_chunks((data,), Fold(fast_path=fast_path))
    except CorruptionError:
        return None


FIXTURES = _fixture_journals()
EXAMPLE_JOURNALS = _example_journals()


def test_there_is_something_to_compare():
    assert sum(_reduced(data) is not None for data in FIXTURES.values()) >= 10
    assert sum(_reduced(data) is not None for data in EXAMPLE_JOURNALS.values()) >= 3


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_to_json_bytes_is_the_encoded_conformance_shape_on_every_fixture(name, fast_path):
    state = _reduced(FIXTURES[name], fast_path=fast_path)
    if state is None:
        return
    assert state.to_json_bytes() == msgspec.json.encode(state.to_json())


@pytest.mark.parametrize("name", sorted(EXAMPLE_JOURNALS))
def test_to_json_bytes_is_the_encoded_conformance_shape_on_every_example(name):
    state = _reduced(EXAMPLE_JOURNALS[name])
    if state is None:
        return
    assert state.to_json_bytes() == msgspec.json.encode(state.to_json())


def test_to_json_bytes_on_open_v3_steps_with_raw_responses(tmp_path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=2, close=False)
    lines = path.read_bytes().splitlines(keepends=True)
    for count in range(1, len(lines) + 1):
        state = reduce_bytes(b"".join(lines[:count]))
        assert state.to_json_bytes() == msgspec.json.encode(state.to_json())


def _message_sharing_holds(state: SessionState) -> None:
    transcript_ids = {id(message) for message in state.transcript}
    for entry in state.entries.values():
        if entry.message is not None:
            assert entry.message is state.transcript[entry.transcriptIndex]
    for index, message in enumerate(state.activeContext):
        if id(message) in transcript_ids:
            continue
        # Only a compaction's summary is new: it stands for what was compacted.
        assert index == 0
        assert isinstance(message, UserMessage)
        assert message.content.startswith(COMPACTED_HISTORY_PREFIX)


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_transcript_context_and_index_share_message_objects(name, fast_path):
    state = _reduced(FIXTURES[name], fast_path=fast_path)
    if state is not None:
        _message_sharing_holds(state)


def test_message_objects_are_shared_after_a_compaction_too():
    compacted = [data for name, data in FIXTURES.items() if "compaction" in name and _reduced(data) is not None]
    summaries = 0
    for data in compacted:
        state = _reduced(data)
        assert state is not None
        _message_sharing_holds(state)
        summaries += state.activeContext[0] is not state.transcript[0]
    assert summaries >= 1


def test_message_objects_are_shared_on_the_writer_journal_and_the_spec_example(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=3)
    for data in (path.read_bytes(), example_bytes()):
        _message_sharing_holds(reduce_bytes(data))


@pytest.mark.parametrize("name", sorted(FIXTURES) + sorted(EXAMPLE_JOURNALS))
def test_json_pieces_join_to_the_bytes_of_to_json_bytes(name):
    """``replay --json`` writes the state in pieces (no buffer of the whole output); joined, they are ``to_json_bytes``."""
    state = _reduced(FIXTURES.get(name) or EXAMPLE_JOURNALS[name])
    if state is None:
        return
    for batch in (1, 2, 3, 256):
        assert b"".join(state.json_pieces(batch)) == state.to_json_bytes()


def test_json_pieces_of_a_long_session_at_every_batch_size(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=4)
    state = reduce_bytes(path.read_bytes())
    for batch in range(1, len(state.transcript) + 2):
        assert b"".join(state.json_pieces(batch)) == state.to_json_bytes()
