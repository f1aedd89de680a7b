"""Project instructions: the AGENTS.md files and the skills offered to the model (docs/tools.md, "Project instructions")."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from tiny_agent.agent.tools.files import Refusal, read_regular, repository_root
from tiny_agent.errors import ConfigError
from tiny_agent.journal.canonical import sha256_digest
from tiny_agent.journal.state import InstructionDigest

INSTRUCTIONS_LIMIT: Final = 64 * 1024
"""An AGENTS.md larger than this is refused: it would crowd the context out (a SKILL.md may be as large as read allows)."""
SKILL_LIMIT: Final = 256 * 1024
SKILLS_FOLDER: Final = Path(".tiny-agent", "skills")

SKILLS_PREAMBLE: Final = (
    "Skills: each is a SKILL.md file with instructions for one kind of task. When a task matches a skill's "
    "description, read its file with the read tool, by the path given, before you start."
)
AGENTS_PREAMBLE: Final = (
    "Instructions for this project from its AGENTS.md files, the repository root's first; where they disagree, "
    "the later (deeper) file wins."
)


class Instructions(msgspec.Struct, frozen=True):
    """What is offered: the files (in the order offered), the system prompt's section, the skill files ``read`` may open."""

    offered: list[InstructionDigest] = msgspec.field(default_factory=list)
    section: str = ""
    readable: dict[str, Path] = msgspec.field(default_factory=dict)
    """Each skill's path as offered -> its real path (a user skill lies outside the working directory)."""


def user_skills_folder(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/tiny-agent/skills``, else ``~/.config/tiny-agent/skills`` (beside the default config file)."""
    from tiny_agent.providers.userconfig import CONFIG_ENV, config_path

    return config_path({name: value for name, value in environ.items() if name != CONFIG_ENV})[0].parent / "skills"


def load_instructions(cwd: Path, user_skills: Path | None) -> Instructions:
    """The AGENTS.md files and skills for a session driven from ``cwd`` (``user_skills``: the user's skills folder)."""
    root = Path(os.path.realpath(cwd))
    top = repository_root(root) or root
    chain = [directory for directory in (*reversed(root.parents), root) if directory == top or top in directory.parents]
    offered: list[InstructionDigest] = []
    parts: list[str] = []
    for directory in chain:
        path = directory / "AGENTS.md"
        if os.path.lexists(path):
            shown = os.path.relpath(path, root)
            text = _text(path, shown, INSTRUCTIONS_LIMIT, offered)
            parts.append(f'<agents-md path="{shown}">\n{text.rstrip()}\n</agents-md>')
    if parts:
        parts.insert(0, AGENTS_PREAMBLE)
    skills: list[str] = []
    readable: dict[str, Path] = {}
    folders = [user_skills] if user_skills is not None else []
    for folder in [*folders, *(directory / SKILLS_FOLDER for directory in chain)]:
        for path in sorted(folder.glob("*/SKILL.md")) if folder.is_dir() else []:
            shown = _home_relative(path) if folder == user_skills else os.path.relpath(path, root)
            name, description = _front_matter(_text(path, shown, SKILL_LIMIT, offered), path.parent.name)
            skills.append(f"- {name}: {description} ({shown})")
            readable[shown] = Path(os.path.realpath(path))
    if skills:
        parts += [SKILLS_PREAMBLE, "\n".join(skills)]
    section = "<project-instructions>\n" + "\n\n".join(parts) + "\n</project-instructions>" if parts else ""
    return Instructions(offered=offered, section=section, readable=readable)


def _home_relative(path: Path) -> str:
    """A user skill's path as offered and recorded: ``~/...`` when under the home directory (no user name), else absolute."""
    home = Path(os.path.expanduser("~"))
    return f"~/{path.relative_to(home).as_posix()}" if home in path.parents else str(path)


def _text(path: Path, shown: str, limit: int, offered: list[InstructionDigest]) -> str:
    """The file's UTF-8 text, recorded in ``offered``; anything else is a configuration error naming it."""
    try:
        data = read_regular(Path(os.path.realpath(path)), shown, limit)
        text = data.decode("utf-8")
    except (OSError, Refusal, UnicodeDecodeError) as error:
        why = "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else getattr(error, "strerror", None) or str(error)
        why = why.removeprefix(f"{shown}: ")
        raise ConfigError(f"project instructions: {shown}: {why}; fix it or run with --no-project-instructions") from None
    offered.append(InstructionDigest(path=shown, digest=sha256_digest(data)))
    return text


def _front_matter(text: str, folder: str) -> tuple[str, str]:
    """A SKILL.md's ``name`` (else its folder's name) and ``description`` from its ``---`` front matter."""
    found = re.match(r"---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(\r?\n|\Z)", text, re.DOTALL)
    values: dict[str, str] = {}
    key = ""
    for line in found.group(1).splitlines() if found else []:
        member = re.match(r"([A-Za-z_][\w-]*):\s*(.*)", line)
        if member:
            key, value = member.group(1), member.group(2).strip()
            values[key] = "" if value in (">", "|", ">-", "|-") else value.strip("'\"") if value[:1] in "'\"" else value
        elif key and line[:1].isspace():
            values[key] = f"{values[key]} {line.strip()}".strip()  # a folded or indented continuation
    return values.get("name") or folder, " ".join(values.get("description", "").split()) or "(no description)"
