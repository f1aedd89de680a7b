"""`replay` streams: the transcript a lean state left in its checkpoint is printed from there, a frame at a time.

The differential: every journal we have (the conformance fixtures, the example
sessions, the spec's example, sessions made by the real writer, a long session
compacted several times) is cut at every line, the fold there is stored and
restored lean, the rest is folded, and the text replay (and ``--json``) of
that state must be the old whole-state rendering of the full fold, byte for
byte.  Structurally, the state stays lean while it is printed (nothing older
is put back in place) and the older entries are read one frame at a time.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator, Mapping

import pytest
from builders import write_tool_session
from conftest import isolated_workspace
from test_checkpoints import JOURNALS, PREFIXES
from test_compaction import LongTaskModel, run
from test_replay_cli import call

from tiny_agent.fold import Fold, reduce_chunks
from tiny_agent.fold import snapshot as snapshots
from tiny_agent.fold.snapshot import SnapshotReader, capture, decode_older, older_entries, restore, snapshot_frames
from tiny_agent.journal.facts import CompactionEntry, EntryFact
from tiny_agent.journal.partial import Elder
from tiny_agent.journal.state import AppliedEntry, SessionState
from tiny_agent.loopback.server import LoopbackServer
from tiny_agent.oversight import render
from tiny_agent.stores.checkpoints import CHECKPOINTS_DIR, KEY_SIZE
from tiny_agent.stores.journal import facts_of

# -- the old whole-state rendering (render.transcript_lines before it streamed), the reference ----------------


def old_transcript_lines(state: SessionState, full: bool, compactions: Mapping[str, CompactionEntry]) -> Iterator[str]:
    header = state.header
    created = render.time.strftime("%Y-%m-%d %H:%M:%S UTC", render.time.gmtime(header.createdAt / 1000))
    yield f"session {header.id} · v{state.version} · {header.provider} · {header.model}"
    yield f"created {created} in {header.cwd}"
    yield from render.lineage_lines(state)
    call_names: dict[str, str] = {}
    for entry in state.entries.values():
        yield ""
        if entry.message is None:
            yield f"── compaction {entry.id}: the model's context restarts from a summary here ──"
            detail = compactions.get(entry.id)
            if detail is not None:
                yield from _old_compaction_lines(state, detail, full)
            continue
        yield from render._message_lines(entry.transcriptIndex + 1, entry, entry.message, call_names, full)


def _old_compaction_lines(state: SessionState, entry: CompactionEntry, full: bool) -> Iterator[str]:
    through = state.entries.get(entry.compactedThroughEntryId)
    last = through.transcriptIndex + 1 if through is not None else 0
    kept = len(entry.retainedTail)
    kept_range = "none" if not kept else f"#{last + 1}" + (f"–#{last + kept}" if kept > 1 else "")
    yield f"    summarises the conversation through #{last}; keeps {kept_range} verbatim"
    yield "    summary:"
    summary = textwrap.indent(entry.summary or "(empty)", "    ")
    yield from (render._body(summary) if full else render._folded(summary))


# -- a lean restore whose older part streams, counting what it reads ------------------------------------------


class Streamed:
    """The older part's frames in memory, as :class:`~tiny_agent.stores.checkpoints._Older` reads them from disk."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.read = 0
        """Frames read so far by :meth:`entries`."""
        self.loads = 0

    def __call__(self) -> tuple[snapshots.Older, list[AppliedEntry]]:
        self.loads += 1
        return decode_older(self.frames)

    def entries(self) -> Iterator[AppliedEntry]:
        return older_entries(self._counted())

    def _counted(self) -> Iterator[bytes]:
        for frame in self.frames[1:]:  # not the older books
            self.read += 1
            yield frame


def lean_at(data: bytes, cut: int) -> tuple[Fold, Streamed]:
    """The fold of ``data[:cut]`` stored and restored lean (its older frames streamable), then the rest folded."""
    fold = Fold()
    reduce_chunks((data[:cut],), fold)
    frames = list(snapshot_frames(capture(fold)))
    reader = SnapshotReader()
    reader.feed(frames[0])
    older = reader.older_frames()
    reader.frames = 1 + older
    for frame in frames[1 + older :]:
        reader.feed(frame)
    streamed = Streamed(frames[1 : 1 + older])
    restored = restore(reader.snapshot(), streamed)
    reduce_chunks((data[cut:],), restored)
    return restored, streamed


