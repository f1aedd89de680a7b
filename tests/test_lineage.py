"""Journals from journals: the v3 header's links, upgrade (v2 to v3), fork, and export (exact, or as v2).

Round trips are judged by the fold itself: our reducer reduces a v2 file
exactly as the v2 contract says (the conformance fixtures check that), so an
export that reduces to the same transcript, active context, usage and
operation is one the reference reducer accepts with the same state.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import replies
from builders import SNAPSHOT, SNAPSHOT_DIGEST, RunWriter, new_writer, write_tool_session
from conftest import conformance_dir, isolated_workspace
from test_replay_cli import call

from tiny_agent.errors import CorruptionError, UsageError
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.journal.facts import EntryFact, HeaderLine, RecordFact, StepAttempt, UsageFact, UserEntry
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.transcript import Usage, UserMessage
from tiny_agent.loopback import LoopbackServer
from tiny_agent.oversight.lineage import MIN_ENTRY_PREFIX, chain_through, copied, find_fork_point
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.files.disk import journal_name, session_id_of
from tiny_agent.stores.journal import JournalWriter, committed_lines, read_journal

CREATED = 1_787_371_200_000


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n\nA project that prints hi.\n")


def store_dir(workspace: Path) -> Path:
    return workspace.parent / "sessions"


def journals(workspace: Path) -> list[Path]:
    return sorted(store_dir(workspace).glob("*.jsonl"))


def stored(workspace: Path, version: int = 3) -> tuple[Path, JournalWriter]:
    """A writer on a new journal named the store's way."""
    directory = store_dir(workspace)
    directory.mkdir(mode=0o700, exist_ok=True)
    session_id = uuid7(CREATED)
    path = directory / journal_name(session_id, CREATED)
    return path, new_writer(path, version, session_id=session_id)


def facts_of(path: Path) -> list[dict[str, Any]]:
    found = []
    for number, line in committed_lines(path):
        if number > 1:
            value = json.loads(line)
            found.extend(value if isinstance(value, list) else [value])
    return found


def header_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])


def shape(path: Path) -> dict[str, Any]:
    """What a v2 copy must keep: the conformance shape but for where the bytes end."""
    state = read_journal(path).to_json()
    del state["repairedLength"]
    state["usage"].pop("reasoning", None)  # v3's counter, left out by export --v2 (its tokens are in output)
    return state


def without(facts: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [fact for fact in facts if fact["kind"] not in kinds]


def but_seq(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in fact.items() if key != "seq"} for fact in facts]


def export_v2(capsys, source: Path, target: Path) -> str:
    code, out, err = call(capsys, "export", "--v2", str(source), "-o", str(target))
    assert code == 0, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("· left out: ")
    return err


def assert_round_trip(capsys, source: Path, target: Path) -> str:
    """export --v2, then: a v2 header with the same id, no v3 facts, and the same state."""
    said = export_v2(capsys, source, target)
    header = header_of(target)
    assert header["version"] == 2
    assert set(header) == {"kind", "version", "id", "createdAt", "cwd", "provider", "model", "environmentIdentity"}
    assert header["id"] == read_journal(source).header.id
    exported = facts_of(target)
    assert [fact["seq"] for fact in exported] == list(range(1, len(exported) + 1))
    assert not [fact for fact in exported if fact["kind"] in ("raw", "seal")]
    assert max((fact["record"].get("attempt", 1) for fact in exported if fact["kind"] == "record"), default=1) <= 2
    assert shape(target) == shape(source)
    return said


# -- the header's links ---------------------------------------------------------------------------

ZERO = "sha256:" + "0" * 64


def header_line(**members: Any) -> bytes:
    value = {"kind": "header", "version": 3, "id": uuid7(), "createdAt": 1, "cwd": "/w", "provider": "p", "model": "m",
             "environmentIdentity": "e", **members}
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def header_error(**members: Any) -> tuple[str, str]:
    with pytest.raises(CorruptionError) as refused:
        reduce_bytes(header_line(**members))
    assert (refused.value.line, refused.value.seq) == (1, None)
    return refused.value.code, refused.value.reason


