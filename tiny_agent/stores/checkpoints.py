"""Checkpoints: the fold of a long journal kept beside it, so that reading it again costs only its new tail.

A checkpoint is the whole fold at a line boundary (:mod:`tiny_agent.fold.snapshot`:
the reduced state and the fold's bookkeeping), kept for a journal of the
sessions directory in ``.tiny-agent-checkpoints/<journal name>.checkpoint``
beside the sessions index (0600, in a 0700 directory, written whole through a
staging file).  The file is one JSON line, its :class:`CheckpointKey` (padded
to :data:`KEY_SIZE` bytes, so that it can be written last), then the
snapshot's frames (MessagePack, each after its length): a reader holds one
frame's bytes at a time, never the whole snapshot.  The key says which bytes the snapshot folded and by which code:

- ``length`` and ``prefix``: the journal's first ``length`` bytes (whole
  lines) and their SHA-256;
- ``file`` and ``edges``: the journal file's identity (device and inode) when
  the checkpoint was written, and the SHA-256 of the prefix's first and last
  :data:`~tiny_agent.stores.digests.EDGE` bytes (its header, and the lines just before the checkpoint);
- ``chain`` (v3): the seal chain through the last of those lines, which the
  next line's seal must carry;
- ``fold``: a digest of the fold's own source (and Python's and msgspec's
  versions): a checkpoint made by other code is not read;
- ``body``: how many frames follow the key, each after its length and its
  CRC-32 (a checkpoint that rotted on disk must not restore into a wrong state).

A lean fold (:meth:`Checkpoints.fold`, for the commands that write the next
turn, and ``replay``) skips the frames of the entries before the active context and reads
them back only when the state first needs them.

A checkpoint is used only when every check passes.  A reader (``replay``,
``audit``) hashes the prefix in full (in a thread, while the snapshot is
decoded), so it goes on from exactly the bytes the checkpoint folded.
Writing the next turn (``edges``), when it will not renew the checkpoint,
reads only the tail: in the same file (same device and inode, at least as
long) whose edges hash as they did and whose next line's seal carries the
chain (v3), it takes the prefix as unchanged, since a journal is only ever
appended to; another file, or a tail long enough to renew the checkpoint, is
hashed in full.  So an edit inside the prefix, away from its edges, that
keeps the inode is not noticed by the next turn (a reader notices it, and so
does ``verify`` in v3): docs/journal.md, "Checkpoints".
Any mismatch, and any checkpoint that cannot be read or decoded, makes the
caller's ``note`` say why (one line) and the journal is folded in full: a
checkpoint is a cache, never an error.

New checkpoints are written when a fold reads at least ``threshold`` bytes
(the whole journal, or the tail after a checkpoint), so a checkpoint of a
big journal is made once and renewed only after the journal has grown by
that much.  ``verify`` never uses checkpoints; only journals directly in
the sessions directory have one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import sys
import weakref
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tiny_agent.errors import StorageError, UsageError
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import reduce_chunks
from tiny_agent.stores.base import Note
from tiny_agent.stores.digests import Hashing, PrefixDigest, edges_digest, hashed
from tiny_agent.stores.files.disk import CHUNK_SIZE, open_regular
from tiny_agent.stores.journal import collector_paused, fold_file, fold_spilled

if TYPE_CHECKING:
    from tiny_agent.fold.snapshot import Older, SnapshotReader
    from tiny_agent.journal.state import AppliedEntry, SessionState

# tiny_agent.fold.snapshot is imported where a checkpoint is read or written: most folds
# (small journals, no checkpoint yet) need neither, and a command should not pay to load it.

CHECKPOINTS_DIR: Final = ".tiny-agent-checkpoints"
SUFFIX: Final = ".checkpoint"
THRESHOLD_ENV: Final = "TINY_AGENT_CHECKPOINT_BYTES"
DEFAULT_THRESHOLD: Final = 8 << 20
"""Folds that read less than this (8 MiB) leave no checkpoint: they are fast enough as they are."""
SPILL_FROM: Final = 64 << 20
"""A reader (``replay``) of a journal this long (64 MiB) with no usable checkpoint folds it with its messages left in
it (:func:`~tiny_agent.stores.journal.fold_spilled`) and leaves no checkpoint: a whole fold would hold about 1.6 times
the journal in memory (docs/performance.md)."""
KEY_SIZE: Final = 1024
"""The key line's room, LF included (the key is a few hundred bytes, padded with spaces)."""
FRAME_LIMIT: Final = 1 << 30
"""A frame is a few MB; a length beyond this is a corrupt file, not an allocation to attempt."""
SEAL_PROBE: Final = 1 << 20
"""How far past a v3 checkpoint the next line's end (and its seal) is looked for before hashing the prefix."""


