"""The fold's fast path against its reference path, and the proof its decoder relies on.

The reference path (``Fold(fast_path=False)``) is the definition of what the
fold accepts and which error it reports; the fast path may only be faster.
Differential properties: on every journal here -- valid ones, conformance
fixtures, and thousands of mutated journals -- both paths give the same state
JSON or the same error code, line and seq.  The duplicate-key proof of
``ProvenLineDecoder`` is tested through its lemma: re-encoding never makes a
line longer, and a line with a repeated key always re-encodes shorter.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import RunWriter, new_writer, write_tool_session
from conftest import conformance_dir, shared_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lines import dumps, join, reseal, split
from test_fuzz import VALID, mutate

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import Fold, contract, reduce_chunks
from tiny_agent.fold.typed import LineWire, MessageEntry
from tiny_agent.journal.facts import RawFact, RawResponse
from tiny_agent.journal.json_profile import ProvenLineDecoder

DIFFERENTIAL = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(data: bytes, *, fast_path: bool) -> tuple[str, Any]:
    try:
        state = reduce_chunks((data,), Fold(fast_path=fast_path))
    except CorruptionError as error:
        return "error", error.to_json()
    return "ok", state.to_json()


def assert_paths_agree(data: bytes) -> tuple[str, Any]:
    reference = outcome(data, fast_path=False)
    assert outcome(data, fast_path=True) == reference
    return reference


def _generated_journal(runs: int) -> bytes:
    """A journal of the shared benchmark generator (another writer: its own key order)."""
    path = shared_dir() / "bench" / "gen_v2_session.py"
    spec = importlib.util.spec_from_file_location("gen_v2_session", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "generated.jsonl"
        module.generate(str(out), runs, 2, 300, 7)
        return out.read_bytes()


def _writer_journal(version: int) -> bytes:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "written.jsonl"
        write_tool_session(path, runs=3, version=version)
        return path.read_bytes()


def _retrying_journal() -> bytes:
    """v3 transport retries: three attempts at one step, raw bodies with redactions and cut-off streams."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "retries.jsonl"
        writer = new_writer(path)
        run = RunWriter(writer)

        def raw(status: int, **members: Any) -> None:
            response = RawResponse(status=status, contentType="application/json", body='{"choices":[]}', **members)
            writer.commit([RawFact(id="", operationId=run.operation_id, attemptId=run.attempt_id, raw=response)])

        run.start("hi")
        run.attempt()
        raw(503, incomplete="stream cut off")
        run.attempt(2)
        raw(429, redactions=1)
        run.attempt(3)
        raw(200, redactions=2, incomplete="read timeout")
        asked = run.call_tools([("read", '{"path":"README.md"}')])
        run.run_tool(asked, 0, "contents")
        run.attempt()
        raw(200)
        run.finish(run.answer("done"))
        writer.close()
        return path.read_bytes()


JOURNALS = {
    **VALID,
    "generated-v2": _generated_journal(3),
    "writer-v2": _writer_journal(2),
    "writer-v3-retries": _retrying_journal(),
}


# -- the fast path is taken --------------------------------------------------------


class _CountingFold(Fold):
    """Counts the lines the reference path read whole, and the facts no fast twin took (by kind or record type)."""

    def __init__(self) -> None:
        super().__init__(fast_path=True)
        self.reference_lines = 0
        self.reference_facts: Counter[str] = Counter()

    def _transaction(self, value: Any, start: int = 0) -> None:
        self.reference_lines += 1
        super()._transaction(value, start)

    def _fact(self, fact: Any) -> None:
        self.reference_facts[fact["record"]["type"] if fact["kind"] == "record" else fact["kind"]] += 1
        super()._fact(fact)


TWINLESS = {"raw"}
"""The kinds and record types that have no fast twin: the fast path hands them to their reference rules."""


@pytest.mark.parametrize("name", ["generated-v2", "writer-v2", "writer-v3"])
def test_ordinary_journals_take_the_fast_path(name):
    """Every line decodes into the fast path's shapes, and the twins take every fact of theirs but one.

    The one is a session's first ``stepAttempt``, whose snapshot the reference
    rule validates.  Otherwise the differential tests would prove little.
    """
    fold = _CountingFold()
    state = reduce_chunks((JOURNALS[name],), fold)
    assert state.factCount > 20
    assert fold.reference_lines == 0
    twinned = {kind: count for kind, count in fold.reference_facts.items() if kind not in TWINLESS}
    assert twinned == {"stepAttempt": 1}