def test_a_v3_header_may_name_its_origin_or_its_parent() -> None:
    origin = {"path": "/old/a.jsonl", "length": 626, "sha256": ZERO}
    parent = {"session": uuid7(), "line": 7, "chain": ZERO}
    state = reduce_bytes(header_line(origin=origin, parent=parent))
    assert msgspec.to_builtins(state.origin) == origin
    assert msgspec.to_builtins(state.parent) == parent
    assert "origin" not in state.to_json()["header"], "the conformance shape is unchanged"


def test_a_v2_header_stays_exactly_v2() -> None:
    origin = {"path": "/a", "length": 1, "sha256": ZERO}
    assert header_error(version=2, origin=origin) == ("INVALID_HEADER", 'header has unknown key "origin"')
    assert header_error(version=2, parent={}) == ("INVALID_HEADER", 'header has unknown key "parent"')
    # A version nobody supports is held to the v2 list too, so the unknown member is found first (as a v2 reader finds it).
    assert header_error(version=4, origin=origin)[0] == "INVALID_HEADER"
    assert header_error(version=4)[0] == "UNSUPPORTED_VERSION"


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ({"origin": []}, "header origin is not a JSON object"),
        ({"origin": {"path": "/a", "length": 1, "sha256": ZERO, "mode": 1}}, 'header origin has unknown key "mode"'),
        ({"origin": {"path": "", "length": 1, "sha256": ZERO}}, 'header origin path is not a non-empty string: ""'),
        ({"origin": {"path": "/a", "length": -1, "sha256": ZERO}}, "header origin length is not a safe non-negative integer: -1"),
        ({"origin": {"path": "/a", "length": 1.0, "sha256": ZERO}}, "header origin length is not a safe non-negative integer: 1.0"),
        ({"origin": {"path": "/a", "length": 1}}, "header origin sha256 is not a sha256 digest: null"),
        ({"parent": {"session": "x", "line": 1, "chain": ZERO}}, 'header parent session is not a UUIDv7: "x"'),
        ({"parent": {"session": uuid7(), "line": 0, "chain": ZERO}}, "header parent line is not a safe integer >= 1: 0"),
        ({"parent": {"session": uuid7(), "line": 2, "chain": "sha256:ABC"}}, 'header parent chain is not a sha256 digest: "sha256:ABC"'),
        ({"parent": None}, "header parent is not a JSON object"),
    ],
)
def test_a_bad_link_is_an_invalid_header(members: dict[str, Any], reason: str) -> None:
    assert header_error(**members) == ("INVALID_HEADER", reason)


# -- upgrade ---------------------------------------------------------------------------------------


def v2_session(workspace: Path, *, runs: int = 1, open_run: bool = False) -> Path:
    path, writer = stored(workspace, version=2)
    run = RunWriter(writer)
    for number in range(runs):
        run.start(f"question {number}")
        run.attempt()
        asked = run.call_tools([("read", '{"path":"README.md"}')])
        run.run_tool(asked, 0, "# Example\n")
        run.attempt()
        run.finish(run.answer(f"answer {number}"))
    if open_run:
        run.start("and one more")
    writer.close()
    return path


def test_upgrade_copies_every_fact_exactly_but_for_seq_and_leaves_the_v2_file_alone(capsys, workspace: Path) -> None:
    v2 = v2_session(workspace, runs=2, open_run=True)
    before = v2.read_bytes()
    code, out, err = call(capsys, "upgrade", str(v2))
    assert code == 0, err
    assert v2.read_bytes() == before and oct(v2.stat().st_mode & 0o777) == "0o600"
    assert not list(store_dir(workspace).glob("*.lock")) and not list(store_dir(workspace).glob(".*.new"))
    (made,) = [path for path in journals(workspace) if path != v2]
    assert out.startswith(f"{v2} upgraded to session ") and out.endswith(f" ({made})\n")
    header = header_of(made)
    assert header["version"] == 3 and header["id"] == session_id_of(made) != read_journal(v2).header.id
    assert header["origin"] == {
        "path": os.path.realpath(v2),
        "length": len(before),
        "sha256": "sha256:" + hashlib.sha256(before).hexdigest(),
    }
    assert but_seq(without(facts_of(made), "seal")) == but_seq(facts_of(v2))
    original, copy = shape(v2), shape(made)
    del original["header"], copy["header"]
    assert copy == original
    verdict = verify(made)
    assert verdict.status == "ok", "the copy is closed with a seal"
    assert f"upgrade of {os.path.realpath(v2)}: its first {len(before)} bytes are as copied" in verdict.detail


