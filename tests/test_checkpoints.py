"""Checkpoints: a snapshot of the fold plus the journal's tail is the full fold, byte for byte, or is not used.

The differential tests cut every valid journal we have (the conformance
fixtures, the example sessions, the spec's example, sealed sessions made by
the real writer) at every line, store the fold there, restore it, fold the
rest, and compare with folding the whole file: the ``--json`` bytes, the
error (code, line, seq, reason) when the rest is broken, and the restored
fold's own bookkeeping.  The file tests check what keys a checkpoint and
that every mismatch falls back to a full fold, with one note, never an error.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from builders import RunWriter, new_writer, write_tool_session
from conftest import PROJECT_ROOT, conformance_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec_example import example_bytes
from test_fuzz import mutate
from test_replay_cli import call as cli

from tiny_agent.errors import CorruptionError, UsageError
from tiny_agent.fold import Fold, reduce_chunks
from tiny_agent.fold import snapshot as snapshots
from tiny_agent.fold.snapshot import Older, SnapshotInvalid, SnapshotRefused, capture, decode_snapshot, encode_snapshot, restore
from tiny_agent.journal.partial import in_memory
from tiny_agent.journal.state import AppliedEntry, ToolCallState
from tiny_agent.oversight.verify import verify
from tiny_agent.stores import checkpoints, digests
from tiny_agent.stores.checkpoints import CHECKPOINTS_DIR, Checkpoints, threshold_from
from tiny_agent.stores.journal import read_journal


def _sealed(runs: int, version: int = 3) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.jsonl"
        write_tool_session(path, runs=runs, version=version)
        return path.read_bytes()


def _journals() -> dict[str, bytes]:
    journals = {"spec-example": example_bytes(9), "sealed-v3": _sealed(3), "writer-v2": _sealed(2, version=2)}
    manifest = conformance_dir() / "fixtures" / "manifest.json"
    for case in json.loads(manifest.read_text())["fixtures"]:
        journals[case["name"]] = (manifest.parent / case["file"]).read_bytes()
    for path in sorted((PROJECT_ROOT / "sessions" / "examples").glob("*.jsonl")):
        journals[path.name] = path.read_bytes()
    return journals


JOURNALS = _journals()


def outcome(fold: Fold, data: bytes) -> bytes | tuple[object, ...]:
    """What folding ``data`` into ``fold`` gives: the conformance JSON, or the error."""
    try:
        return reduce_chunks((data,), fold).to_json_bytes()
    except CorruptionError as error:
        return (error.code, error.line, error.seq, error.reason)


def valid_prefixes(data: bytes) -> list[int]:
    """The byte lengths of the prefixes of whole lines (header included) that fold cleanly."""
    ends: list[int] = []
    position = data.find(b"\n")
    while position != -1:
        try:
            reduce_chunks((data[: position + 1],))
        except CorruptionError:
            break
        ends.append(position + 1)
        position = data.find(b"\n", position + 1)
    return ends


PREFIXES = {name: valid_prefixes(data) for name, data in JOURNALS.items()}


def checkpointed(data: bytes, cut: int, lean: bool = False) -> Fold:
    """The fold of ``data[:cut]`` after a trip through a snapshot's bytes (lean: its older entries left out until asked for)."""
    fold = Fold()
    reduce_chunks((data[:cut],), fold)
    snapshot = decode_snapshot(encode_snapshot(capture(fold)))
    if not lean:
        return restore(snapshot)
    older = (snapshot.older_books, snapshot.older_entries)
    snapshot.older_books, snapshot.older_entries = None, []
    return restore(snapshot, lambda: older)  # type: ignore[arg-type,return-value]