ENTRY_STRUCTS = {"user": contract.USER_ENTRY_KEYS, "assistant": contract.ASSISTANT_ENTRY_KEYS, "tool": contract.STARTED_RESULT_KEYS}
"""The members each role's entry may have, as the entry Structs declare them (journal/facts.py)."""
SAMPLE_MEMBERS = {
    "stepId": "0190f5e2-7c00-7a00-8a00-0000000000aa",
    "attemptId": "0190f5e2-7c00-7a00-8a00-0000000000ab",
    "stopReason": "stop",
    "toolName": "read",
    "toolStartedId": "0190f5e2-7c00-7a00-8a00-0000000000ac",
    "result": {"type": "success"},
    "assistantEntryId": "0190f5e2-7c00-7a00-8a00-0000000000ad",
    "toolIndex": 0,
}


@pytest.mark.parametrize("role", sorted(ENTRY_STRUCTS))
def test_each_entry_twin_declines_every_member_its_entry_struct_lacks(role):
    """The fast entry rules write out which members a role's entry may not have: checked against the Structs."""
    lines = split(JOURNALS["writer-v2"])
    index = next(
        position
        for position, line in enumerate(lines[1:], 1)
        for fact in (lambda value: value if isinstance(value, list) else [value])(json.loads(line))
        if fact["kind"] == "entry" and fact["entry"]["message"]["role"] == role
    )
    members = contract.member_names(MessageEntry) - ENTRY_STRUCTS[role]
    assert members and members <= set(SAMPLE_MEMBERS)
    for member in sorted(members):
        value = json.loads(lines[index])
        fact = next(fact for fact in (value if isinstance(value, list) else [value]) if fact["kind"] == "entry")
        fact["entry"][member] = SAMPLE_MEMBERS[member]
        assert assert_paths_agree(join([*lines[:index], dumps(value)]))[0] == "error", member


# -- differential properties -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_valid_journals_reduce_alike(name):
    kind, _ = assert_paths_agree(JOURNALS[name])
    assert kind == "ok"


def test_every_conformance_fixture_reduces_alike_and_as_expected():
    manifest = conformance_dir() / "fixtures" / "manifest.json"
    for case in json.loads(manifest.read_text())["fixtures"]:
        data = (manifest.parent / case["file"]).read_bytes()
        expected = json.loads((manifest.parent / case["expected"]).read_text())
        kind, result = assert_paths_agree(data)
        assert (kind == "ok") == expected["ok"], case["name"]


@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_every_line_prefix_reduces_alike(name):
    lines = split(JOURNALS[name])
    for count in range(1, len(lines) + 1):
        assert_paths_agree(join(lines[:count]))


@DIFFERENTIAL
@given(name=st.sampled_from(sorted(JOURNALS)), seed=st.integers(0, 2**32), rounds=st.integers(1, 3))
def test_byte_mutated_journals_reduce_alike(name, seed, rounds):
    assert_paths_agree(mutate(JOURNALS[name], seed, rounds))