def test_upgrading_the_same_bytes_again_finds_the_first_upgrade(capsys, workspace: Path) -> None:
    v2 = v2_session(workspace)
    first = json.loads(call(capsys, "upgrade", str(v2), "--json")[1])
    again = json.loads(call(capsys, "upgrade", str(v2), "--json")[1])
    assert (first["already"], again["already"]) == (False, True)
    assert again["session"] == first["session"]
    assert len(journals(workspace)) == 2


def test_upgrade_refuses_what_it_cannot_copy(capsys, workspace: Path) -> None:
    path, writer = stored(workspace)
    RunWriter(writer).start("hi")
    writer.close()
    code, _, err = call(capsys, "upgrade", str(path))
    assert code == 2 and err.startswith("USAGE: ") and "already a v3 journal" in err
    v2 = v2_session(workspace)
    holder = JournalWriter.open(v2)
    try:
        code, _, err = call(capsys, "upgrade", str(v2))
    finally:
        holder.close()
    assert code == 75 and err.startswith("LOCKED: ")
    broken = v2.with_name(v2.name.replace(v2.name[:8], "19990101"))
    broken.write_bytes(v2.read_bytes() + b"[]\n")
    code, _, err = call(capsys, "upgrade", str(broken))
    assert code == 65 and err.startswith("EMPTY_TRANSACTION at line ")
    assert len(journals(workspace)) == 3, "nothing was made"


def accepted_fixtures() -> list[Path]:
    manifest = json.loads((conformance_dir() / "fixtures" / "manifest.json").read_text())
    expected = {case["file"]: json.loads((conformance_dir() / "fixtures" / case["expected"]).read_text()) for case in manifest["fixtures"]}
    return [conformance_dir() / "fixtures" / name for name, result in sorted(expected.items()) if result["ok"]]


@pytest.mark.parametrize("fixture", accepted_fixtures(), ids=lambda path: path.stem)
def test_every_accepted_fixture_upgrades_and_exports_back_to_itself(capsys, tmp_path: Path, fixture: Path) -> None:
    """v2 -> v3 -> v2: the same facts (as JSON values) and the same state."""
    source = read_journal(fixture)
    header = HeaderLine(
        version=3, id=uuid7(), createdAt=CREATED, cwd=source.header.cwd, provider=source.header.provider,
        model=source.header.model, environmentIdentity=source.header.environmentIdentity,
    )
    lines = list(copied(committed_lines(fixture), header, CREATED))
    upgraded_path = tmp_path / "up.jsonl"
    upgraded_path.write_bytes(b"".join(line + b"\n" for line in lines))
    up = shape(upgraded_path)
    original = shape(fixture)
    del up["header"], original["header"]
    assert up == original
    back = tmp_path / "back.jsonl"
    export_v2(capsys, upgraded_path, back)
    assert but_seq(facts_of(back)) == but_seq(facts_of(fixture))
    assert [fact["seq"] for fact in facts_of(back)] == [fact["seq"] for fact in facts_of(fixture)]
    again = shape(back)
    del again["header"]
    assert again == original


# -- export ------------------------------------------------------------------------------------------


def test_export_of_the_demo_session(capsys, workspace: Path, tmp_path: Path) -> None:
    assert call(capsys, "demo")[0] == 0
    (demo,) = journals(workspace)
    said = assert_round_trip(capsys, demo, tmp_path / "demo-v2.jsonl")
    raws = len([fact for fact in facts_of(demo) if fact["kind"] == "raw"])
    seals = len([fact for fact in facts_of(demo) if fact["kind"] == "seal"])
    reasoning = len([fact for fact in facts_of(demo) if fact["kind"] == "usage" and "reasoning" in fact["usage"]])
    assert reasoning > 0
    assert said == (
        f"· left out: {raws} raw fact(s) (the responses as received); {seals} seal fact(s); "
        f"the reasoning counter of {reasoning} usage fact(s) (its tokens stay in output)\n"
    )


