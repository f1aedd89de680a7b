"""Project instructions: AGENTS.md files and skills in the system prompt, their digests in the snapshot, audit, view, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import SNAPSHOT, RunWriter, new_writer
from conftest import PROJECT_ROOT
from lines import dumps, edit_line, join, reseal, split
from test_toolbox import within

from tiny_agent.agent.configuration import Configuration
from tiny_agent.agent.instructions import AGENTS_PREAMBLE, SKILLS_PREAMBLE, Instructions, load_instructions, user_skills_folder
from tiny_agent.agent.recovery import configuration_differences, describe_block
from tiny_agent.agent.tools.toolbox import ToolBox
from tiny_agent.errors import ConfigError, CorruptionError
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.journal.canonical import canonical_digest, sha256_digest
from tiny_agent.journal.facts import RecordFact, StepAttempt
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.state import InstructionDigest
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.view.model import build_view
from tiny_agent.view.session_page import session_page


def digest(text: str) -> str:
    return sha256_digest(text.encode())


def skill(folder: Path, name: str, front: str, body: str = "Do it well.\n") -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\n{front}\n---\n{body}")
    return path


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A repository whose working directory is two levels down, with AGENTS.md at the root, in between and here."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("above the repository: never read\n")
    (tmp_path / "repo" / "AGENTS.md").write_text("Use tabs.\n")
    (tmp_path / "repo" / "pkg").mkdir()
    (tmp_path / "repo" / "pkg" / "AGENTS.md").write_text("Run make test.\n\n")
    work = tmp_path / "repo" / "pkg" / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("Be brief.\n")
    return work


# -- what is offered, in which order and format ------------------------------------------------------


def test_agents_files_from_the_repository_root_down_in_a_marked_section(repo: Path) -> None:
    loaded = load_instructions(repo, None)
    assert loaded.section == (
        "<project-instructions>\n"
        f"{AGENTS_PREAMBLE}\n\n"
        '<agents-md path="../../AGENTS.md">\nUse tabs.\n</agents-md>\n\n'
        '<agents-md path="../AGENTS.md">\nRun make test.\n</agents-md>\n\n'
        '<agents-md path="AGENTS.md">\nBe brief.\n</agents-md>\n'
        "</project-instructions>"
    )
    assert loaded.offered == [
        InstructionDigest("../../AGENTS.md", digest("Use tabs.\n")),
        InstructionDigest("../AGENTS.md", digest("Run make test.\n\n")),
        InstructionDigest("AGENTS.md", digest("Be brief.\n")),
    ]


def test_without_a_repository_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("outside\n")
    (tmp_path / "work").mkdir()
    assert load_instructions(tmp_path / "work", None) == Instructions()
    (tmp_path / "work" / "AGENTS.md").write_text("inside\n")
    assert [item.path for item in load_instructions(tmp_path / "work", None).offered] == ["AGENTS.md"]


def test_skills_offer_name_description_and_path_only(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    user = user_skills_folder({"XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")})
    assert user == tmp_path / "home" / ".config" / "tiny-agent" / "skills"
    skill(user, "pdf", "name: pdf-forms\ndescription: 'Fill PDF forms: text fields and checkboxes.'", body="SECRET BODY\n")
    skill(repo / ".tiny-agent" / "skills", "release", "description: >\n  Cut a release:\n  tag, build, upload.")
    skill(repo.parent.parent / ".tiny-agent" / "skills", "bare", "owner: someone")
    loaded = load_instructions(repo, user)
    section = loaded.section
    assert "SECRET BODY" not in section
    assert section.endswith(
        f"{SKILLS_PREAMBLE}\n\n"
        "- pdf-forms: Fill PDF forms: text fields and checkboxes. (~/.config/tiny-agent/skills/pdf/SKILL.md)\n"
        "- bare: (no description) (../../.tiny-agent/skills/bare/SKILL.md)\n"
        "- release: Cut a release: tag, build, upload. (.tiny-agent/skills/release/SKILL.md)\n"
        "</project-instructions>"
    )
    assert [item.path for item in loaded.offered][3:] == [
        "~/.config/tiny-agent/skills/pdf/SKILL.md", "../../.tiny-agent/skills/bare/SKILL.md", ".tiny-agent/skills/release/SKILL.md",
    ]
    assert loaded.offered[3].digest == sha256_digest((user / "pdf" / "SKILL.md").read_bytes())


def test_read_reaches_an_offered_skill_and_nothing_else_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    user = tmp_path / "home" / "skills"
    skill(user, "pdf", "description: PDFs", body="the body\n")
    (user / "pdf" / "notes.md").write_text("not offered\n")
    work = tmp_path / "work"
    work.mkdir()
    loaded = load_instructions(work, user)
    toolbox = ToolBox(work, readable=loaded.readable)
    assert within(5, lambda: toolbox.execute("read", {"path": "~/skills/pdf/SKILL.md"})).content.endswith("---\nthe body\n")
    for path in ("~/skills/pdf/notes.md", "../home/skills/pdf/SKILL.md", str(user / "pdf" / "SKILL.md")):
        outcome = within(5, lambda path=path: toolbox.execute("read", {"path": path}))  # type: ignore[misc]
        assert outcome.ok is False, path
    assert within(5, lambda: toolbox.execute("list", {"path": "~/skills"})).ok is False


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"caf\xe9\n", "AGENTS.md: not UTF-8 text"),
        (b"x" * (64 * 1024 + 1), "AGENTS.md: larger than 64 KiB"),
        (None, "AGENTS.md: is a FIFO, not a regular file"),
    ],
)
def test_an_unusable_instruction_file_is_a_configuration_error(tmp_path: Path, content: bytes | None, why: str) -> None:
    if content is None:
        os.mkfifo(tmp_path / "AGENTS.md")
    else:
        (tmp_path / "AGENTS.md").write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        within(5, lambda: load_instructions(tmp_path, None))
    assert str(raised.value) == f"CONFIG: project instructions: {why}; fix it or run with --no-project-instructions"


# -- the snapshot, the fold, resume ---------------------------------------------------------------------


def configuration(instructions: Instructions = Instructions()) -> Configuration:
    return Configuration(
        model="m", system_prompt="Be kind.", tools=[], routing_identity="r", environment_identity="e",
        instructions=instructions.offered, instructions_section=instructions.section,
    )


def test_the_snapshot_names_each_file_and_the_prompt_carries_the_section(repo: Path) -> None:
    loaded = load_instructions(repo, None)
    plain, offered = configuration(), configuration(loaded)
    assert "instructions" not in msgspec.to_builtins(plain.snapshot())  # no files: the digest sessions had before
    assert offered.snapshot().instructions == loaded.offered
    assert offered.snapshot().systemPromptDigest == plain.snapshot().systemPromptDigest == digest("Be kind.")
    assert offered.prompt == "Be kind.\n\n" + loaded.section
    assert plain.prompt == "Be kind."


def test_a_changed_file_is_named(repo: Path) -> None:
    before = configuration(load_instructions(repo, None)).snapshot()
    (repo / "AGENTS.md").write_text("Be verbose.\n")
    (repo.parent / "AGENTS.md").unlink()
    after = configuration(load_instructions(repo, None)).snapshot()
    line = describe_block("configuration_changed", configuration_differences(before, after))
    middle, brief, verbose = (digest(text)[:19] for text in ("Run make test.\n\n", "Be brief.\n", "Be verbose.\n"))
    assert f"instruction file ../AGENTS.md {middle}… → now absent" in line
    assert f"instruction file AGENTS.md {brief}… → now {verbose}…" in line
    added = describe_block("configuration_changed", configuration_differences(configuration().snapshot(), before))
    assert "instruction file AGENTS.md absent → now" in added and "restore it with --no-project-instructions" in added


def _journal(tmp_path: Path, offered: list[InstructionDigest]) -> bytes:
    """A v3 journal through the real writer: a run whose first attempt names ``offered``."""
    snapshot = msgspec.structs.replace(SNAPSHOT, instructions=offered)
    run = RunWriter(new_writer(tmp_path / "s.jsonl"))
    run.start("hi")
    record = StepAttempt(
        operationId=run.operation_id, stepId=uuid7(), attemptId=uuid7(), stepKind="assistant", attempt=1,
        contextThroughEntryId=run.writer.state.contextBoundary, configurationSnapshot=snapshot,  # type: ignore[arg-type]
        configurationDigest=canonical_digest(snapshot),
    )
    run.writer.commit([RecordFact(id="", record=record)])
    return run.writer.path.read_bytes()


def _step_attempt(data: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    def edit(line: list[dict[str, Any]]) -> list[dict[str, Any]]:
        record = line[0]["record"]
        change(record["configurationSnapshot"])
        record["configurationDigest"] = canonical_digest(record["configurationSnapshot"])
        return line

    return edit_line(data, 3, edit)


def test_the_fold_takes_instructions_in_v3_only_and_checks_them(tmp_path: Path) -> None:
    offered = [InstructionDigest("AGENTS.md", digest("x"))]
    data = _journal(tmp_path, offered)
    assert reduce_bytes(data).lastSnapshot.instructions == offered  # type: ignore[union-attr]
    unsealed = [[fact for fact in json.loads(line) if fact["kind"] != "seal"] for line in split(data)[1:]]
    for seq, fact in enumerate((fact for line in unsealed for fact in line), 1):
        fact["seq"] = seq
    v2 = join([dumps(json.loads(split(data)[0]) | {"version": 2}), *(dumps(line) for line in unsealed)])
    with pytest.raises(CorruptionError, match="configurationSnapshot"):
        reduce_bytes(v2)
    assert reduce_bytes(_step_attempt(v2, lambda snapshot: snapshot.pop("instructions"))).version == 2
    for bad in ({"path": "AGENTS.md"}, [{"path": "", "digest": digest("x")}], [{"path": "a", "digest": "md5:1"}],
                [{"path": "a", "digest": digest("x"), "size": 1}]):
        with pytest.raises(CorruptionError, match="configurationSnapshot.instructions"):
            reduce_bytes(reseal(_step_attempt(data, lambda snapshot, bad=bad: snapshot.update(instructions=bad))))  # type: ignore[misc]


# -- the CLI: the request, audit, view, a blocked resume, the flag --------------------------------------


def tiny(workspace: Path, env: dict[str, str], *args: str, **more: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tiny_agent", *args]
    return subprocess.run(command, cwd=workspace, env={**env, **more}, capture_output=True, text=True, timeout=120)


def test_a_run_offers_them_audit_and_view_show_them_and_resume_names_a_changed_one(repo: Path, tmp_path: Path) -> None:
    import replies

    skill(repo / ".tiny-agent" / "skills", "release", "description: Cut a release.", body="tag it\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENROUTER_", "OPENAI_"))}
    sessions = tmp_path / "sessions"
    with LoopbackServer([Reply(body=replies.answer("ok").body)] * 10) as server:
        env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_BASE_URL=server.base_url, TINY_AGENT_MODEL="test/model",
                   TINY_AGENT_SESSIONS_DIR=str(sessions), XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path / "home"))
        done = tiny(repo, env, "run", "hello")
        assert done.returncode == 0, done.stderr
        system = server.requests[0].body["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("<project-instructions>\n")
        assert "- release: Cut a release. (.tiny-agent/skills/release/SKILL.md)" in system["content"]
        (journal,) = sessions.glob("*.jsonl")
        audit = tiny(repo, env, "audit", str(journal))
        assert audit.returncode == 0, audit.stderr
        listed = audit.stdout.split("project instructions offered (docs/tools.md)\n", 1)[1]
        assert [line.split()[0] for line in listed.splitlines()[1:5]] == [
            "../../AGENTS.md", "../AGENTS.md", "AGENTS.md", ".tiny-agent/skills/release/SKILL.md",
        ]
        page = session_page(build_view(journal, handle="h", prices={}))
        assert "instructions offered" in page and "<code>../AGENTS.md</code>" in page

        bare = tiny(repo, env, "run", "hello", "--no-project-instructions")
        assert bare.returncode == 0, bare.stderr
        assert "project-instructions" not in json.dumps(server.requests[-1].body)

        crashed = tiny(repo, env, "run", "again", "--session", str(journal), TINY_AGENT_FAILPOINT="after-commit:step-attempt")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        (repo / "AGENTS.md").write_text("Be verbose.\n")
        blocked = tiny(repo, env, "resume", str(journal))
        assert blocked.returncode == 75, blocked.stderr
        line = blocked.stderr.strip().splitlines()[-1]
        assert line.startswith("BLOCKED: configuration_changed: ") and "instruction file AGENTS.md sha256:" in line, line
        (repo / "AGENTS.md").write_text("Be brief.\n")
        resumed = tiny(repo, env, "resume", str(journal))
        assert resumed.returncode == 0, resumed.stderr
