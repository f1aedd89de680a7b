"""The reader fails closed on anything: only its own CorruptionError ever escapes.

Hypothesis feeds arbitrary bytes and random mutations of valid journals (byte
flips, truncations, deleted / duplicated / swapped lines, inserted keys).  For
sealed v3 journals it checks the stronger promise: whatever reduces is the
original transcript or a prefix of it cut at a line boundary.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from builders import write_tool_session
from conftest import conformance_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lines import join, split
from spec_example import example_bytes

from tiny_agent.errors import ERROR_CODES, CorruptionError
from tiny_agent.fold.lines import reduce_bytes, reduce_chunks

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid_journals() -> dict[str, bytes]:
    journals = {"spec-example": example_bytes(9)}
    manifest = conformance_dir() / "fixtures" / "manifest.json"
    for case in json.loads(manifest.read_text())["fixtures"]:
        expected = json.loads((manifest.parent / case["expected"]).read_text())
        data = (manifest.parent / case["file"]).read_bytes()
        if expected["ok"] and data.endswith(b"\n") and len(split(data)) > 3:
            journals[case["name"]] = data
    return journals


def _sealed_journal(runs: int) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "sealed.jsonl"
        write_tool_session(path, runs=runs)
        return path.read_bytes()


VALID = _valid_journals()
SEALED = _sealed_journal(3)
VALID["writer-v3"] = SEALED


def outcome(data: bytes) -> tuple[str, object]:
    """("ok", state json) or ("error", error json); anything else escaping fails the test."""
    try:
        state = reduce_bytes(data)
    except CorruptionError as error:
        assert error.code in ERROR_CODES
        assert error.line >= 1
        assert error.reason
        return "error", error.to_json()
    return "ok", state.to_json()


# -- mutations ----------------------------------------------------------------


def flip_byte(data: bytes, rng: random.Random) -> bytes:
    position = rng.randrange(len(data))
    return data[:position] + bytes([rng.randrange(256)]) + data[position + 1 :]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def delete_line(data: bytes, rng: random.Random) -> bytes:
    lines = split(data)
    del lines[rng.randrange(len(lines))]
    return join(lines)


def duplicate_line(data: bytes, rng: random.Random) -> bytes:
    lines = split(data)
    index = rng.randrange(len(lines))
    lines.insert(index, lines[index])
    return join(lines)


def swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = split(data)
    first, second = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[first], lines[second] = lines[second], lines[first]
    return join(lines)


def insert_key(data: bytes, rng: random.Random) -> bytes:
    """Add a member after a random ``{``: a new key, or one that may duplicate a neighbour."""
    lines = split(data)
    index = rng.randrange(len(lines))
    line = lines[index]
    openings = [position for position, byte in enumerate(line) if byte == ord("{")]
    if not openings:
        return data
    position = rng.choice(openings) + 1
    key = rng.choice([b"reasoning", b"kind", b"id", b"type", b"content", b"seq", b"role", b"x"])
    value = rng.choice([b"1", b'"v"', b"null", b"{}", b"[]"])
    lines[index] = line[:position] + b'"' + key + b'":' + value + b"," + line[position:]
    return join(lines)


def insert_raw_bytes(data: bytes, rng: random.Random) -> bytes:
    position = rng.randrange(len(data) + 1)
    noise = rng.choice([b"\r", b"\n", b"\xed\xa0\x80", b"\xff", b"\xef\xbb\xbf", b"\\u0000", b"\x00", b" ", b"[]"])
    return data[:position] + noise + data[position:]


MUTATIONS = [flip_byte, truncate, delete_line, duplicate_line, swap_lines, insert_key, insert_raw_bytes]


def mutate(data: bytes, seed: int, rounds: int) -> bytes:
    rng = random.Random(seed)
    for _ in range(rounds):
        if not data.endswith(b"\n") or len(data) < 2:
            return data
        data = rng.choice(MUTATIONS)(data, rng)
    return data


# -- properties ---------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_only_ever_raise_corruption(data):
    outcome(data)


@FUZZ
@given(st.lists(st.sampled_from([b"{", b"}", b"[", b"]", b'"kind"', b":", b",", b'"header"', b"2", b"\n", b'"', b"\\", b"null"]), max_size=60))
def test_json_shaped_noise_only_ever_raises_corruption(tokens):
    outcome(b"".join(tokens))


@FUZZ
@given(name=st.sampled_from(sorted(VALID)), seed=st.integers(0, 2**32), rounds=st.integers(1, 3))
def test_mutated_journals_only_ever_raise_corruption(name, seed, rounds):
    outcome(mutate(VALID[name], seed, rounds))


@FUZZ
@given(seed=st.integers(0, 2**32), rounds=st.integers(1, 3))
def test_a_mutated_sealed_journal_is_rejected_or_its_sealed_lines_are_the_original(seed, rounds):
    """The seal chain's guarantee (session-v3): every committed line but the last is covered by the seal after it.

    The last committed line of an open tail is covered by nothing (a crashed writer leaves one), so an
    accepted mutation may differ from the original there, and only there.
    """
    mutated = mutate(SEALED, seed, rounds)
    kind, _ = outcome(mutated)
    if kind == "ok":
        committed = mutated[: mutated.rfind(b"\n") + 1].split(b"\n")[:-1]
        assert committed[:-1] == SEALED.split(b"\n")[: len(committed) - 1]


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_line_boundary_prefix_of_a_valid_journal_reduces(name):
    lines = split(VALID[name])
    for count in range(1, len(lines) + 1):
        reduce_bytes(join(lines[:count]))


@FUZZ
@given(name=st.sampled_from(sorted(VALID)), seed=st.integers(0, 2**32), mutated=st.booleans(), cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_reading_in_chunks_agrees_with_reading_at_once(name, seed, mutated, cuts):
    data = mutate(VALID[name], seed, 2) if mutated else VALID[name]
    positions = sorted({cut % (len(data) + 1) for cut in cuts})
    chunks = [data[start:end] for start, end in zip([0, *positions], [*positions, len(data)], strict=True)]
    try:
        whole = ("ok", reduce_bytes(data).to_json())
    except CorruptionError as error:
        whole = ("error", error.to_json())
    try:
        pieces = ("ok", reduce_chunks(chunks).to_json())
    except CorruptionError as error:
        pieces = ("error", error.to_json())
    assert pieces == whole
