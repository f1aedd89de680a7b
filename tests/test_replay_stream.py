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

import json
import shutil
import textwrap
from collections.abc import Callable, Iterator, Mapping

import msgspec
import pytest
from builders import write_tool_session
from conftest import isolated_workspace
from test_checkpoints import JOURNALS, PREFIXES
from test_compaction import LongTaskModel, run
from test_replay_cli import call

from tiny_agent.errors import CorruptionError, StorageError
from tiny_agent.fold import Fold, reduce_chunks, spilled
from tiny_agent.fold import snapshot as snapshots
from tiny_agent.fold.snapshot import (
    SnapshotReader,
    SnapshotRefused,
    capture,
    decode_older,
    older_entries,
    restore,
    snapshot_frames,
)
from tiny_agent.fold.spilled import SpilledCalls, SpilledEntries
from tiny_agent.journal.facts import CompactionEntry, EntryFact
from tiny_agent.journal.partial import Elder
from tiny_agent.journal.state import AppliedEntry, SessionState, json_array_pieces
from tiny_agent.loopback.server import LoopbackServer
from tiny_agent.oversight import render
from tiny_agent.stores import checkpoints as checkpoints_module
from tiny_agent.stores.checkpoints import CHECKPOINTS_DIR, KEY_SIZE
from tiny_agent.stores.files import store as store_module
from tiny_agent.stores.journal import facts_of, fold_spilled

encode = msgspec.json.Encoder().encode

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


# -- a journal with no checkpoint: folded with its messages left in it, then printed from it -----------------


def spilled_at(tmp_path, data: bytes, cut: int) -> Fold:
    """The spilled fold of ``data[:cut]`` (what `replay` does with a journal outside the sessions directory)."""
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data[:cut])
    return fold_spilled(path)


def check_every_spilled_cut(tmp_path, data: bytes, cuts: list[int]) -> None:
    compactions = compactions_of(data)
    for cut in cuts:
        whole = Fold()
        reduce_chunks((data[:cut],), whole)
        fold = spilled_at(tmp_path, data, cut)
        state = fold.state
        entries = state.entries
        assert isinstance(entries, SpilledEntries)
        gone = entries.in_journal()
        assert len(gone) == max(0, len(whole.state.transcript) - spilled.RECENT), cut
        for full in (False, True):
            expected = list(old_transcript_lines(whole.state, full, compactions))
            assert list(render.transcript_lines(state, full=full, compactions=compactions)) == expected, cut
        assert list(render.footer_lines(state, cut, "n")) == list(render.footer_lines(whole.state, cut, "n")), cut
        assert b"".join(state.json_pieces(3)) == whole.state.to_json_bytes(), cut
        assert b"".join(json_array_pieces(state.activeContext, 2)) == encode(whole.state.activeContext), cut
        # Printed from the journal, never put back: the messages it left there are still left there.
        assert not entries.loaded and entries.in_journal() == gone, cut
        assert (len(state.transcript), len(state.activeContext)) == (len(whole.state.transcript), len(whole.state.activeContext))
        check_spilled_books(fold, whole, cut)
        # Any other reader gets the whole state.
        assert state.to_json_bytes() == whole.state.to_json_bytes() and entries.loaded, cut
        assert list(state.transcript) == whole.state.transcript and list(state.activeContext) == whole.state.activeContext


def check_spilled_books(fold: Fold, whole: Fold, cut: int) -> None:
    """The books are the whole fold's, the finished runs' calls rebuilt from their lines; such a fold is never stored."""
    current = getattr(fold.state.operation, "operationId", None)
    calls = fold.books.tool_calls
    assert isinstance(calls, SpilledCalls)
    assert list(calls) == list(whole.books.tool_calls), cut
    assert all(calls.get(key).operationId != current for key in calls.in_journal()), cut
    assert list(calls.items()) == list(whole.books.tool_calls.items()), cut
    assert msgspec.structs.replace(fold.books, tool_calls={}) == msgspec.structs.replace(whole.books, tool_calls={}), cut
    with pytest.raises(SnapshotRefused, match="calls in the journal"):
        capture(fold)


def test_a_spilled_fold_leaves_only_finished_runs_calls_in_the_journal_and_shares_repeated_strings(tmp_path):
    path = tmp_path / "made.jsonl"
    write_tool_session(path, runs=6, version=3)
    fold = fold_spilled(path)
    calls = fold.books.tool_calls
    assert isinstance(calls, SpilledCalls)
    held = [started for started in dict.values(calls) if type(started) is not int]
    assert calls.in_journal() and held and calls.in_journal() == list(calls)[: -len(held)]
    assert len({started.operationId for started in held}) == 1 and all(started.arguments for started in held)
    assert len({id(started.toolName) for started in held}) == len({started.toolName for started in held})