def test_export_without_v2_is_the_exact_bytes(capsys, workspace: Path, tmp_path: Path) -> None:
    path, writer = stored(workspace)
    RunWriter(writer).start("hi")
    writer.close()
    with path.open("ab") as file:
        file.write(b'{"kind":"rec')  # a torn tail: exact means every byte
    code, out, _ = call(capsys, "export", str(path))
    assert code == 0 and out.encode() == path.read_bytes()
    target = tmp_path / "copy.jsonl"
    assert call(capsys, "export", str(path), "-o", str(target))[0] == 0
    assert target.read_bytes() == path.read_bytes()
    code, _, err = call(capsys, "export", str(path), "-o", str(target))
    assert code == 2 and "already exists" in err
    code, _, err = call(capsys, "export", "--v2", str(path), "-o", str(target))
    assert code == 2 and "already exists" in err and target.read_bytes() == path.read_bytes()


def test_export_to_stdout(capsys, workspace: Path, tmp_path: Path) -> None:
    path = store_dir(workspace) / "s.jsonl"
    store_dir(workspace).mkdir()
    write_tool_session(path, runs=1)
    code, out, err = call(capsys, "export", "--v2", str(path))
    assert code == 0 and "left out" in err
    target = tmp_path / "out.jsonl"
    target.write_text(out)
    assert shape(target) == shape(path)


def retried_session(workspace: Path, attempts: int, usage_on_every_attempt: bool) -> Path:
    """A run whose one model step took ``attempts`` attempts (transport retries), then answered."""
    path, writer = stored(workspace)
    run = RunWriter(writer)
    run.start("hello")
    run.attempt()
    first = run.attempt_id
    for number in range(2, attempts + 1):
        run.raw('{"error":"overloaded"}', status=503)
        if usage_on_every_attempt:
            writer.commit([UsageFact(id="", operationId=run.operation_id, attemptId=run.attempt_id, usage=Usage(5, 0, 0, 0))])
        run.attempt_id = uuid7()
        writer.commit([RecordFact(id="", record=StepAttempt(
            operationId=run.operation_id, stepId=run.step_id, attemptId=run.attempt_id, stepKind="assistant", attempt=number,
            contextThroughEntryId=writer.state.contextBoundary, configurationSnapshot=SNAPSHOT,  # type: ignore[arg-type]
            configurationDigest=SNAPSHOT_DIGEST,
        ))])
    run.raw('{"choices":[]}')
    run.finish(run.answer("hi there"))
    # Usage may name any attempt of the operation, even later: one more for the first.
    writer.commit([UsageFact(id="", operationId=run.operation_id, attemptId=first, usage=Usage(1, 1, 0, 0))])
    writer.close()
    return path


@pytest.mark.parametrize("attempts", [2, 3, 5, 16])
def test_export_folds_transport_retries_into_two_attempts(capsys, workspace: Path, tmp_path: Path, attempts: int) -> None:
    source = retried_session(workspace, attempts, usage_on_every_attempt=True)
    said = assert_round_trip(capsys, source, tmp_path / "v2.jsonl")
    exported = facts_of(tmp_path / "v2.jsonl")
    numbers = [fact["record"]["attempt"] for fact in exported if fact["kind"] == "record" and fact["record"]["type"] == "stepAttempt"]
    assert numbers == ([1, 2] if attempts >= 2 else [1])
    last = [fact for fact in facts_of(source) if fact["kind"] == "record" and fact["record"]["type"] == "stepAttempt"][-1]
    kept = [fact for fact in exported if fact["kind"] == "record" and fact["record"]["type"] == "stepAttempt"][-1]
    assert kept["id"] == last["id"] and kept["record"]["attemptId"] == last["record"]["attemptId"]
    if attempts > 2:
        dropped = attempts - 2
        assert f"transport retries of 1 step(s) ({dropped} middle attempt(s) dropped, {dropped} of their usage fact(s) moved" in said
    else:
        assert "transport retries" not in said


def test_export_of_a_crashed_and_resumed_session(capsys, workspace: Path, tmp_path: Path) -> None:
    from test_crash import ScriptedModel, tiny

    script = ScriptedModel()
    with LoopbackServer([script] * 100) as server:
        crashed = tiny(workspace, server, "run", "What is this project?", "--allow-bash", failpoint="after-commit:tool-result")
        assert crashed.returncode == -9
        (path,) = journals(workspace)
        resumed = tiny(workspace, server, "resume", str(path), "--allow-bash")
        assert resumed.returncode == 0, resumed.stderr
    assert_round_trip(capsys, path, tmp_path / "v2.jsonl")