def compactions_of(data: bytes) -> dict[str, CompactionEntry]:
    found: dict[str, CompactionEntry] = {}
    for _, facts in facts_of((data,)):
        for fact in facts:
            if isinstance(fact, EntryFact) and isinstance(fact.entry, CompactionEntry):
                found[fact.id] = fact.entry
    return found


def elder_of(state: SessionState) -> Elder:
    elder = getattr(state.entries, "elder", None)
    assert isinstance(elder, Elder)
    return elder


def check_every_cut(data: bytes, cuts: list[int]) -> None:
    whole = Fold()
    reduce_chunks((data,), whole)
    compactions = compactions_of(data)
    expected = {full: list(old_transcript_lines(whole.state, full, compactions)) for full in (False, True)}
    expected_json = whole.state.to_json_bytes()
    for cut in cuts:
        fold, streamed = lean_at(data, cut)
        elder = elder_of(fold.state)
        held = (elder.loaded, streamed.loads, list.__len__(fold.state.transcript))  # the rest may have asked for it
        for full in (False, True):
            assert list(render.transcript_lines(fold.state, full=full, compactions=compactions)) == expected[full], cut
        assert b"".join(fold.state.json_pieces(3)) == expected_json, cut
        # Printed from the checkpoint, never put back: the state holds what it held before it was printed.
        assert (elder.loaded, streamed.loads, list.__len__(fold.state.transcript)) == held, cut


# -- the differential ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(name for name in JOURNALS if PREFIXES[name]))  # those whose header folds
def test_the_streamed_replay_of_a_lean_state_at_any_line_is_the_old_rendering(name, monkeypatch):
    monkeypatch.setattr(snapshots, "ENTRIES_PER_FRAME", 2)  # many frames, even for a small journal
    cuts = PREFIXES[name]
    check_every_cut(JOURNALS[name][: cuts[-1]], cuts)  # an invalid journal: its longest valid prefix


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A long tool session the real agent compacted several times."""
    tmp_path = tmp_path_factory.mktemp("compacted")
    with pytest.MonkeyPatch.context() as monkeypatch:
        workspace = isolated_workspace(tmp_path, monkeypatch, "# Example\n\n" + "A line of the readme. " * 40 + "\n")
        capsys = _Captured()
        model = LongTaskModel(turns=60)
        with LoopbackServer(model, validate=False) as server:
            code, _, err = run(capsys, server, "--context-window", "3000", "--max-steps", "200")
        assert code == 0, err
        assert model.summaries >= 3
        (path,) = sorted((workspace.parent / "sessions").glob("*.jsonl"))
        return path.read_bytes()


class _Captured:
    """capsys for a module fixture: the CLI's output is not looked at."""

    def readouterr(self) -> _Output:
        return _Output()


class _Output:
    out = ""
    err = ""