@pytest.mark.parametrize("name", sorted(name for name in JOURNALS if PREFIXES[name]))
def test_the_spilled_fold_of_a_journal_at_any_line_prints_the_old_rendering(name, tmp_path, monkeypatch):
    monkeypatch.setattr(spilled, "RECENT", 2)  # most messages left in the journal, even in a small one
    monkeypatch.setattr(spilled, "FLUSH", 2 + 1)  # most fact IDs kept as their hash
    cuts = PREFIXES[name]
    check_every_spilled_cut(tmp_path, JOURNALS[name][: cuts[-1]], cuts)


@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_the_spilled_fold_refuses_a_journal_as_the_whole_fold_does(name, tmp_path, monkeypatch):
    """Same error (code, line, seq, reason) for every journal we have, broken ones included, and at every cut of it."""
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 1 + 1)  # most fact IDs kept as their hash
    data = JOURNALS[name]
    cuts = sorted({at + 1 for at in range(len(data)) if data[at] == 10} | {len(data)})
    for cut in cuts[:: max(1, len(cuts) // 40)] + cuts[-2:]:
        spilled_outcome = _outcome(lambda cut=cut: spilled_at(tmp_path, data, cut))
        assert spilled_outcome == _outcome(lambda cut=cut: reduce_chunks((data[:cut],))), cut


def _reusing(data: bytes, edit: Callable[[dict, str], None], reused: str = "fact") -> bytes:
    """A v2 journal whose last toolStarted is edited by ``edit`` with the ID of its first runStarted (a fact far back),
    or with the operation ID that fact reserved (``reused="operation"``)."""
    lines = [json.loads(line) for line in data.splitlines()]
    facts = [fact for line in lines[1:] for fact in (line if isinstance(line, list) else [line])]
    started = next(fact for fact in facts if fact.get("record", {}).get("type") == "runStarted")
    first = started["id"] if reused == "fact" else started["record"]["operationId"]
    edit(next(fact for fact in reversed(facts) if fact.get("record", {}).get("type") == "toolStarted"), first)
    return b"".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for line in lines)


@pytest.mark.parametrize("reused", ["fact", "operation"])
@pytest.mark.parametrize("field", ["id", "resultEntryId"])
def test_the_spilled_fold_finds_an_id_reused_long_after_it_was_held_as_a_hash(field, reused, tmp_path, monkeypatch):
    """A fact ID (or a reserved one) equal to a fact's far back, or to an operation ID reserved far back, which only the
    hash columns hold: the same refusal."""
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 2)
    made = tmp_path / "made.jsonl"
    write_tool_session(made, runs=12, version=2)

    def edit(fact: dict, reused: str) -> None:
        (fact if field == "id" else fact["record"])[field] = reused

    data = _reusing(made.read_bytes(), edit, reused)
    whole = _outcome(lambda: reduce_chunks((data,)))
    assert whole != "folded" and whole[0] == "DUPLICATE_ID"
    assert _outcome(lambda: spilled_at(tmp_path, data, len(data))) == whole


def _outcome(fold: Callable[[], object]) -> object:
    try:
        fold()
    except CorruptionError as error:
        return (error.code, error.line, error.seq, error.reason)
    return "folded"


def test_a_compacted_session_spilled_at_any_line_prints_the_old_rendering(compacted, tmp_path, monkeypatch):
    monkeypatch.setattr(spilled, "RECENT", 3)
    monkeypatch.setattr(spilled, "FLUSH", 3 + 1)  # most fact IDs kept as their hash
    cuts = [at + 1 for at in range(len(compacted)) if compacted[at] == 10]
    check_every_spilled_cut(tmp_path, compacted, cuts[:: max(1, len(cuts) // 40)] + cuts[-3:])


def test_sessions_of_the_writer_spilled_print_as_the_old_rendering(tmp_path, monkeypatch):
    monkeypatch.setattr(spilled, "RECENT", 4)
    monkeypatch.setattr(spilled, "FLUSH", 4 + 1)  # most fact IDs kept as their hash
    for version in (2, 3):
        path = tmp_path / f"v{version}.jsonl"
        write_tool_session(path, runs=12, version=version)
        data = path.read_bytes()
        check_every_spilled_cut(tmp_path, data, [at + 1 for at in range(len(data)) if data[at] == 10])


def test_replay_of_a_journal_outside_the_sessions_directory_prints_the_full_folds_output(tmp_path, capsys, monkeypatch, compacted):
    """Outside the sessions directory (no checkpoint to read or write) replay spills; inside, with none, it folds in full."""
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 40))
    monkeypatch.setattr(spilled, "RECENT", 3)
    monkeypatch.setattr(spilled, "FLUSH", 3 + 1)  # most fact IDs kept as their hash
    name = "20260101T000000Z_" + compacted[compacted.index(b'"id":"') + 6 :][:36].decode() + ".jsonl"
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / name).write_bytes(compacted)
    (tmp_path / "outside").mkdir()
    outside = tmp_path / "outside" / name
    outside.write_bytes(compacted + b'{"torn":')
    (tmp_path / "sessions" / name).write_bytes(compacted + b'{"torn":')
    folds: list[str] = []
    real = store_module.FileStore.fold

    def fold(self, session, note, *, lean=False):
        done = real(self, session, note, lean=lean)
        folds.append(type(done.state.entries).__name__)
        return done

    monkeypatch.setattr(store_module.FileStore, "fold", fold)
    for flags in ((), ("--full",), ("--json",), ("--messages",)):
        expected = call(capsys, "replay", name[-42:-6], "--sessions-dir", str(tmp_path / "sessions"), *flags)
        assert expected[0] == 0 and ("torn tail" in expected[1]) == (flags in ((), ("--full",)))
        assert call(capsys, "replay", str(outside), "--sessions-dir", str(tmp_path / "sessions"), *flags) == expected
    assert folds == ["dict", "SpilledEntries"] * 4