def compacted_session(capsys, workspace: Path) -> Path:
    """Two runs against the loopback, then compacted: the session's journal."""
    script = [replies.read(), replies.answer("one"), replies.answer("two"), replies.answer("Summary of it all.")]
    base = ["--model", "m", "--durability", "process", "--no-stream"]
    with LoopbackServer(script) as server:
        assert call(capsys, "run", "first", "--base-url", server.base_url, *base)[0] == 0
        assert call(capsys, "run", "second", "--continue", "--base-url", server.base_url, *base)[0] == 0
        (path,) = journals(workspace)
        code, _, err = call(capsys, "compact", str(path), "--keep-tokens", "7", "--base-url", server.base_url, "--model", "m", "--no-stream")
    assert code == 0, err
    return path


def test_export_of_a_compacted_session(capsys, workspace: Path, tmp_path: Path) -> None:
    path = compacted_session(capsys, workspace)
    assert read_journal(path).activeContext[0].content.startswith("[Compacted history]")
    assert_round_trip(capsys, path, tmp_path / "v2.jsonl")


@pytest.mark.parametrize("flags", [(), ("--v2",)], ids=["bytes", "v2"])
def test_export_into_the_sessions_directory_is_refused(capsys, workspace: Path, flags: tuple[str, ...]) -> None:
    assert call(capsys, "demo")[0] == 0
    (demo,) = journals(workspace)
    target = store_dir(workspace) / "copy.jsonl"
    code, out, err = call(capsys, "export", str(demo), *flags, "-o", str(target))
    assert (code, out) == (2, "")
    assert err.startswith(f"USAGE: {target} is in the sessions directory ")
    assert "fork" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()
    assert journals(workspace) == [demo]


def test_export_of_a_fork(capsys, workspace: Path, tmp_path: Path) -> None:
    assert call(capsys, "demo")[0] == 0
    (demo,) = journals(workspace)
    finished = [fact["seq"] for fact in facts_of(demo) if fact["kind"] == "record" and fact["record"]["type"] == "operationFinished"]
    assert call(capsys, "fork", str(demo), "--at", str(finished[0]))[0] == 0
    (fork,) = [path for path in journals(workspace) if path != demo]
    said = assert_round_trip(capsys, fork, tmp_path / "v2.jsonl")
    assert said.rstrip().endswith(f"the header's fork of {read_journal(demo).header.id} at line {header_of(fork)['parent']['line']}")


def test_export_refuses_an_open_attempt_whose_response_is_on_record(capsys, workspace: Path, tmp_path: Path) -> None:
    path, writer = stored(workspace)
    run = RunWriter(writer)
    run.start("hi")
    run.attempt()
    run.raw('{"choices":[]}')
    writer.close()
    code, _, err = call(capsys, "export", "--v2", str(path), "-o", str(tmp_path / "v2.jsonl"))
    assert code == 75 and err.startswith("BUSY: ") and "a response on record" in err
    assert not (tmp_path / "v2.jsonl").exists()
    # Without a response on record, the open run is exported as it is.
    other, writer = stored(workspace)
    RunWriter(writer).start("hi")
    writer.close()
    assert_round_trip(capsys, other, tmp_path / "open.jsonl")


# -- fork ----------------------------------------------------------------------------------------------


def test_fork_at_a_seq_keeps_the_parents_facts_and_their_seqs(capsys, workspace: Path) -> None:
    store_dir(workspace).mkdir()
    parent_path = store_dir(workspace) / journal_name(uuid7(CREATED), CREATED)
    write_tool_session(parent_path, runs=2, session_id=session_id_of(parent_path))
    facts = facts_of(parent_path)
    end_of_first = next(fact["seq"] for fact in facts if fact["kind"] == "record" and fact["record"]["type"] == "operationFinished")
    code, out, err = call(capsys, "fork", str(parent_path), "--at", str(end_of_first), "--json")
    assert code == 0, err
    made = json.loads(out)
    fork = Path(made["path"])
    parent = made["parent"]
    assert parent["session"] == read_journal(parent_path).header.id
    line = parent["line"]
    assert chain_through(committed_lines(parent_path), line) == (parent["chain"], line)
    kept = [fact for fact in facts if fact["seq"] <= end_of_first]
    assert without(facts_of(fork), "seal") == without(kept, "seal"), "the same facts, with the same seqs"
    state = read_journal(fork)
    assert state.sealed and state.operation.__class__.__name__ == "IdleOperation"
    assert len(state.transcript) == 4
    assert verify(fork).status == "ok"
    assert "the parent still matches there" in verify(fork).detail
    code, out, _ = call(capsys, "replay", str(fork))
    assert f"forked from session {parent['session']} after its line {line}" in out