def bookkeeping(fold: Fold) -> bytes:
    snapshot = capture(fold)
    books = snapshot.books
    # A set's order is no part of the fold (a dict's is: it is kept).
    sets = {name: sorted(getattr(books, name)) for name in ("fact_ids", "outstanding", "operations", "used_pairs")}
    snapshot.books = msgspec.structs.replace(books, **sets)
    if snapshot.older_books is not None:
        lists = {name: sorted(getattr(snapshot.older_books, name)) for name in ("fact_ids", "operations", "used_pairs")}
        snapshot.older_books = msgspec.structs.replace(snapshot.older_books, **lists)
    return encode_snapshot(snapshot)


# -- the differential ---------------------------------------------------------------------------


@pytest.mark.parametrize("lean", [False, True], ids=["whole", "lean"])
@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_a_checkpoint_at_any_line_plus_the_rest_is_the_full_fold(name, lean):
    data = JOURNALS[name]
    full = Fold()
    expected = outcome(full, data)
    for cut in PREFIXES[name]:
        resumed = checkpointed(data, cut, lean)
        if lean and isinstance(expected, bytes):
            reduce_chunks((data[cut:],), resumed)
            state, whole = resumed.state, full.state
            assert len(state.transcript) == len(whole.transcript) and len(state.entries) == len(whole.entries)
            assert msgspec.json.encode(state.activeContext) == msgspec.json.encode(whole.activeContext)
            assert state.transcript[-len(state.activeContext) :] == whole.transcript[-len(state.activeContext) :]
            assert state.to_json_bytes() == expected, f"cut at byte {cut}"
        else:
            assert outcome(resumed, data[cut:]) == expected, f"cut at byte {cut}"
        if isinstance(expected, bytes):
            assert bookkeeping(resumed) == bookkeeping(full), f"cut at byte {cut}"


def test_a_lean_fold_holds_the_entries_of_its_active_context_without_reading_the_older_part():
    for name, data in JOURNALS.items():
        for cut in PREFIXES[name]:
            whole, lean = checkpointed(data, cut), checkpointed(data, cut, lean=True)
            context = {id(message) for message in whole.state.activeContext}
            needed = {entry.id for entry in whole.state.entries.values() if id(entry.message) in context}
            assert needed <= {entry.id for entry in in_memory(lean.state.entries)}, f"{name} cut at byte {cut}"
            elder = getattr(lean.state.entries, "elder", None)
            assert elder is None or not elder.loaded


TAILS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@TAILS
@given(
    name=st.sampled_from(sorted(name for name, cuts in PREFIXES.items() if cuts)),
    seed=st.integers(0, 2**32),
    rounds=st.integers(0, 3),
    lean=st.booleans(),
)
def test_a_checkpoint_plus_any_appended_tail_is_the_full_fold(name, seed, rounds, lean):
    """Random cut points, random tails (the journal's own rest, mutated: flipped bytes, lost, doubled or torn lines)."""
    data = JOURNALS[name]
    cut = random.Random(seed).choice(PREFIXES[name])
    tail = mutate(data[cut:], seed, rounds) if len(data) > cut else b""
    assert outcome(checkpointed(data, cut, lean), tail) == outcome(Fold(), data[:cut] + tail)


def test_a_restored_state_shares_each_message_like_a_folded_one():
    data = JOURNALS["sealed-v3"]
    fold = checkpointed(data, len(data))
    assert fold.state.transcript
    messages = [entry for entry in fold.state.entries.values() if entry.message is not None]
    for position, message in enumerate(fold.state.transcript):
        assert messages[position].message is message
        assert fold.state.activeContext[position] is message


# -- what a snapshot refuses ------------------------------------------------------------------


def test_a_fold_cannot_grow_a_member_the_snapshot_does_not_know():
    fold = Fold()
    reduce_chunks((JOURNALS["sealed-v3"],), fold)
    with pytest.raises(AttributeError):
        fold.new_member = 1  # type: ignore[attr-defined]


def test_a_folds_members_are_its_books_and_state_and_those_a_snapshot_need_not_store():
    """Adding a member to the fold? Put what a fold needs to go on in its books (a snapshot stores them whole)."""
    members = {name for cls in Fold.__mro__ for name in getattr(cls, "__slots__", ())}
    assert members == {"books", "state"} | snapshots.NOT_STORED


