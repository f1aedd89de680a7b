"""The git commit worked on (issue 28): a v3 snapshot's ``git`` {commit, dirty}, checked by the fold, outside the
configuration digest, shown by replay, audit and view, left out by ``export --v2``; absent outside a repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import replies
from test_replay_cli import call
from test_request_options import snapshot
from test_wire_e2e import only_session, run
from test_wire_e2e import workspace as workspace  # a fixture

from tiny_agent.agent.runtime import git_state
from tiny_agent.fold.contract import V3_SNAPSHOT_KEYS, Fault
from tiny_agent.fold.steps import new_configuration
from tiny_agent.journal.state import GitState
from tiny_agent.loopback import LoopbackServer
from tiny_agent.stores.journal import read_journal


def git(root: Path, *words: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *words]
    return subprocess.run(command, cwd=root, check=True, capture_output=True, text=True, timeout=30).stdout.strip()


def committed(root: Path) -> str:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return git(root, "rev-parse", "HEAD")


def test_the_state_is_the_commit_and_whether_the_tree_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert git_state(tmp_path) is None, "not a repository"
    git(tmp_path, "init", "-q")
    assert git_state(tmp_path) is None, "no commit yet"
    (tmp_path / "a.txt").write_text("a\n")
    commit = committed(tmp_path)
    (tmp_path / "sub").mkdir()
    assert git_state(tmp_path / "sub") == GitState(commit=commit, dirty=False)
    (tmp_path / "a.txt").write_text("b\n")
    assert git_state(tmp_path) == GitState(commit=commit, dirty=True)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert git_state(tmp_path) is None, "no git"


def test_the_member_is_checked_and_not_digested() -> None:
    plain = new_configuration(snapshot(), V3_SNAPSHOT_KEYS)
    recorded = new_configuration(snapshot(git={"commit": "a" * 40, "dirty": True}), V3_SNAPSHOT_KEYS)
    assert recorded.digest == plain.digest and recorded.snapshot.git == GitState(commit="a" * 40, dirty=True)
    assert new_configuration(snapshot(git={"commit": "b" * 64, "dirty": False}), V3_SNAPSHOT_KEYS).digest == plain.digest
    for bad in ({"commit": "a" * 40}, {"commit": "A" * 40, "dirty": True}, {"commit": "a" * 39, "dirty": False},
                {"commit": "a" * 40, "dirty": 0}, {"commit": 1, "dirty": True}, {"commit": "a" * 40, "dirty": True, "x": 1}, []):
        with pytest.raises(Fault, match="configurationSnapshot.git"):
            new_configuration(snapshot(git=bad), V3_SNAPSHOT_KEYS)
    with pytest.raises(Fault, match="git"):
        new_configuration(snapshot(git={"commit": "a" * 40, "dirty": True}))  # v2's members


def test_a_run_in_a_repository_records_its_commit_and_every_reader_shows_it(capsys, workspace: Path, tmp_path: Path) -> None:
    commit = committed(workspace)
    (workspace / "README.md").write_text("changed\n")
    with LoopbackServer([replies.answer("It prints hi.")]) as server:
        assert run(capsys, server)[0] == 0
    journal = only_session(workspace)
    last = read_journal(journal).lastSnapshot
    assert last is not None and last.git == GitState(commit=commit, dirty=True)
    shown = f"git: commit {commit[:12]}, with uncommitted changes"
    assert shown in call(capsys, "replay", str(journal))[1]
    assert f"{shown}, from attempt 1" in call(capsys, "audit", str(journal))[1]
    page = tmp_path / "page.html"
    assert call(capsys, "view", str(journal), "-o", str(page))[0] == 0
    assert f"commit {commit[:12]}, with uncommitted changes" in page.read_text()
    exported = tmp_path / "v2.jsonl"
    assert call(capsys, "export", "--v2", str(journal), "-o", str(exported))[0] == 0
    assert b'"git"' not in exported.read_bytes()