def test_fork_at_an_entry_by_id_or_prefix(capsys, workspace: Path) -> None:
    parent_path = store_dir(workspace) / journal_name(uuid7(CREATED), CREATED)
    store_dir(workspace).mkdir(exist_ok=True)
    write_tool_session(parent_path, runs=2, session_id=session_id_of(parent_path))
    final = [fact for fact in facts_of(parent_path) if fact["kind"] == "entry" and fact["entry"]["message"].get("content") == "File 0 says hi."]
    (entry,) = final
    by_id = find_fork_point(committed_lines(parent_path), entry["id"])
    by_tail = find_fork_point(committed_lines(parent_path), "entry:" + entry["id"].rsplit("-", 1)[1][:8])
    assert by_id.line == by_tail.line and by_id.named == f"entry {entry['id']}"
    # The line that settles the answer is inside its run (the finish comes next): refused, naming what would do.
    code, _, err = call(capsys, "fork", str(parent_path), "--at", entry["id"])
    assert code == 2 and err.startswith("USAGE: ") and "is inside run" in err
    keep = err.split("--at ")[1].split()[0]
    assert call(capsys, "fork", str(parent_path), "--at", keep)[0] == 0


def test_fork_inside_an_open_operation_names_the_points_before_and_after(capsys, workspace: Path) -> None:
    parent_path = store_dir(workspace) / journal_name(uuid7(CREATED), CREATED)
    store_dir(workspace).mkdir(exist_ok=True)
    write_tool_session(parent_path, runs=3, session_id=session_id_of(parent_path))
    facts = facts_of(parent_path)
    second_prompt = [fact for fact in facts if fact["kind"] == "entry" and fact["entry"]["message"].get("role") == "user"][1]
    code, _, err = call(capsys, "fork", str(parent_path), "--at", str(second_prompt["seq"]))
    assert code == 2
    assert "to keep it (the line that finishes it)" in err and "to branch before it" in err
    before = int(err.split("--at ")[2].split()[0])
    assert call(capsys, "fork", str(parent_path), "--at", str(before))[0] == 0
    assert len(journals(workspace)) == 2