@pytest.mark.parametrize("value", [msgspec.Raw(b"1" * 5000), 10**30], ids=["a huge integer's text", "past 64 bits"])
def test_tool_arguments_that_would_not_come_back_equal_are_refused(value):
    fold = Fold()
    reduce_chunks((JOURNALS["sealed-v3"],), fold)
    call = next(iter(fold.books.tool_calls.values()))
    call.arguments["odd"] = value
    with pytest.raises(SnapshotRefused, match="tool arguments"):
        capture(fold)


def test_an_infinity_in_tool_arguments_comes_back_as_it_was():
    """A JSON number beyond a double's range (``1e400``) folds to an infinity; MessagePack keeps it exactly."""
    fold = Fold()
    reduce_chunks((JOURNALS["sealed-v3"],), fold)
    next(iter(fold.books.tool_calls.values())).arguments["far"] = float("inf")
    restored = restore(decode_snapshot(encode_snapshot(capture(fold))))
    assert next(iter(restored.books.tool_calls.values())).arguments["far"] == float("inf")


def test_bytes_that_are_no_snapshot_are_refused():
    with pytest.raises(SnapshotInvalid):
        decode_snapshot(b"\x93not a snapshot")
    snapshot = capture(checkpointed(JOURNALS["sealed-v3"], len(JOURNALS["sealed-v3"])))
    snapshot.context = [len(snapshot.entries) + 1]
    with pytest.raises(SnapshotInvalid):
        restore(decode_snapshot(encode_snapshot(snapshot)))


# -- checkpoint files -------------------------------------------------------------------------