def test_a_long_journal_in_the_sessions_directory_with_no_checkpoint_is_replayed_spilled_and_leaves_none(
    tmp_path, capsys, monkeypatch, compacted
):
    """From SPILL_FROM bytes on, a replay with no usable checkpoint keeps the messages in the journal (and writes no
    checkpoint, which would need them all); below it, or with a checkpoint, it reads as before: the same output.
    A checkpoint whose lean restore would decode more than SPILL_FROM bytes is passed over the same way."""
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "1")
    monkeypatch.setattr(spilled, "RECENT", 3)
    name = "20260101T000000Z_" + compacted[compacted.index(b'"id":"') + 6 :][:36].decode() + ".jsonl"
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / name).write_bytes(compacted)
    folds: list[str] = []
    real = store_module.FileStore.fold

    def fold(self, session, note, *, lean=False):
        done = real(self, session, note, lean=lean)
        folds.append(type(done.state.entries).__name__)
        return done

    monkeypatch.setattr(store_module.FileStore, "fold", fold)
    checkpoints = sessions / CHECKPOINTS_DIR
    outputs = []
    for spill_from in (len(compacted), len(compacted) + 1):
        monkeypatch.setattr(checkpoints_module, "SPILL_FROM", spill_from)
        for flags in ((), ("--json",)):
            outputs.append(call(capsys, "replay", name[-42:-6], "--sessions-dir", str(sessions), *flags))
            assert outputs[-1][0] == 0
        assert any(checkpoints.glob("*")) == (spill_from > len(compacted))
    assert folds == ["SpilledEntries", "SpilledEntries", "dict", "PartialDict"]
    assert outputs[:2] == outputs[2:]
    # With that checkpoint, a lean restore that would hold more than SPILL_FROM bytes of it spills instead.
    monkeypatch.setattr(checkpoints_module, "SPILL_FROM", 1)
    spilled_outputs = [call(capsys, "replay", name[-42:-6], "--sessions-dir", str(sessions), *flags) for flags in ((), ("--json",))]
    assert folds[4:] == ["SpilledEntries", "SpilledEntries"] and spilled_outputs == outputs[:2]


def test_a_broken_journal_outside_the_sessions_directory_is_refused_before_anything_is_printed(tmp_path, capsys, monkeypatch):
    """The fold reads the whole journal before a line is printed: the same refusal as a full fold's, and nothing else."""
    monkeypatch.delenv("TINY_AGENT_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 40))
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 1 + 1)  # most fact IDs kept as their hash
    made = tmp_path / "made.jsonl"
    write_tool_session(made, runs=12, version=3)
    data = made.read_bytes()
    middle = data.index(b"\n", len(data) // 2) + 1
    line = data.count(b"\n", 0, middle) + 1
    name = "20260101T000000Z_" + data[data.index(b'"id":"') + 6 :][:36].decode() + ".jsonl"
    for directory in ("sessions", "outside"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / name).write_bytes(data[:middle] + b'{"kind":"nonsense"}\n' + data[middle:])
    for flags in ((), ("--json",)):
        sessions = ("--sessions-dir", str(tmp_path / "sessions"))
        inside = call(capsys, "replay", str(tmp_path / "sessions" / name), *sessions, *flags)
        code, out, err = call(capsys, "replay", str(tmp_path / "outside" / name), *sessions, *flags)
        assert (code, out, err.replace(str(tmp_path / "outside"), str(tmp_path / "sessions"))) == inside
        assert code == 65 and f"line {line}" in err
        assert out == "" if not flags else json.loads(out)["ok"] is False


def test_a_journal_changed_between_the_fold_and_the_print_stops_with_a_storage_error(tmp_path, monkeypatch):
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 1 + 1)  # most fact IDs kept as their hash
    path = tmp_path / "made.jsonl"
    write_tool_session(path, runs=4, version=2)
    fold = fold_spilled(path)
    data = path.read_bytes()
    with path.open("r+b") as journal:  # the same file, its lines moved by a byte
        journal.write(data[:-1].replace(b'"id":"', b' "id":"', 1))
    with pytest.raises(StorageError, match="changed while it was read"):
        list(render.transcript_lines(fold.state))