def test_a_compacted_session_streams_at_any_line_as_the_old_rendering(compacted, monkeypatch):
    monkeypatch.setattr(snapshots, "ENTRIES_PER_FRAME", 16)
    cuts = [at + 1 for at in range(len(compacted)) if compacted[at] == 10]
    check_every_cut(compacted, cuts[:: max(1, len(cuts) // 60)] + cuts[-3:])
    fold, _ = lean_at(compacted, cuts[-1])
    assert elder_of(fold.state).counts["entries"] > len(fold.state.entries) // 2, "most of it is older: the test tests"


def test_sessions_of_the_writer_stream_as_the_old_rendering(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "ENTRIES_PER_FRAME", 5)
    for version in (2, 3):
        path = tmp_path / f"v{version}.jsonl"
        write_tool_session(path, runs=12, version=version)
        data = path.read_bytes()
        cuts = [at + 1 for at in range(len(data)) if data[at] == 10]
        check_every_cut(data, cuts)


def test_the_older_entries_are_read_one_frame_at_a_time(compacted, monkeypatch):
    monkeypatch.setattr(snapshots, "ENTRIES_PER_FRAME", 4)
    fold, streamed = lean_at(compacted, len(compacted))
    elder = elder_of(fold.state)
    lines = render.transcript_lines(fold.state, compactions=compactions_of(compacted))
    shown = 0
    for line in lines:
        if line.startswith(("#", "── compaction")):  # an entry's first line
            shown += 1
            # the entries printed so far, and the frame being printed: never the whole older part
            assert streamed.read <= 1 + min(shown, elder.counts["entries"]) // 4
    assert streamed.read == len(streamed.frames) - 1 and not elder.loaded


# -- the command -----------------------------------------------------------------------------------------------


def test_replay_through_a_checkpoint_prints_what_a_full_fold_prints(tmp_path, capsys, monkeypatch, compacted):
    """The same journal in two sessions directories: one checkpointed (a lean fold, streamed), one never."""
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    name = "20260101T000000Z_" + compacted[compacted.index(b'"id":"') + 6 :][:36].decode() + ".jsonl"
    for directory in ("checkpointed", "plain"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / name).write_bytes(compacted)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 40))
    outputs = {flag: call(capsys, "replay", name[-42:-6], "--sessions-dir", str(tmp_path / "plain"), *flag) for flag in ((), ("--full",), ("--json",))}
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")
    for _ in range(2):  # the first leaves the checkpoint, the second reads it lean
        for flag, expected in outputs.items():
            assert call(capsys, "replay", name[-42:-6], "--sessions-dir", str(tmp_path / "checkpointed"), *flag) == expected
    assert list((tmp_path / "checkpointed" / ".tiny-agent-checkpoints").glob("*.checkpoint"))
    assert outputs[()][0] == 0 and "compaction" in outputs[()][1]


def test_a_broken_tail_after_a_checkpoint_is_refused_before_anything_is_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")
    made = tmp_path / "made.jsonl"
    write_tool_session(made, runs=12, version=2)  # v2: no seal to tell the checkpoint from the broken tail at once
    data = made.read_bytes()
    path = tmp_path / ("20260101T000000Z_" + data[data.index(b'"id":"') + 6 :][:36].decode() + ".jsonl")
    path.write_bytes(data)
    assert call(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))[0] == 0
    with path.open("ab") as journal:
        journal.write(b'{"kind":"nonsense"}\n')
    broken = tmp_path / "elsewhere" / path.name
    broken.parent.mkdir()
    shutil.copyfile(path, broken)
    expected = call(capsys, "replay", str(broken), "--sessions-dir", str(broken.parent))
    code, out, err = call(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))
    assert (code, out) == (expected[0], "") and expected[0] != 0
    assert err.replace(str(path), "P") == expected[2].replace(str(broken), "P")


def test_an_older_frame_that_rotted_stops_the_output_with_a_storage_error(tmp_path, capsys, monkeypatch, compacted):
    """The lean restore skips the older frames; printing reads them, checks their CRC-32 and refuses one that differs."""
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")
    monkeypatch.setattr(snapshots, "ENTRIES_PER_FRAME", 8)
    path = tmp_path / ("20260101T000000Z_" + compacted[compacted.index(b'"id":"') + 6 :][:36].decode() + ".jsonl")
    path.write_bytes(compacted)
    code, whole, _ = call(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))
    assert code == 0
    (checkpoint,) = (tmp_path / CHECKPOINTS_DIR).glob("*.checkpoint")
    data = bytearray(checkpoint.read_bytes())
    position = KEY_SIZE
    for _ in range(3):  # the head, the older books, then the first frame of older entries
        start, position = position, position + 8 + int.from_bytes(data[position : position + 4], "big")
    data[(start + 8 + position) // 2] ^= 1
    checkpoint.write_bytes(bytes(data))
    code, out, err = call(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))
    assert code == 74 and "CRC-32" in err and whole.startswith(out) and len(out) < len(whole)
    checkpoint.unlink()
    assert call(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))[:2] == (0, whole)


def test_the_compactions_replay_reads_are_those_of_every_line(compacted):
    """`replay` decodes only the lines that may hold a compaction entry (the member named, or a \\u escape)."""
    journals = [compacted, *(JOURNALS[name][: PREFIXES[name][-1]] for name in sorted(JOURNALS) if PREFIXES[name])]
    escaped = compacted.replace(b'"retainedTail"', b'"\\u0072etainedTail"')
    for data in [*journals, escaped]:
        every = compactions_of(data)
        picked = {fact.id: fact.entry for _, facts in facts_of((data,), b'"retainedTail"') for fact in facts
                  if isinstance(fact, EntryFact) and isinstance(fact.entry, CompactionEntry)}
        assert picked == every
    assert compactions_of(escaped) and compactions_of(escaped) == compactions_of(compacted)
