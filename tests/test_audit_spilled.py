"""audit of a journal file folds it spilled (its older messages left in the file) and lets go of each operation's
responses once it finishes: the report must be the one a whole fold gives, error for error."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from test_checkpoints import JOURNALS
from test_replay_stream import compacted  # noqa: F401  (a fixture)

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import spilled
from tiny_agent.oversight.audit import audit_chunks


def _report(data: bytes, path: Path | None) -> object:
    try:
        return msgspec.json.encode(audit_chunks((data,), "journal", path=path))
    except CorruptionError as error:
        return (error.code, error.line, error.seq, error.reason)


def check_cuts(tmp_path: Path, data: bytes, cuts: list[int]) -> None:
    for cut in cuts:
        path = tmp_path / "cut.jsonl"
        path.write_bytes(data[:cut])
        assert _report(data[:cut], path) == _report(data[:cut], None), cut


@pytest.fixture(autouse=True)
def _almost_everything_left_in_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 2)


@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_audit_of_a_journal_file_is_the_whole_folds_at_its_lines(name: str, tmp_path: Path) -> None:
    data = JOURNALS[name]
    cuts = sorted({at + 1 for at in range(len(data)) if data[at] == 10} | {len(data)})
    check_cuts(tmp_path, data, cuts[:: max(1, len(cuts) // 30)] + cuts[-2:])


def test_audit_of_a_compacted_session_file_is_the_whole_folds(compacted: bytes, tmp_path: Path) -> None:  # noqa: F811
    cuts = [at + 1 for at in range(len(compacted)) if compacted[at] == 10]
    check_cuts(tmp_path, compacted, cuts[:: max(1, len(cuts) // 30)] + cuts[-3:])
    report = audit_chunks((compacted,), "journal", path=None)
    assert report.compactions and all(item.tokensBefore > 0 for item in report.compactions)


def test_each_attempt_is_checked_once_against_its_own_response(compacted: bytes) -> None:  # noqa: F811
    """Attempts are checked as their operation finishes (their bodies then let go): each once, with its response."""
    report = audit_chunks((compacted,), "journal")
    assert len({attempt.operationId for attempt in report.attempts}) > 3
    assert [attempt for attempt in report.attempts if attempt.response is not None]
    for attempt in report.attempts:
        assert len(attempt.notes) == len(set(attempt.notes)), attempt
        if attempt.response is not None:
            assert not [note for note in attempt.notes if note.startswith("no response")], attempt
    assert not report.drift
