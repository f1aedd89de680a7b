"""Stores fail closed, in one line with a documented exit code: a corrupt session is listed as corrupt (its header
shown when intact) and never skipped by ``--continue``; an unreadable sessions directory is PERMISSION (77).

Each listing test runs on both stores; without a PostgreSQL server its run skips, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from builders import RunWriter
from conftest import PROJECT_ROOT, StoreUnderTest

from tiny_agent.stores.base import choose_store

RAW = '{"id":"gen-1","choices":[{"message":{"role":"assistant","content":"Done."}}]}'


def tiny(where: StoreUnderTest, cwd: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "XDG_"))}
    env.update(where.env, PYTHONPATH=str(PROJECT_ROOT), HOME=str(where.root), XDG_CONFIG_HOME=str(where.root / "config"))
    command = [*prefix, sys.executable, "-m", "tiny_agent", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def two_sessions(where: StoreUnderTest) -> tuple[Path, str, str]:
    """A directory with an older and a newer session made in it, both idle: (the directory, older id, newer id)."""
    work = where.root / "work"
    work.mkdir()
    store = choose_store(None, where.url or str(where.root / "sessions"))
    made = []
    for prompt in ("older", "newer"):
        writer = store.create(cwd=os.path.realpath(work), provider="custom", model="m", environment_identity="e")
        run = RunWriter(writer)
        run.start(prompt)
        run.attempt()
        run.raw(RAW)
        run.finish(run.answer("Done."))
        writer.close()
        made.append(writer.state.header.id)
    store.close()
    return work, made[0], made[1]


def corrupt_the_prompt(where: StoreUnderTest, session_id: str) -> None:
    """Change one letter of the session's first prompt (line 2) by hand: the next line's seal no longer matches."""
    if where.url is None:
        (path,) = (where.root / "sessions").glob(f"*_{session_id}.jsonl")
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"newer"', b'"nawer"', 1))
        return
    with psycopg.connect(where.url, autocommit=True) as conn:
        changed = conn.execute(
            "UPDATE tiny_agent_lines SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), '\"newer\"', '\"nawer\"'), 'UTF8') "
            "WHERE session_id = %s AND line = 2",
            (session_id,),
        )
        assert changed.rowcount == 1


def test_a_corrupt_session_with_an_intact_header_is_listed_as_corrupt_here(store_under_test: StoreUnderTest) -> None:
    work, older, newer = two_sessions(store_under_test)
    corrupt_the_prompt(store_under_test, newer)
    listed = tiny(store_under_test, work, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(row["session"], row["status"]) for row in rows] == [(newer, "corrupt"), (older, "idle")]
    assert rows[0]["error"].startswith("SEAL_MISMATCH at line 3")
    assert (rows[0]["model"], rows[0]["cwd"]) == ("m", os.path.realpath(work)), "the header is intact, so it is shown"
    table = tiny(store_under_test, work, "sessions")
    assert table.returncode == 0 and " corrupt" in table.stdout and "? ? ?" not in table.stdout


def test_continue_refuses_a_corrupt_newest_session_naming_it_and_its_error(store_under_test: StoreUnderTest) -> None:
    work, older, newer = two_sessions(store_under_test)
    corrupt_the_prompt(store_under_test, newer)
    before = [path.read_bytes() for path in store_under_test.journals()]
    refused = tiny(store_under_test, work, "run", "go on", "--continue", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert refused.returncode == 65, refused.stderr
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("SEAL_MISMATCH at line 3"), refused.stderr
    assert newer in refused.stderr and "--continue" in refused.stderr and older not in refused.stderr
    assert [path.read_bytes() for path in store_under_test.journals()] == before, "nothing was written to either session"


# -- an unreadable sessions directory ------------------------------------------------------------------


def unprivileged(probe: Path) -> tuple[str, ...]:
    """What runs a command so that a file's mode binds it: nothing as a user; as root, setpriv dropping the two
    capabilities that read past modes (``probe`` is an unreadable directory to check that it worked)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a directory cannot be made unreadable here")
    dropped = "-dac_override,-dac_read_search"
    prefix = (setpriv, f"--bounding-set={dropped}", f"--inh-caps={dropped}")
    check = subprocess.run([*prefix, sys.executable, "-c", f"import os; os.listdir({str(probe)!r})"], capture_output=True)
    if check.returncode == 0:
        pytest.skip("setpriv could not drop root's capability to read any directory (no CAP_SETPCAP?)")
    return prefix


@pytest.mark.parametrize("command", [("sessions",), ("sessions", "--all"), ("replay", "abcd"), ("verify", "--all")])
def test_an_unreadable_sessions_directory_is_permission_not_internal(tmp_path: Path, command: tuple[str, ...]) -> None:
    where = StoreUnderTest("file", tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o700)
    sessions.chmod(0)
    try:
        done = tiny(where, tmp_path, *command, prefix=unprivileged(sessions))
    finally:
        sessions.chmod(0o700)
    assert (done.returncode, done.stdout) == (77, ""), done.stderr
    assert done.stderr == f"PERMISSION: sessions directory {sessions}: Permission denied\n"


def test_an_unreadable_journal_is_a_row_and_verify_all_goes_on(tmp_path: Path) -> None:
    where = StoreUnderTest("file", tmp_path)
    work, older, newer = two_sessions(where)
    (hidden,) = (tmp_path / "sessions").glob(f"*_{newer}.jsonl")
    hidden.chmod(0)
    try:
        prefix = unprivileged(hidden)
        listed = tiny(where, work, "sessions", "--all", "--json", prefix=prefix)
        verified = tiny(where, work, "verify", "--all", "--json", prefix=prefix)
    finally:
        hidden.chmod(0o600)
    assert listed.returncode == 0, listed.stderr
    assert [(row["session"], row["status"]) for row in json.loads(listed.stdout)] == [(newer, "unreadable"), (older, "idle")]
    assert verified.returncode == 0, verified.stderr
    assert {verdict["path"]: verdict["status"] for verdict in json.loads(verified.stdout)} == {
        str(hidden): "unreadable",
        str(next((tmp_path / "sessions").glob(f"*_{older}.jsonl"))): "ok",
    }