class Notes(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


class Restores:
    """Counts the snapshots restored (a checkpoint that was used)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = snapshots.restore

        def counting(snapshot: snapshots.FoldSnapshot, older: Callable[[], tuple[Older, list[AppliedEntry]]] | None = None) -> Fold:
            self.count += 1
            return real(snapshot, older)

        monkeypatch.setattr(snapshots, "restore", counting)


SESSION = "0190f5e2-7c00-7a00-8a00-000000000001"
OTHER_SESSION = "0190f5e2-7c00-7a00-8a00-000000000002"


def journal_name(session_id: str = SESSION) -> str:
    return f"20260101T000000Z_{session_id}.jsonl"


def grown_session(tmp_path: Path, version: int = 3, runs: int = 3, session_id: str = SESSION) -> tuple[Path, RunWriter]:
    """A session in a sessions directory, its writer still open for more runs."""
    path = tmp_path / journal_name(session_id)
    writer = new_writer(path, version, session_id=session_id)
    run = RunWriter(writer)
    add_runs(run, runs)
    return path, run


def add_runs(run: RunWriter, runs: int) -> None:
    for number in range(runs):
        run.start(f"question {number} ✓")
        run.attempt()
        asked = run.call_tools([("read", '{"path":"README.md"}')])
        run.run_tool(asked, 0, f"file {number}\n")
        run.attempt()
        run.finish(run.answer(f"answer {number}"))


def stored(tmp_path: Path, session_id: str = SESSION) -> Path:
    return tmp_path / CHECKPOINTS_DIR / (Path(journal_name(session_id)).stem + ".checkpoint")


@pytest.mark.parametrize("version", [2, 3])
def test_a_big_fold_leaves_a_private_checkpoint_and_the_next_read_folds_only_the_tail(tmp_path, monkeypatch, version):
    path, run = grown_session(tmp_path, version)
    notes = Notes()
    store = Checkpoints(tmp_path, threshold=0, note=notes)
    assert store.read(path).to_json_bytes() == read_journal(path).to_json_bytes()
    checkpoint = stored(tmp_path)
    assert checkpoint.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / CHECKPOINTS_DIR).stat().st_mode & 0o777 == 0o700
    add_runs(run, 2)
    restores = Restores(monkeypatch)
    assert store.read(path).to_json_bytes() == read_journal(path).to_json_bytes()
    assert restores.count == 1
    assert notes == []


def test_a_small_fold_leaves_no_checkpoint(tmp_path):
    path, _ = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=path.stat().st_size + 1).read(path)
    assert not stored(tmp_path).exists()


def test_a_tail_shorter_than_the_threshold_keeps_the_checkpoint_it_came_from(tmp_path):
    path, run = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=0).read(path)
    before = stored(tmp_path).read_bytes()
    add_runs(run, 1)
    Checkpoints(tmp_path, threshold=path.stat().st_size).read(path)
    assert stored(tmp_path).read_bytes() == before
    Checkpoints(tmp_path, threshold=0).read(path)
    assert stored(tmp_path).read_bytes() != before


def test_journals_outside_the_sessions_directory_have_no_checkpoint(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path, _ = grown_session(elsewhere)
    Checkpoints(tmp_path, threshold=0).read(path)
    assert not (tmp_path / CHECKPOINTS_DIR).exists()
    assert not (elsewhere / CHECKPOINTS_DIR).exists()


def _first_content_byte(data: bytes) -> int:
    """The offset of a letter inside the first answer's text: changing it keeps every line well-formed."""
    return data.index(b"answer 0") + len(b"answer ")


@pytest.mark.parametrize("version", [2, 3])
def test_a_changed_prefix_byte_is_noticed_and_the_journal_folded_in_full(tmp_path, version):
    path, run = grown_session(tmp_path, version)
    Checkpoints(tmp_path, threshold=0).read(path)
    add_runs(run, 1)
    data = bytearray(path.read_bytes())
    data[_first_content_byte(bytes(data))] = ord("1")
    path.write_bytes(bytes(data))
    notes = Notes()
    expected = outcome(Fold(), bytes(data))
    try:
        got: bytes | tuple[object, ...] = Checkpoints(tmp_path, threshold=0, note=notes).read(path).to_json_bytes()
    except CorruptionError as error:
        got = (error.code, error.line, error.seq, error.reason)
    assert got == expected
    if version == 3:
        assert expected[0] == "SEAL_MISMATCH"
    assert len(notes) == 1 and "changed" in notes[0]


def test_a_truncated_journal_is_folded_in_full(tmp_path, monkeypatch):
    path, _ = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=0).read(path)
    data = path.read_bytes()
    shorter = data[: data.rindex(b"\n", 0, len(data) - 1) + 1]
    path.write_bytes(shorter)
    notes = Notes()
    restores = Restores(monkeypatch)
    state = Checkpoints(tmp_path, threshold=len(data), note=notes).read(path)
    assert state.to_json_bytes() == read_journal(path).to_json_bytes()
    assert restores.count == 0
    assert len(notes) == 1 and "truncated or replaced" in notes[0]


@pytest.mark.parametrize("version", [2, 3])
def test_a_checkpoint_of_another_journal_is_not_used(tmp_path, monkeypatch, version):
    """Swapped: the checkpoint of a longer session in the place of this one's."""
    other = tmp_path / "other"
    other.mkdir()
    other_path, _ = grown_session(other, version, runs=5, session_id=OTHER_SESSION)
    Checkpoints(other, threshold=0).read(other_path)
    path, run = grown_session(tmp_path, version, runs=2)
    add_runs(run, 4)
    stored(tmp_path).parent.mkdir(mode=0o700)
    stored(tmp_path).write_bytes(stored(other, OTHER_SESSION).read_bytes())
    notes = Notes()
    restores = Restores(monkeypatch)
    state = Checkpoints(tmp_path, threshold=1 << 30, note=notes).read(path)
    assert state.to_json_bytes() == read_journal(path).to_json_bytes()
    assert len(notes) == 1 and "does not match" in notes[0]
    assert restores.count <= 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),
        lambda data: b"{not a key}\n" + data,
        lambda data: b"",
        lambda data: data.replace(b'"format":%d' % snapshots.SNAPSHOT_FORMAT, b'"format":0', 1),
    ],
    ids=["cut short", "flipped byte", "bad key", "empty", "other format"],
)
def test_a_corrupt_checkpoint_is_ignored_with_a_note(tmp_path, damage):
    path, _ = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=0).read(path)
    checkpoint = stored(tmp_path)
    checkpoint.write_bytes(damage(checkpoint.read_bytes()))
    notes = Notes()
    state = Checkpoints(tmp_path, threshold=1 << 30, note=notes).read(path)
    assert state.to_json_bytes() == read_journal(path).to_json_bytes()
    assert len(notes) == 1 and notes[0].startswith(f"checkpoint of {path.name} ")