class CheckpointKey(msgspec.Struct, forbid_unknown_fields=True):
    """What a checkpoint's snapshot folded, and how to tell that it still applies."""

    format: int
    fold: str
    """The identity of the code that made it (:func:`fold_identity`)."""
    session: str
    version: int
    length: int
    lines: int
    prefix: str
    """``sha256:<hex>`` of the journal's first ``length`` bytes."""
    file: tuple[int, int]
    """The journal's ``(st_dev, st_ino)`` when the checkpoint was written."""
    edges: str
    """``sha256:<hex>`` of the first and the last :data:`~tiny_agent.stores.digests.EDGE` bytes of those ``length``."""
    chain: str | None
    """v3: the chain through line ``lines``, which the seal of the next line must carry."""
    body: int
    """How many frames follow the key line (each carries its own CRC-32)."""


class Maker(msgspec.Struct):
    """The members of a key that say which code made it, read first: the rest is this code's only then."""

    format: int
    fold: str


class Unusable(Exception):
    """Why a checkpoint cannot be used (one line, completing "checkpoint ... : ")."""


def silent(line: str) -> None:
    del line


class Checkpoints:
    """The checkpoints of one sessions directory."""

    def __init__(self, directory: Path, *, threshold: int = DEFAULT_THRESHOLD, note: Note = silent) -> None:
        self.directory = directory
        self.threshold = threshold
        self._note = note

    def read(self, journal: Path) -> SessionState:
        """The reduced state of the journal (raises what :func:`~tiny_agent.stores.journal.read_journal` raises)."""
        return self.fold(journal).state

    def fold(self, journal: Path, *, lean: bool = False, edges: bool = False, reader: bool = False) -> Fold:
        """A live fold of the journal's committed lines: from its checkpoint when one checks out, else from line 1.

        ``lean``: restored without the entries before the active context, which come back from the checkpoint
        when something asks for them (:class:`~tiny_agent.journal.state.Elder`): what writing the next turn needs.
        ``reader`` (with ``lean``, for ``replay``): a journal of at least :data:`SPILL_FROM` bytes with no usable
        checkpoint, or with one whose lean restore would decode more than that (an uncompacted session's active context
        is its whole transcript), is folded with its messages left in it, and leaves no checkpoint.
        ``edges`` (for writing the next turn): in the file the checkpoint was made from, with a tail too short to
        renew it, the prefix is checked at its edges instead of hashed in full (the module's docstring).
        """
        where = self.path_for(journal)
        if where is None:
            return fold_file(journal)
        fd = open_regular(journal)
        try:
            return self._fold(journal, where, fd, lean, edges, reader)
        finally:
            os.close(fd)

    def resumed(self, journal: Path) -> Fold | None:
        """The fold the journal's checkpoint holds, once every check passed; None otherwise (with a note if it failed one).

        For a reader that goes over every line anyway (``audit``): it reads
        the checkpointed lines without folding them again, and writes no
        checkpoint of its own.
        """
        where = self.path_for(journal)
        if where is None:
            return None
        fd = open_regular(journal)
        try:
            with collector_paused():
                start = self._resume(journal, where, fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return None if start is None else start.fold

    def path_for(self, journal: Path) -> Path | None:
        """Where the journal's checkpoint lives; None for a journal outside the sessions directory."""
        try:
            inside = os.path.samefile(journal.parent, self.directory)
        except OSError:
            return None
        return self.directory / CHECKPOINTS_DIR / (journal.stem + SUFFIX) if inside else None

    def _fold(self, journal: Path, where: Path, fd: int, lean: bool, edges: bool, reader: bool = False) -> Fold:
        size = os.fstat(fd).st_size
        with collector_paused():
            # A tail too short to renew the checkpoint needs no digest of the prefix to extend.
            held = SPILL_FROM if reader else None
            start = self._resume(journal, where, fd, size, lean, self.threshold if edges else 0, held)
            if start is None and lean and reader and size >= SPILL_FROM:
                return fold_spilled(journal)
            if start is None:
                fold = Fold()
                offset = 0
                prefix = PrefixDigest(hashlib.sha256()) if size >= self.threshold else None
            else:
                fold, offset = start.fold, start.offset
                prefix = None if start.digest is None else PrefixDigest(start.digest, start.offset)
            reduce_chunks(hashed(_chunks(fd, offset), prefix), fold)
            if prefix is not None and fold.committed_length - offset >= self.threshold:
                self._save(where, fold, prefix, fd)
        return fold

    # -- using a checkpoint ----------------------------------------------------------------

    def _resume(
        self, journal: Path, where: Path, fd: int, size: int, lean: bool = False, edges_below: int = 0, held: int | None = None
    ) -> Resumed | None:
        try:
            return _resumed(where, fd, size, lean, edges_below, held)
        except (FileNotFoundError, _HoldsTooMuch):
            return None
        except OSError as error:
            reason = f"cannot be read ({error.strerror or error})"
        except Unusable as unusable:
            reason = str(unusable)
        self._note(f"checkpoint of {journal.name} {reason}; folding the whole journal")
        return None

    # -- writing one ----------------------------------------------------------------------

    def _save(self, where: Path, fold: Fold, prefix: PrefixDigest, fd: int) -> None:
        """Write the fold's checkpoint; a fold that cannot be stored, or a directory that refuses it, only costs speed."""
        from tiny_agent.fold.snapshot import SNAPSHOT_FORMAT, SnapshotRefused, capture, snapshot_frames

        identity = fold_identity()
        if identity is None or prefix.length != fold.committed_length:
            return
        try:
            snapshot = capture(fold)
        except SnapshotRefused:
            return
        key = CheckpointKey(
            format=SNAPSHOT_FORMAT,
            fold=identity,
            session=fold.state.header.id,
            version=fold.version,
            length=fold.committed_length,
            lines=fold.lines,
            prefix=prefix.value(),
            file=_file_of(fd),
            edges=edges_digest(fd, fold.committed_length),
            chain=fold.chain if fold.profile.sealed else None,
            body=0,
        )
        _write_checkpoint(where, key, snapshot_frames(snapshot))


class Resumed(msgspec.Struct):
    fold: Fold
    offset: int
    """Where the journal's unread tail starts (the checkpoint's length)."""
    digest: hashlib._Hash | None
    """SHA-256 over the journal's first ``offset`` bytes, to extend over the tail (None: the prefix was not hashed)."""


def _resumed(where: Path, fd: int, size: int, lean: bool, edges_below: int = 0, held: int | None = None) -> Resumed:
    """The fold a checkpoint holds, once every check passed; raises :class:`Unusable` or OSError.

    A tail shorter than ``edges_below``, in the file the checkpoint was made from: the prefix's edges stand for the
    prefix (no digest then); else it is hashed in full.
    """
    with _open_checkpoint(where) as checkpoint:
        from tiny_agent.fold.snapshot import SNAPSHOT_FORMAT, SnapshotInvalid, SnapshotReader, restore

        identity = fold_identity()
        if identity is None:
            raise Unusable("cannot be checked (the fold's source is unreadable)")
        key, body_start = _key_of(checkpoint, Maker(format=SNAPSHOT_FORMAT, fold=identity))
        if key.length > size:
            raise Unusable(f"covers {key.length} bytes but the journal has {size} (truncated or replaced?)")
        if key.chain is not None and not _next_seal_carries(fd, key.length, size, key.chain):
            raise Unusable("does not match the journal (the next line's seal carries another chain)")
        changed = Unusable(f"does not match the journal (its first {key.length} bytes changed)")
        if size - key.length < edges_below and key.file == _file_of(fd):
            if edges_digest(fd, key.length) != key.edges:
                raise changed
            hashing = None
        else:
            hashing = Hashing(fd, key.length)
        reader = SnapshotReader()
        try:
            frames, older = _read_frames(checkpoint, body_start, reader, lean, held)
        finally:
            prefix = None if hashing is None else hashing.result()
    if frames != key.body:
        raise Unusable(f"is corrupt (it holds {frames} frames, its key says {key.body})")
    try:
        fold = restore(reader.snapshot(), older)
    except SnapshotInvalid as invalid:
        raise Unusable(f"is corrupt ({invalid})") from None
    if prefix is not None and "sha256:" + prefix.hexdigest() != key.prefix:
        raise changed
    if fold.committed_length != key.length or fold.lines != key.lines or fold.state.header.id != key.session:
        raise Unusable("is corrupt (its key and its snapshot disagree)")
    return Resumed(fold=fold, offset=key.length, digest=prefix)


def _key_of(fd: int, maker: Maker) -> tuple[CheckpointKey, int]:
    """The checkpoint's key, once its maker is this code (another version's key may have other members)."""
    head = os.pread(fd, KEY_SIZE, 0)
    if len(head) != KEY_SIZE or head[-1:] != b"\n":
        raise Unusable("is corrupt (no key line)")
    key = head.rstrip(b" \n")
    try:
        if msgspec.json.decode(key, type=Maker) != maker:
            raise Unusable("was made by another version of tiny-agent")
        return msgspec.json.decode(key, type=CheckpointKey), KEY_SIZE
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise Unusable(f"is corrupt (its key: {error})") from None


def _next_seal_carries(fd: int, start: int, size: int, chain: str) -> bool:
    """v3, cheaply: the line after the checkpoint ends with a seal carrying its chain (True when no such line is in reach)."""
    if start == size:
        return True
    probe = os.pread(fd, SEAL_PROBE, start)
    end = probe.find(b"\n")
    if end == -1:
        return True
    return chain.encode() in probe[max(0, end - 256) : end]


def _file_of(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _chunks(fd: int, offset: int) -> Iterator[bytes]:
    """The journal's bytes from ``offset`` on, in large chunks."""
    while chunk := os.pread(fd, CHUNK_SIZE, offset):
        offset += len(chunk)
        yield chunk


# -- files ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _open_checkpoint(where: Path) -> Iterator[int]:
    fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unusable("is not a regular file")
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


class _HoldsTooMuch(Exception):
    """A lean restore would hold more than its reader wants (an uncompacted session's active context is its whole
    transcript): the checkpoint is sound, but the reader does better without it."""


def _read_frames(fd: int, start: int, reader: SnapshotReader, lean: bool, held: int | None = None) -> tuple[int, _Older | None]:
    """Feed the checkpoint's frames to ``reader`` one at a time (lean: all but the older entries'); how many there are.

    ``held``: raise :class:`_HoldsTooMuch` rather than decode more than this many bytes of frames after the older part."""
    from tiny_agent.fold.snapshot import SnapshotInvalid

    size = os.fstat(fd).st_size
    count, position, older = 0, start, None
    try:
        while position < size:
            if count == 1 and lean:
                first = position
                for _ in range(reader.older_frames()):
                    position = _frame_end(fd, position, size)
                older = _Older(fd, first, position)
                count = reader.frames = 1 + reader.older_frames()
                if held is not None and size - position > held:
                    raise _HoldsTooMuch
                continue
            frame, position = _frame(fd, position, size)
            reader.feed(frame)
            count += 1
    except SnapshotInvalid as invalid:
        raise Unusable(f"is corrupt ({invalid})") from None
    return count, older


def _frame_end(fd: int, position: int, size: int) -> int:
    length = int.from_bytes(os.pread(fd, 4, position), "big")
    if position + 8 + length > size or length > FRAME_LIMIT:
        raise Unusable("is corrupt (a frame runs past its end)")
    return position + 8 + length


def _frame(fd: int, position: int, size: int) -> tuple[bytes, int]:
    """The frame at ``position`` (its length, its CRC-32, its bytes), checked; where the next one starts."""
    end = _frame_end(fd, position, size)
    crc = os.pread(fd, 4, position + 4)
    frame = os.pread(fd, end - position - 8, position + 8)
    if zlib.crc32(frame) != int.from_bytes(crc, "big"):
        raise Unusable("is corrupt (a frame's CRC-32 differs)")
    return frame, end


class _Older:
    """A lean restore's older part, read back from the checkpoint when the fold first needs it.

    Holds its own descriptor of the checkpoint (a newer checkpoint replaces the file, never these bytes),
    closed when the state no longer needs it.
    """

    def __init__(self, fd: int, start: int, end: int) -> None:
        self._fd = os.dup(fd)
        weakref.finalize(self, os.close, self._fd)
        self._start = start
        self._end = end

    def __call__(self) -> tuple[Older, list[AppliedEntry]]:
        from tiny_agent.fold.snapshot import SnapshotInvalid, decode_older

        try:
            return decode_older(self._frames())
        except (Unusable, SnapshotInvalid, OSError) as error:
            raise StorageError(f"the checkpoint's older part cannot be read back ({error})") from None

    def entries(self) -> Iterator[AppliedEntry]:
        """The older entries, one frame read and decoded at a time (what ``replay`` prints, never put in place)."""
        from tiny_agent.fold.snapshot import SnapshotInvalid, older_entries

        try:
            yield from older_entries(self._frames(skip=1))  # not the older books (a big frame): never read
        except (Unusable, SnapshotInvalid, OSError) as error:
            raise StorageError(f"the checkpoint's older part cannot be read back ({error})") from None

    def _frames(self, skip: int = 0) -> Iterator[bytes]:
        position = self._start
        for _ in range(skip):
            position = _frame_end(self._fd, position, self._end)
        while position < self._end:
            frame, position = _frame(self._fd, position, self._end)
            yield frame


def _write_checkpoint(where: Path, key: CheckpointKey, frames: Iterator[bytes]) -> None:
    """Write a checkpoint 0600 through a staging file, frame by frame, its key last; refusal only costs speed."""
    directory = where.parent
    staging = directory / f".{where.name}.{os.getpid()}.new"
    try:
        _private_directory(directory)
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(b" " * (KEY_SIZE - 1) + b"\n")
            count = 0
            for frame in frames:
                file.write(len(frame).to_bytes(4, "big") + zlib.crc32(frame).to_bytes(4, "big"))
                file.write(frame)
                count += 1
            file.seek(0)
            file.write(_key_line(msgspec.structs.replace(key, body=count)))
        os.replace(staging, where)
    except OSError:
        # A checkpoint is a cache, like the sessions index: a full or read-only directory only costs speed.
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)


def _key_line(key: CheckpointKey) -> bytes:
    encoded = msgspec.json.encode(key)
    if len(encoded) >= KEY_SIZE:
        raise OSError(0, "the checkpoint's key does not fit its room")
    return encoded + b" " * (KEY_SIZE - 1 - len(encoded)) + b"\n"


def _private_directory(directory: Path) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    if not stat.S_ISDIR(os.lstat(directory).st_mode):
        raise NotADirectoryError(f"{directory} is not a directory")


# -- identity and configuration -----------------------------------------------------------------

IDENTITY_MODULES: Final = (
    "errors.py",
    "journal/canonical.py",
    "journal/facts.py",
    "journal/json_profile.py",
    "journal/links.py",
    "journal/state.py",
    "journal/transcript.py",
    "stores/checkpoints.py",
)
"""Besides the fold package: the modules whose code decides what a fold (or a snapshot) holds."""


@functools.cache
def fold_identity() -> str | None:
    """A digest of the code that folds and snapshots (None when its source cannot be read: no checkpoints then).

    A checkpoint made by any other code is not read: a fold that changed
    may reduce the same bytes to a different state.
    """
    package = Path(__file__).parent.parent
    sources = sorted((package / "fold").glob("*.py")) + [package / name for name in IDENTITY_MODULES]
    digest = hashlib.sha256(f"{sys.version_info[:3]} msgspec {msgspec.__version__}".encode())
    try:
        for source in sources:
            digest.update(source.relative_to(package).as_posix().encode() + b"\0" + source.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()[:32]


def threshold_from(environ: Mapping[str, str]) -> int:
    """Bytes a fold must read before it leaves a checkpoint: ``$TINY_AGENT_CHECKPOINT_BYTES``, else 8 MiB."""
    configured = environ.get(THRESHOLD_ENV)
    if configured is None or configured == "":
        return DEFAULT_THRESHOLD
    try:
        threshold = int(configured)
    except ValueError:
        threshold = -1
    if threshold < 0:
        raise UsageError(f"{THRESHOLD_ENV} must be a whole number of bytes, not {configured!r}")
    return threshold