# Value-level mutations reach the semantic rules: the line still parses, keeps
# its shape, and (for v3) is resealed, so the fold gets past framing and seals.


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, member in value.items():
            found += _leaves(member, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _leaves(item, (*path, index))
    return found


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _scalars(data: bytes) -> list[Any]:
    pool: list[Any] = []
    for line in split(data):
        value = json.loads(line)
        pool += [_get(value, path) for path in _leaves(value) if not isinstance(_get(value, path), (dict, list))]
    return pool


_ODD_VALUES = [0, 1, 2, -1, 2**53, 1.5, "", " ", "\u3000\n", "x", None, True, [], {}, "sha256:" + "0" * 64, "stop",
               "toolUse", "length", "error", "synthetic", "never", "compaction", "failed", "aborted", "truncated", "run",
               "assistant", "interrupted"]


def mutate_values(data: bytes, rng: random.Random, edits: int) -> bytes:
    lines = split(data)
    sealed = json.loads(lines[0]).get("version") == 3
    pool = _scalars(data) + _ODD_VALUES
    for _ in range(edits):
        index = rng.randrange(len(lines))
        value = json.loads(lines[index])
        paths = [path for path in _leaves(value) if path]
        if not paths:
            continue
        path = rng.choice(paths)
        parent = _get(value, path[:-1])
        action = rng.randrange(5)
        if action == 4 and isinstance(parent[path[-1]], str):
            parent[path[-1]] = rng.choice(["", " ", "\u3000\n", "\t"])
        elif action in (0, 4):
            parent[path[-1]] = rng.choice(pool)
        elif action == 1 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == 2 and isinstance(parent, dict):
            items = list(parent.items())
            rng.shuffle(items)
            parent.clear()
            parent.update(items)
        else:
            other = rng.randrange(len(lines))
            lines[index], lines[other] = lines[other], lines[index]
            continue
        lines[index] = dumps(value)
    mutated = join(lines)
    return reseal(mutated) if sealed else mutated


@DIFFERENTIAL
@given(name=st.sampled_from(sorted(JOURNALS)), seed=st.integers(0, 2**32), edits=st.integers(1, 3))
def test_value_mutated_journals_reduce_alike(name, seed, edits):
    assert_paths_agree(mutate_values(JOURNALS[name], random.Random(seed), edits))


# Fact-level mutations: drop, repeat (under fresh IDs or the same ones) and move
# transactions or single facts, then renumber every seq and reseal, so the fold
# gets past seq and seal checks to the rules about what may follow what.


# What each record reserves: a repeated record under fresh IDs gets fresh ones
# here too, or the reservation would fail first and mask the rule under test.
_RESERVED_MEMBERS = {
    "runStarted": ("operationId",),
    "compactionStarted": ("operationId", "resultEntryId"),
    "stepAttempt": ("stepId", "attemptId"),
    "toolStarted": ("resultEntryId",),
}


def _refresh_ids(fact: Any, rng: random.Random) -> None:
    if not isinstance(fact, dict):
        return
    fact["id"] = _fresh_id(rng)
    record = fact.get("record")
    if isinstance(record, dict):
        for member in _RESERVED_MEMBERS.get(record.get("type"), ()):  # type: ignore[arg-type]
            if member in record:
                record[member] = _fresh_id(rng)


def _fresh_id(rng: random.Random) -> str:
    return (
        f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-7{rng.getrandbits(12):03x}-"
        f"{rng.choice('89ab')}{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    )


def mutate_facts(data: bytes, rng: random.Random, edits: int) -> bytes:
    lines = split(data)
    sealed = json.loads(lines[0]).get("version") == 3
    body = [json.loads(line) for line in lines[1:]]
    transactions = [value if isinstance(value, list) else [value] for value in body]
    arrays = [isinstance(value, list) for value in body]
    for _ in range(edits):
        if not transactions:
            break
        index = rng.randrange(len(transactions))
        action = rng.randrange(5)
        if action == 0:
            del transactions[index], arrays[index]
        elif action in (1, 2):
            copy = json.loads(json.dumps(transactions[index]))
            if action == 1:
                for fact in copy:
                    _refresh_ids(fact, rng)
            target = index + 1 if rng.random() < 0.5 else rng.randrange(len(transactions) + 1)
            transactions.insert(target, copy)
            arrays.insert(target, arrays[index] or len(copy) > 1)
        elif action == 3:
            target = rng.randrange(len(transactions))
            transactions.insert(target, transactions.pop(index))
            arrays.insert(target, arrays.pop(index))
        elif len(transactions[index]) > 1:
            del transactions[index][rng.randrange(len(transactions[index]))]
    seq = 0
    out = [lines[0]]
    for facts, array in zip(transactions, arrays, strict=True):
        for fact in facts:
            if isinstance(fact, dict) and isinstance(fact.get("seq"), int):
                seq += 1
                fact["seq"] = seq
        out.append(dumps(facts if array or len(facts) != 1 else facts[0]))
    mutated = join(out)
    return reseal(mutated) if sealed else mutated


@DIFFERENTIAL
@given(name=st.sampled_from(sorted(JOURNALS)), seed=st.integers(0, 2**32), edits=st.integers(1, 3))
def test_fact_mutated_journals_reduce_alike(name, seed, edits):
    assert_paths_agree(mutate_facts(JOURNALS[name], random.Random(seed), edits))


@DIFFERENTIAL
@given(name=st.sampled_from(sorted(JOURNALS)), seed=st.integers(0, 2**32))
def test_fact_and_value_mutated_journals_reduce_alike(name, seed):
    rng = random.Random(seed)
    assert_paths_agree(mutate_values(mutate_facts(JOURNALS[name], rng, 1), rng, 1))


def _finish(lines: list[bytes]) -> bytes:
    data = join(lines)
    return reseal(data) if json.loads(lines[0]).get("version") == 3 else data


ORDINARY = ("generated-v2", "writer-v3", "writer-v3-retries")
FIRST_LINES = 24
"""The exhaustive edits below cover a journal's first two runs (later runs repeat them)."""

_ENUMS = [
    ("stop", "toolUse", "length"),
    ("success", "error", "synthetic"),
    ("safe", "never"),
    ("normal", "truncated"),
    ("completed", "failed", "aborted"),
    ("run", "compaction"),
    ("assistant", "compaction"),
    ("user", "assistant", "tool"),
]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def _leaf_edits(leaf: Any, siblings: list[Any], rng: random.Random) -> list[Any]:
    if type(leaf) is int:
        return [leaf + 1, 2**53 - 1]
    if type(leaf) is not str:
        return []
    edits: list[Any] = ["", " "]
    if _UUID.fullmatch(leaf):
        edits.append(_fresh_id(rng))
        edits += [other for other in siblings if type(other) is str and other != leaf and _UUID.fullmatch(other)]
    for group in _ENUMS:
        if leaf in group:
            edits += [word for word in group if word != leaf]
    return edits


def _renumbered(header: bytes, body: list[Any]) -> bytes:
    """Lines from decoded transactions, seqs renumbered 1, 2, ... and (v3) resealed."""
    seq = 0
    lines = [header]
    for item in body:
        for fact in item if isinstance(item, list) else [item]:
            seq += 1
            fact["seq"] = seq
        lines.append(dumps(item))
    return _finish(lines)


@pytest.mark.parametrize("name", ORDINARY)
def test_every_single_leaf_edit_reduces_alike(name):
    """Each value changed, one at a time: every rule about a value gets its turn.

    Strings blanked, integers bumped or maxed, IDs replaced by a fresh one or a
    sibling member's, enumerated words by their siblings.
    """
    rng = random.Random(7)
    lines = split(JOURNALS[name])[:FIRST_LINES]
    for index in range(1, len(lines)):
        value = json.loads(lines[index])
        for path in _leaves(value)[1:]:
            parent = _get(value, path[:-1])
            siblings = list(parent.values()) if isinstance(parent, dict) else []
            for member in _leaf_edits(_get(value, path), siblings, rng):
                copy = json.loads(lines[index])
                _get(copy, path[:-1])[path[-1]] = member
                assert_paths_agree(_finish([*lines[:index], dumps(copy), *lines[index + 1 :]]))


@pytest.mark.parametrize("name", ORDINARY)
def test_every_transaction_dropped_repeated_or_reversed_reduces_alike(name):
    """What may not be missing, happen twice (under fresh IDs) or come in another order within a line."""
    rng = random.Random(7)
    lines = split(JOURNALS[name])[:FIRST_LINES]
    for index in range(1, len(lines)):
        body = [json.loads(line) for line in lines[1:]]
        position = index - 1
        dropped = body[:position] + body[position + 1 :]
        assert_paths_agree(_renumbered(lines[0], json.loads(json.dumps(dropped))))
        copy = json.loads(lines[index])
        for fact in copy if isinstance(copy, list) else [copy]:
            _refresh_ids(fact, rng)
        repeated = body[: position + 1] + [copy] + body[position + 1 :]
        assert_paths_agree(_renumbered(lines[0], json.loads(json.dumps(repeated))))
        if isinstance(body[position], list) and len(body[position]) > 1:
            reversed_body = [*body[:position], body[position][::-1], *body[position + 1 :]]
            assert_paths_agree(_renumbered(lines[0], json.loads(json.dumps(reversed_body))))


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"kind":"record","seq":1,"id":"0190f5e2-7c00-7a00-8a00-000000000010","timestamp":1,"record":{"type":'
        b'"toolStarted","operationId":"a","stepId":"b","assistantEntryId":"c","toolIndex":0,"toolCallId":"d",'
        b'"toolName":"e","arguments":{"x":' + b"[" * 50_000 + b"]" * 50_000 + b'},"replay":"safe","replayKey":"k",'
        b'"environmentIdentity":"w","resultEntryId":"f"}}',
    ],
)
def test_json_nested_too_deeply_fails_closed_on_both_paths(line):
    """msgspec raises RecursionError past its depth limit; the reader still answers with a CorruptionError."""
    data = split(JOURNALS["writer-v2"])[0] + b"\n" + line + b"\n"
    assert assert_paths_agree(data) == ("error", {"code": "MALFORMED_JSON", "line": 2})


def test_the_writer_folds_alike_line_by_line():
    """The writer applies one line per commit; both paths end in the same state and chain."""
    lines = split(JOURNALS["writer-v3"])
    folds = [Fold(fast_path=True), Fold(fast_path=False)]
    for fold in folds:
        fold.apply_header(lines[0])
        for line in lines[1:]:
            fold.apply_line(line)
    fast, reference = folds
    assert fast.state.to_json() == reference.state.to_json()
    assert (fast.chain, fast.next_seq, fast.state.sealed) == (reference.chain, reference.next_seq, reference.state.sealed)
    assert fast.state.entries == reference.state.entries
    assert fast.state.contextBoundary == reference.state.contextBoundary


# -- the duplicate-key proof -----------------------------------------------------------


def test_msgspec_writes_every_character_in_its_shortest_json_form():
    """The proof's string step: no character re-encodes longer than any legal form of it."""
    short_escapes = {0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x22, 0x5C}
    for start in range(0, 0x110000, 0x10000):
        characters = [chr(code) for code in range(start, start + 0x10000) if not 0xD800 <= code <= 0xDFFF]
        shortest = sum(
            2 if ord(ch) in short_escapes else 6 if ord(ch) < 0x20 else len(ch.encode()) for ch in characters
        )
        assert len(msgspec.json.encode("".join(characters))) == shortest + 2


_DECODER = ProvenLineDecoder(LineWire)
_TYPED = msgspec.json.Decoder(LineWire, float_hook=lambda text: (_ for _ in ()).throw(ValueError(text)))


def _has_duplicate_key(line: bytes) -> bool:
    def unique(pairs: list) -> dict:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise KeyError("duplicate")
        return dict(pairs)

    try:
        json.loads(line, object_pairs_hook=unique)
    except KeyError:
        return True
    except ValueError:  # not JSON at all: no object to repeat a key in
        return False
    return False


def _all_lines() -> list[bytes]:
    return [line for data in JOURNALS.values() for line in split(data)[1:]]


LINES = _all_lines()


def _duplicate_a_member(line: bytes, rng: random.Random) -> bytes:
    """Repeat one member of one object of the line (same key; same or another value), maybe spaced out."""
    value = json.loads(line)
    objects = [path for path in _leaves(value) if isinstance(_get(value, path), dict) and _get(value, path)]
    if not objects:
        return line
    target = _get(value, rng.choice(objects))
    key = rng.choice(list(target))
    text = dumps(value)
    member = json.dumps(key, ensure_ascii=False).encode() + b":" + rng.choice(
        [dumps(target[key]), b"1", b'"x"', b"null", b"1e9", b"1E+300", b"0.5"]
    )
    needle = json.dumps(key, ensure_ascii=False).encode() + b":"
    position = text.find(needle)
    separator = rng.choice([b",", b" ,", b", "])
    return text[:position] + member + separator + text[position:]


def _respell(line: bytes, rng: random.Random) -> bytes:
    """Ways to write the same value longer or shorter: escapes, exponents, whitespace, key order."""
    choice = rng.randrange(4)
    if choice == 0:
        return line.replace(b'"a', b'"\\u0061', 1)
    if choice == 1:
        return line.replace(b":", b": ", 1)
    if choice == 2:
        return line.replace(b"1", b"1.0", 1)
    try:
        value = json.loads(line)
    except ValueError:  # an earlier respelling broke the line; it stays broken
        return line
    objects = [path for path in _leaves(value) if isinstance(_get(value, path), dict)]
    target = _get(value, rng.choice(objects)) if objects else {}
    items = list(target.items())
    rng.shuffle(items)
    target.clear()
    target.update(items)
    return dumps(value)


@settings(max_examples=600, deadline=None)
@given(index=st.integers(0, len(LINES) - 1), seed=st.integers(0, 2**32), respellings=st.integers(0, 3), duplicate=st.booleans())
def test_reencoding_never_grows_a_line_and_shrinks_one_with_a_repeated_key(index, seed, respellings, duplicate):
    rng = random.Random(seed)
    line = LINES[index]
    if duplicate:
        line = _duplicate_a_member(line, rng)
    for _ in range(respellings):
        line = _respell(line, rng)
    try:
        value = _TYPED.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        assert _DECODER.decode(line) is None
        return
    encoded = msgspec.json.encode(value)
    assert len(encoded) <= len(line)
    if _has_duplicate_key(line):
        assert len(encoded) < len(line)
        assert _DECODER.decode(line) is None


def test_the_line_type_keeps_the_proofs_preconditions():
    """Walks every type the fast decoder can produce (wire.py's and those it borrows from state.py and transcript.py).

    The length proof needs: no float member; no member encoded that the line
    may lack (a default is UNSET, or the Struct omits defaults); a tagged
    Struct only as a member of a union (where msgspec requires the tag).
    """
    import msgspec.inspect as inspect

    seen: set[int] = set()

    def walk(info: Any, in_union: bool = False) -> None:
        if id(info) in seen:
            return
        seen.add(id(info))
        assert not isinstance(info, inspect.FloatType), "a float member could re-encode longer"
        if isinstance(info, inspect.UnionType):
            for member in info.types:
                walk(member, in_union=True)
        elif isinstance(info, (inspect.ListType, inspect.DictType)):
            walk(info.item_type if isinstance(info, inspect.ListType) else info.value_type)
        elif isinstance(info, inspect.StructType):
            assert info.tag_field is None or in_union, f"{info.cls.__name__} has a tag msgspec would not require"
            config = info.cls.__struct_config__
            for field in info.fields:
                if not field.required:
                    assert field.default is msgspec.UNSET or config.omit_defaults, (
                        f"{info.cls.__name__}.{field.name} would be encoded although the line may lack it"
                    )
                walk(field.type)
        elif isinstance(info, inspect.Metadata):
            walk(info.type)

    walk(inspect.type_info(LineWire))
    assert len(seen) > 20


def test_every_line_of_the_ordinary_journals_is_proven():
    for name in ("generated-v2", "writer-v2", "writer-v3"):
        for line in split(JOURNALS[name])[1:]:
            assert _DECODER.decode(line) is not None, (name, line[:120])


@pytest.mark.parametrize(
    "line",
    [
        # A tag-less message would re-encode longer (msgspec adds the tag) unless tags are required.
        b'{"kind":"entry","seq":1,"id":"0190f5e2-7c00-7a00-8a00-000000000010","timestamp":1,'
        b'"entry":{"type":"message","message":{"content":"hi"}}}',
        # A float in an untyped member could re-encode longer (1e9 -> 1000000000.0).
        b'{"kind":"record","seq":1,"id":"0190f5e2-7c00-7a00-8a00-000000000010","timestamp":1,"record":{"type":'
        b'"toolStarted","operationId":"a","stepId":"b","assistantEntryId":"c","toolIndex":0,"toolCallId":"d",'
        b'"toolName":"e","arguments":{"x":1e9},"replay":"safe","replayKey":"k","environmentIdentity":"w","resultEntryId":"f"}}',
    ],
)
def test_what_could_grow_a_line_is_refused(line):
    assert _DECODER.decode(line) is None


def test_a_duplicate_hidden_behind_a_float_is_refused():
    """The compensation the float hook exists for: +9 bytes from 1e9, -9 from a repeated member."""
    line = (
        b'{"kind":"record","seq":1,"id":"0190f5e2-7c00-7a00-8a00-000000000010","timestamp":1,"record":{"type":'
        b'"toolStarted","operationId":"a","stepId":"b","assistantEntryId":"c","toolIndex":0,"toolCallId":"d",'
        b'"toolName":"e","arguments":{"x":1e9,"yyyy":0,"yyyy":0},"replay":"safe","replayKey":"k",'
        b'"environmentIdentity":"w","resultEntryId":"f"}}'
    )
    untyped = msgspec.json.decode(line, type=Any)
    assert _has_duplicate_key(line)
    assert _DECODER.decode(line) is None
    assert untyped["record"]["arguments"] == {"x": 1e9, "yyyy": 0}
    assert len(msgspec.json.encode(untyped)) == len(line)