def test_fork_names_what_it_cannot_find_or_tell_apart(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    writer = new_writer(path)
    tail = "0004" + uuid7()[-8:]
    twins = [uuid7()[:24] + "abcd" + uuid7()[-8:], uuid7()[:24] + "abcd" + uuid7()[-8:]]
    for entry_id in [uuid7()[:24] + tail, *twins]:
        writer.commit([EntryFact(id=entry_id, entry=UserEntry(message=UserMessage(content="hi")))])
    writer.close()
    lines = list(committed_lines(path))
    with pytest.raises(UsageError, match="write seq:0004 or entry:0004"):
        find_fork_point(lines, "0004")
    assert find_fork_point(lines, "seq:4").named == "seq 4"
    assert find_fork_point(lines, "entry:0004").line == 2
    with pytest.raises(UsageError, match="fits 2 entries"):
        find_fork_point(lines, "abcd")
    with pytest.raises(UsageError, match=f"at least {MIN_ENTRY_PREFIX} characters"):
        find_fork_point(lines, "ab")
    with pytest.raises(Exception, match="no fact with that seq and no entry with that id"):
        find_fork_point(lines, "99")


def test_a_fork_of_a_v2_parent_links_the_sha256_of_its_first_lines(capsys, workspace: Path) -> None:
    v2 = v2_session(workspace, runs=2)
    end_of_first = next(fact["seq"] for fact in facts_of(v2) if fact["kind"] == "record" and fact["record"]["type"] == "operationFinished")
    made = json.loads(call(capsys, "fork", str(v2), "--at", str(end_of_first), "--json")[1])
    line = made["parent"]["line"]
    prefix = b"".join(line_bytes + b"\n" for number, line_bytes in committed_lines(v2) if number <= line)
    assert made["parent"]["chain"] == "sha256:" + hashlib.sha256(prefix).hexdigest()
    assert but_seq(without(facts_of(Path(made["path"])), "seal")) == but_seq([f for f in facts_of(v2) if f["seq"] <= end_of_first])


def test_verify_checks_the_link_when_the_parent_is_there(capsys, workspace: Path) -> None:
    v2 = v2_session(workspace, runs=2)
    end_of_first = next(fact["seq"] for fact in facts_of(v2) if fact["kind"] == "record" and fact["record"]["type"] == "operationFinished")
    fork = Path(json.loads(call(capsys, "fork", str(v2), "--at", str(end_of_first), "--json")[1])["path"])
    assert verify(fork).status == "ok"
    v2.write_bytes(v2.read_bytes().replace(b"question 0", b"question O"))
    changed = verify(fork)
    assert changed.status == "corrupt" and changed.error is not None and changed.error["code"] == "PARENT_MISMATCH"
    code, out, err = call(capsys, "verify", str(fork))
    assert code == 65 and "no longer matches the fork" in out
    v2.unlink()
    gone = verify(fork)
    assert gone.status == "ok" and "the parent is not here, so the link is not checked" in gone.detail


def test_sessions_show_lineage(capsys, workspace: Path) -> None:
    v2 = v2_session(workspace, runs=1)
    upgraded_to = json.loads(call(capsys, "upgrade", str(v2), "--json")[1])
    upgrade = Path(upgraded_to["path"])
    end = next(fact["seq"] for fact in facts_of(upgrade) if fact["kind"] == "record" and fact["record"]["type"] == "operationFinished")
    code, out, err = call(capsys, "fork", upgraded_to["handle"], "--at", str(end), "--json")
    assert code == 0, err
    forked_to = json.loads(out)
    rows = {row["session"]: row for row in json.loads(call(capsys, "sessions", "--all", "--json")[1])}
    fork_row = rows[forked_to["session"]]
    assert fork_row["parent"] == upgraded_to["session"]
    assert fork_row["lineage"] == f"fork of {upgraded_to['handle']} at line {forked_to['parent']['line']}"
    assert rows[upgraded_to["session"]]["lineage"] == f"upgrade of {os.path.realpath(v2)}"
    assert rows[read_journal(v2).header.id]["lineage"] is None
    table = call(capsys, "sessions", "--all")[1].splitlines()
    assert table[0].split()[-1] == "lineage"
    assert any(line.endswith(f"fork of {upgraded_to['handle']} at line {forked_to['parent']['line']}") for line in table)



def assert_spilled_export_is_the_held_one(capsys, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """export --v2 with almost every message and fact ID left in files (1 message, 2 IDs held) gives the same bytes."""
    from tiny_agent.fold import spilled

    held = tmp_path / "held.jsonl"
    export_v2(capsys, path, held)
    monkeypatch.setattr(spilled, "RECENT", 1)
    monkeypatch.setattr(spilled, "FLUSH", 2)
    left = tmp_path / "left.jsonl"
    export_v2(capsys, path, left)
    assert left.read_bytes() == held.read_bytes()


def test_export_of_a_compacted_session_whose_messages_are_left_in_files_gives_the_same_bytes(
    capsys, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export --v2 folds its source spilled and checks its copy against a spooled file, which its compaction reads
    back: with almost every message and fact ID left there, the same bytes as with all of them held."""
    assert_spilled_export_is_the_held_one(capsys, compacted_session(capsys, workspace), tmp_path, monkeypatch)


def test_export_and_fork_of_a_session_whose_messages_are_left_in_files_give_the_same_bytes(
    capsys, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export --v2 and fork fold their source spilled and check their copy against a spooled file: with almost every
    message and fact ID left there, they give the same bytes as with all of them held."""
    store_dir(workspace).mkdir()
    parent_path = store_dir(workspace) / journal_name(uuid7(CREATED), CREATED)
    write_tool_session(parent_path, runs=3, session_id=session_id_of(parent_path))
    assert_spilled_export_is_the_held_one(capsys, parent_path, tmp_path, monkeypatch)
    facts = facts_of(parent_path)
    code, out, err = call(capsys, "fork", str(parent_path), "--at", str(facts[-1]["seq"]), "--json")
    assert code == 0, err
    fork = Path(json.loads(out)["path"])
    assert without(facts_of(fork), "seal") == without(facts, "seal")
    assert verify(fork).status == "ok"