# -- the next turn's prefix check: the same file, its edges, the next seal ----------------------


def long_session(tmp_path: Path, version: int = 3) -> tuple[Path, RunWriter]:
    """A session whose checkpointed prefix is several times the edges a lean restore hashes, then one more run."""
    path, run = grown_session(tmp_path, version, runs=0)
    for number in range(8):
        run.start(f"question {number}")
        run.attempt()
        asked = run.call_tools([("read", '{"path":"big.txt"}')])
        run.run_tool(asked, 0, f"{number} " + "middle of the journal ✓ " * 2000)
        run.attempt()
        run.finish(run.answer(f"answer {number}"))
    Checkpoints(tmp_path, threshold=0).read(path)
    assert path.stat().st_size > 4 * digests.EDGE
    add_runs(run, 1)
    return path, run


def checkpoint_length(tmp_path: Path) -> int:
    return int(json.loads(stored(tmp_path).read_bytes()[: checkpoints.KEY_SIZE])["length"])


def fold_outcome(store: Checkpoints, path: Path, next_turn: bool = True) -> bytes | tuple[object, ...]:
    """What the next turn's fold (lean, the prefix checked at its edges) or a reader's (lean, hashed in full) gives."""
    try:
        return store.fold(path, lean=True, edges=next_turn).state.to_json_bytes()
    except CorruptionError as error:
        return (error.code, error.line, error.seq, error.reason)


def edit_in_place(path: Path, offset: int, byte: bytes) -> None:
    """Overwrite one byte where it is (same inode, same length), as an editor that writes in place would."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, byte, offset)
    finally:
        os.close(fd)


@pytest.mark.parametrize("version", [2, 3])
def test_the_next_turn_reads_the_prefix_only_at_its_edges(tmp_path, monkeypatch, version):
    path, _ = long_session(tmp_path, version)
    length, journal = checkpoint_length(tmp_path), path.stat().st_ino
    reads: list[tuple[int, int]] = []
    real = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        if os.fstat(fd).st_ino == journal:
            reads.append((offset, offset + size))
        return real(fd, size, offset)

    monkeypatch.setattr(checkpoints.os, "pread", pread)
    restores, notes = Restores(monkeypatch), Notes()
    state = Checkpoints(tmp_path, threshold=1 << 30, note=notes).fold(path, lean=True, edges=True).state
    monkeypatch.undo()
    assert state.to_json_bytes() == read_journal(path).to_json_bytes()
    assert restores.count == 1 and notes == []
    middle = (digests.EDGE, length - digests.EDGE)
    assert reads and all(end <= middle[0] or start >= middle[1] for start, end in reads), reads


@pytest.mark.parametrize("version", [2, 3])
def test_an_edit_inside_the_prefix_that_keeps_the_inode_is_seen_by_replay_not_by_the_next_turn(tmp_path, capsys, version):
    """The design's limit, kept visible: the next turn trusts the middle of its own file; replay, audit and verify do not."""
    from tiny_agent.stores.files.store import FileStore, file_session

    path, run = long_session(tmp_path, version)
    run.writer.close()
    middle = path.read_bytes().index(b"middle of the journal", checkpoint_length(tmp_path) // 2)
    edit_in_place(path, middle, b"M")
    notes = Notes()
    with FileStore(tmp_path).open_writer(file_session(path), "process", notes) as writer:
        assert b"Middle of the journal" not in writer.state.to_json_bytes()
    assert notes == []
    assert fold_outcome(Checkpoints(tmp_path, threshold=1 << 30, note=notes), path, next_turn=False) == outcome(Fold(), path.read_bytes())
    assert len(notes) == 1 and "changed" in notes[0]
    err = cli(capsys, "replay", str(path), "--json", "--sessions-dir", str(tmp_path))[2]
    assert f"checkpoint of {path.name} does not match the journal (its first" in err
    if version == 3:
        assert verify(path).status == "corrupt"


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("where", ["header", "before the checkpoint"])
def test_an_edit_at_the_prefixs_edges_makes_the_next_turn_fold_in_full(tmp_path, monkeypatch, version, where):
    path, _ = long_session(tmp_path, version)
    data = path.read_bytes()
    length = checkpoint_length(tmp_path)
    offset = data.index(b"/workspace") + 1 if where == "header" else data.rindex(b"answer 7", 0, length) + len(b"answer ")
    edit_in_place(path, offset, b"9" if where != "header" else b"W")
    notes, restores = Notes(), Restores(monkeypatch)
    assert fold_outcome(Checkpoints(tmp_path, threshold=1 << 30, note=notes), path) == outcome(Fold(), path.read_bytes())
    assert restores.count <= 1
    assert len(notes) == 1 and "does not match the journal" in notes[0]


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("edited", [False, True], ids=["same bytes", "a middle byte changed"])
def test_a_replaced_journal_of_the_same_length_is_hashed_in_full(tmp_path, monkeypatch, version, edited):
    """Another inode (a copy put in its place, a restored backup): the next turn checks the whole prefix."""
    path, _ = long_session(tmp_path, version)
    data = bytearray(path.read_bytes())
    if edited:
        data[data.index(b"middle of the journal", checkpoint_length(tmp_path) // 2)] = ord("M")
    before = path.stat().st_ino
    copy = path.with_name("copy")
    copy.write_bytes(bytes(data))
    os.replace(copy, path)
    assert path.stat().st_ino != before and path.stat().st_size == len(data)
    notes, restores = Notes(), Restores(monkeypatch)
    assert fold_outcome(Checkpoints(tmp_path, threshold=1 << 30, note=notes), path) == outcome(Fold(), bytes(data))
    if edited:
        assert len(notes) == 1 and "changed" in notes[0]
    else:
        assert restores.count == 1 and notes == []


@pytest.mark.parametrize("version", [2, 3])
def test_a_journal_truncated_and_grown_again_past_its_checkpoint_is_folded_in_full(tmp_path, monkeypatch, version):
    """Same inode, longer than the checkpoint again, other bytes across its boundary."""
    path, _ = long_session(tmp_path, version)
    data = path.read_bytes()
    length = checkpoint_length(tmp_path)
    cut = data.rindex(b"\n", 0, data.rindex(b"\n", 0, length - 1)) + 1
    os.truncate(path, cut)
    with open(path, "ab") as journal:
        journal.write(data[cut:].replace(b"answer 7", b"answer X"))
    assert path.stat().st_size == len(data)
    notes = Notes()
    assert fold_outcome(Checkpoints(tmp_path, threshold=1 << 30, note=notes), path) == outcome(Fold(), path.read_bytes())
    assert len(notes) == 1 and "does not match the journal" in notes[0]


def test_a_next_turn_that_will_renew_the_checkpoint_hashes_the_prefix_in_full(tmp_path):
    """The renewed checkpoint's key needs the whole prefix's digest, so that fold checks it as a whole restore does."""
    path, _ = long_session(tmp_path)
    middle = path.read_bytes().index(b"middle of the journal", checkpoint_length(tmp_path) // 2)
    edit_in_place(path, middle, b"M")
    notes = Notes()
    assert fold_outcome(Checkpoints(tmp_path, threshold=0, note=notes), path) == outcome(Fold(), path.read_bytes())
    assert len(notes) == 1 and "changed" in notes[0]


def test_a_checkpoint_that_is_not_a_regular_file_is_ignored_with_a_note(tmp_path):
    path, _ = grown_session(tmp_path)
    stored(tmp_path).mkdir(parents=True)
    notes = Notes()
    assert Checkpoints(tmp_path, threshold=1 << 30, note=notes).read(path).to_json_bytes() == read_journal(path).to_json_bytes()
    assert len(notes) == 1


def test_a_checkpoint_made_by_other_code_is_not_used(tmp_path, monkeypatch):
    path, _ = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=0).read(path)
    monkeypatch.setattr(checkpoints, "fold_identity", lambda: "another fold")
    notes = Notes()
    Checkpoints(tmp_path, threshold=1 << 30, note=notes).read(path)
    assert notes == [f"checkpoint of {path.name} was made by another version of tiny-agent; folding the whole journal"]


def test_a_checkpoint_whose_key_has_other_members_is_another_versions_not_a_corrupt_one(tmp_path):
    """An upgrade meets the checkpoints of the version before, whose keys lack (or add) members."""
    path, _ = grown_session(tmp_path)
    Checkpoints(tmp_path, threshold=0).read(path)
    data = stored(tmp_path).read_bytes()
    key = json.loads(data[: checkpoints.KEY_SIZE])
    del key["edges"]
    key["fold"], key["older member"] = "the version before", 1
    line = json.dumps(key).encode()
    stored(tmp_path).write_bytes(line + b" " * (checkpoints.KEY_SIZE - 1 - len(line)) + b"\n" + data[checkpoints.KEY_SIZE :])
    notes = Notes()
    Checkpoints(tmp_path, threshold=1 << 30, note=notes).read(path)
    assert notes == [f"checkpoint of {path.name} was made by another version of tiny-agent; folding the whole journal"]


def test_a_writer_opens_a_session_from_its_checkpoint(tmp_path, monkeypatch):
    from tiny_agent.stores.journal import JournalWriter

    path, run = grown_session(tmp_path)
    run.writer.close()
    store = Checkpoints(tmp_path, threshold=0)
    store.read(path)
    restores = Restores(monkeypatch)
    with JournalWriter.open(path, durability="process", folder=store.fold) as writer:
        assert writer.state.to_json_bytes() == read_journal(path).to_json_bytes()
        add_runs(RunWriter(writer), 1)
    assert restores.count == 1
    assert read_journal(path).runCount == 4


def test_the_threshold_comes_from_the_environment():
    assert threshold_from({}) == 8 << 20
    assert threshold_from({"TINY_AGENT_CHECKPOINT_BYTES": "0"}) == 0
    for bad in ("-1", "8MB", "1.5"):
        with pytest.raises(UsageError, match="TINY_AGENT_CHECKPOINT_BYTES"):
            threshold_from({"TINY_AGENT_CHECKPOINT_BYTES": bad})


def test_the_fold_identity_names_the_fold_code():
    identity = checkpoints.fold_identity()
    assert identity is not None and len(identity) == 32
    assert ToolCallState  # the state's types are part of it (tiny_agent/journal/state.py is hashed)
    assert os.path.basename(snapshots.__file__) in {path.name for path in (Path(checkpoints.__file__).parent.parent / "fold").glob("*.py")}


# -- the commands -------------------------------------------------------------------------------


@pytest.fixture
def checkpointing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")


def test_replay_json_through_a_checkpoint_is_the_full_fold_byte_for_byte(tmp_path, capsys, monkeypatch, checkpointing):
    path, run = grown_session(tmp_path)
    directory = ("--sessions-dir", str(tmp_path))
    assert cli(capsys, "replay", str(path), "--json", *directory)[0] == 0
    assert stored(tmp_path).exists()
    add_runs(run, 2)
    restores = Restores(monkeypatch)
    code, out, err = cli(capsys, "replay", str(path), "--json", *directory)
    assert (code, err) == (0, "")
    assert restores.count == 1
    assert out.encode() == b'{"ok":true,"state":' + read_journal(path).to_json_bytes() + b"}\n"


def test_replay_says_in_one_line_why_it_folds_in_full(tmp_path, capsys, checkpointing):
    path, _ = grown_session(tmp_path)
    directory = ("--sessions-dir", str(tmp_path))
    cli(capsys, "replay", str(path), "--json", *directory)
    stored(tmp_path).write_bytes(b"rotten")
    code, out, err = cli(capsys, "replay", str(path), "--json", *directory)
    assert code == 0
    assert err == f"· checkpoint of {path.name} is corrupt (no key line); folding the whole journal\n"
    assert json.loads(out)["state"] == json.loads(read_journal(path).to_json_bytes())


def test_a_malformed_threshold_is_a_usage_error(tmp_path, capsys, monkeypatch):
    path, _ = grown_session(tmp_path)
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "lots")
    code, _, err = cli(capsys, "replay", str(path), "--sessions-dir", str(tmp_path))
    assert code == 2
    assert err.startswith("USAGE: TINY_AGENT_CHECKPOINT_BYTES must be a whole number of bytes")


def test_audit_reads_the_checkpointed_lines_without_folding_them_again(tmp_path, capsys, monkeypatch, checkpointing):
    path, run = grown_session(tmp_path)
    directory = ("--sessions-dir", str(tmp_path))
    cli(capsys, "replay", str(path), "--json", *directory)
    add_runs(run, 1)
    plain = cli(capsys, "audit", str(path), "--json", "--sessions-dir", str(tmp_path / "elsewhere"))
    restores = Restores(monkeypatch)
    assert cli(capsys, "audit", str(path), "--json", *directory) == plain
    assert restores.count == 1


def test_verify_never_uses_a_checkpoint(tmp_path, capsys, monkeypatch, checkpointing):
    path, _ = grown_session(tmp_path)
    directory = ("--sessions-dir", str(tmp_path))
    cli(capsys, "replay", str(path), "--json", *directory)
    restores = Restores(monkeypatch)
    assert cli(capsys, "verify", str(path), *directory)[0] == 0
    assert restores.count == 0


def test_resume_opens_the_session_from_its_checkpoint(tmp_path, capsys, monkeypatch, checkpointing):
    path, run = grown_session(tmp_path)
    run.writer.close(seal=False)
    directory = ("--sessions-dir", str(tmp_path))
    cli(capsys, "replay", str(path), "--json", *directory)
    restores = Restores(monkeypatch)
    code, _, err = cli(capsys, "resume", str(path), *directory)
    assert code == 0, err
    assert restores.count == 1
    assert read_journal(path).sealed


def test_run_with_a_session_continues_it_from_its_checkpoint(tmp_path, capsys, monkeypatch, checkpointing):
    import replies

    from tiny_agent.loopback import LoopbackServer

    for name in ("TINY_AGENT_BASE_URL", "TINY_AGENT_MODEL", "TINY_AGENT_API_KEY", "OPENROUTER_API_KEY", "TINY_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    path, run = grown_session(tmp_path)
    run.writer.close()
    directory = ("--sessions-dir", str(tmp_path))
    cli(capsys, "replay", str(path), "--json", *directory)
    restores = Restores(monkeypatch)
    with LoopbackServer([replies.answer("and more")]) as server:
        flags = ("--base-url", server.base_url, "--model", "test/model", "--durability", "process", "--retries", "0")
        code, out, err = cli(capsys, "run", "anything else?", "--session", str(path), *flags, *directory)
    assert code == 0, err
    assert out == "and more\n"
    assert restores.count == 1
    assert [message.content for message in read_journal(path).transcript][-2:] == ["anything else?", "and more"]
