"""Looking at the working tree: regular files only, .gitignore, and the ``list``, ``glob`` and ``grep`` tools (docs/tools.md).

The callers confine every path first (:meth:`ToolBox.confine`); a walk never follows a symbolic link.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Final, NamedTuple

OUTPUT_LIMIT: Final = 64 * 1024
LINE_LIMIT: Final = 400
LIST_LIMIT: Final = 1000
GREP_FILE_LIMIT: Final = 8 * 1024 * 1024
SEARCH_SECONDS: Final = 20.0
"""A glob or grep stops after this long, keeping what it found: a safe tool is replayed, so it must end."""
PATTERN_ERRORS: Final = (re.error, RecursionError, OverflowError)


class Refusal(Exception):
    """A tool call that will not be carried out; its message is the result the model sees."""


class Stopped(Exception):
    """A search ran out of time."""


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((word for test, word in kinds if test(mode)), "not a regular file")


def require_regular(mode: int, path_text: str) -> None:
    kind = file_kind(mode)
    if kind is not None:
        raise Refusal(f"{path_text}: is {kind}, not a regular file")


def open_regular(path: Path, path_text: str, access: int) -> int:
    """A descriptor for the regular file at ``path``, opened without ever blocking on anything else."""
    require_regular(os.lstat(path).st_mode, path_text)
    fd = os.open(path, access | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        # Checked again on the descriptor: the path may have been swapped since lstat.
        require_regular(os.fstat(fd).st_mode, path_text)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, path_text: str, limit: int) -> bytes:
    """The file's bytes; a file larger than ``limit`` is refused."""
    with os.fdopen(open_regular(path, path_text, os.O_RDONLY), "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise Refusal(f"{path_text}: larger than {limit // 1024} KiB")
    return data


def cut(line: str, width: int = LINE_LIMIT) -> str:
    return line if len(line) <= width else f"{line[:width]} [line cut: {len(line) - width} more characters]"


def repository_root(directory: Path) -> Path | None:
    """The nearest directory from ``directory`` up that holds ``.git`` (a directory, or a worktree's file)."""
    return next((path for path in (directory, *directory.parents) if os.path.lexists(path / ".git")), None)


def glob_regex(pattern: str, anywhere: bool) -> re.Pattern[str]:
    """``pattern`` (docs/tools.md's subset) as a regular expression over relative paths (``anywhere``: at any depth)."""
    parts = pattern.split("/")
    last = len(parts) - 1
    body = "".join(
        (".*" if index == last else "(?:.*/)?") if part == "**" else _part(part) + ("" if index == last else "/")
        for index, part in enumerate(parts)
    )
    return re.compile(("(?:.*/)?" if anywhere else "") + body + r"\Z", re.DOTALL)


def _part(part: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(part):
        char = part[index]
        index += 1
        end = part.find("]", index + 1) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index < len(part):
            out.append(re.escape(part[index]))
            index += 1
        elif end > 0:
            members = part[index:end]
            negate = "^" if members[:1] == "!" else ""
            out.append(f"[{negate}{''.join(c if c == '-' else re.escape(c) for c in members[len(negate):])}]")
            index = end + 1
        else:
            out.append(re.escape(char))
    return "".join(out)


class Rule(NamedTuple):
    regex: re.Pattern[str]
    negate: bool
    directories_only: bool


def gitignore_rules(text: str) -> list[Rule]:
    """The rules of one .gitignore file (gitignore(5): comments, ``!``, a trailing ``/``, anchoring by ``/``)."""
    rules: list[Rule] = []
    for line in text.splitlines():
        line = re.sub(r"(?<!\\) +\Z", "", line)
        negate = line.startswith("!")
        pattern = line[negate:]
        directories_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if not pattern or line.startswith("#"):
            continue
        with contextlib.suppress(*PATTERN_ERRORS):  # a broken set ignores nothing, as in git
            rules.append(Rule(glob_regex(pattern.lstrip("/"), "/" not in pattern), negate, directories_only))
    return rules


Layers = tuple[tuple[str, list[Rule]], ...]
"""The .gitignore files in force: each directory (with a trailing ``/``) and its rules, outermost first."""


def enter(layers: Layers, directory: Path) -> Layers:
    """``layers`` and the rules of ``directory``'s own .gitignore (none when it has no readable one)."""
    try:
        text = read_regular(directory / ".gitignore", ".gitignore", 1024 * 1024).decode("utf-8", "replace")
    except (OSError, Refusal):
        return layers
    return (*layers, (str(directory).rstrip("/") + "/", gitignore_rules(text)))


def ignored(layers: Layers, path: str, is_directory: bool) -> bool:
    """Whether the last rule matching ``path`` (absolute) ignores it; deeper files and later lines win."""
    verdict = False
    for base, rules in layers:
        relative = path[len(base) :]
        for rule in rules:
            if (is_directory or not rule.directories_only) and rule.regex.match(relative):
                verdict = not rule.negate
    return verdict


def outer_layers(root: Path, start: Path) -> Layers:
    """The .gitignore files above ``start``: from the repository root (else the working directory) down."""
    top = repository_root(root) or root
    layers: Layers = ()
    for directory in reversed(start.parents):
        if directory == top or top in directory.parents:
            layers = enter(layers, directory)
    return layers


def walk(root: Path, start: Path, deadline: float) -> Iterator[tuple[Path, bool]]:
    """Every path below the directory ``start`` that .gitignore keeps (depth first in name order), and if it is a directory."""
    stack = [(iter(_entries(start)), enter(outer_layers(root, start), start))]
    while stack:
        entries, layers = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if time.monotonic() > deadline:
            raise Stopped
        is_directory = entry.is_dir(follow_symlinks=False)
        if entry.name == ".git" or ignored(layers, entry.path, is_directory):
            continue
        yield Path(entry.path), is_directory
        if is_directory:
            with contextlib.suppress(OSError):
                stack.append((iter(_entries(Path(entry.path))), enter(layers, Path(entry.path))))


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as entries:
        return sorted(entries, key=lambda entry: entry.name)


def bounded(lines: Iterable[str], count: int, what: str) -> str:
    """At most ``count`` of ``lines`` and OUTPUT_LIMIT characters, marked when more were left out; in the main thread a
    timer stops the search after SEARCH_SECONDS, even inside one runaway regular expression match."""
    shown: list[str] = []
    size = 0
    try:
        with _alarm(SEARCH_SECONDS):
            for line in lines:
                if len(shown) == count or size + len(line) > OUTPUT_LIMIT:
                    shown.append(f"[more {what} not shown: narrow the search]")
                    break
                shown.append(line)
                size += len(line) + 1
    except Stopped:
        shown.append(f"[search stopped after {SEARCH_SECONDS:g} s: narrow it]")
    return "\n".join(shown)


def _expire(signum: int, frame: FrameType | None) -> None:
    raise Stopped


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only: the walk's deadline still holds
        return
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)


def list_directory(directory: Path, shown: str) -> str:
    """One line per entry, in name order: ``name/``, ``name  N bytes``, ``name -> target``, or the entry's kind."""
    lines = []
    for entry in _entries(directory):
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            lines.append(f"{entry.name} -> {os.readlink(entry.path)}")
        elif stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
            lines.append(f"{entry.name}/" if stat.S_ISDIR(info.st_mode) else f"{entry.name}  {info.st_size} bytes")
        else:
            lines.append(f"{entry.name}  ({file_kind(info.st_mode)})")
    return bounded(lines, LIST_LIMIT, "entries") or f"{shown}: the directory is empty"


def glob(root: Path, start: Path, pattern: str) -> str:
    """The paths below ``start`` matching ``pattern``, relative to ``root``, directories with a trailing ``/``."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise Refusal(f"{pattern}: a pattern is relative to path and cannot leave it")
    regex = _compile(lambda: glob_regex(pattern, anywhere=False), pattern)
    found = (
        os.path.relpath(path, root) + ("/" if is_directory else "")
        for path, is_directory in walk(root, start, time.monotonic() + SEARCH_SECONDS)
        if regex.match(os.path.relpath(path, start))
    )
    return bounded(found, LIST_LIMIT, "paths") or f"no path matches {pattern}"


def grep(root: Path, start: Path, pattern: str, only: str, ignore_case: bool, limit: int) -> str:
    """``path:line: text`` for each line below ``start`` (a directory or a regular file) where ``pattern`` matches."""
    regex = _compile(lambda: re.compile(pattern, re.IGNORECASE if ignore_case else 0), pattern)
    wanted = _compile(lambda: glob_regex(only.strip("/"), "/" not in only.strip("/")), only) if only else None
    deadline = time.monotonic() + SEARCH_SECONDS
    if stat.S_ISDIR(os.stat(start).st_mode):
        files: Iterable[Path] = (
            path
            for path, is_directory in walk(root, start, deadline)
            if not is_directory and (wanted is None or wanted.match(os.path.relpath(path, start)))
        )
    else:
        require_regular(os.lstat(start).st_mode, os.path.relpath(start, root))
        files = [start]
    skipped: list[str] = []
    matches = (hit for path in files for hit in _grep_file(path, os.path.relpath(path, root), regex, skipped))
    text = bounded(matches, limit, "matching lines") or "no matches"
    if skipped:
        text += f"\n[{len(skipped)} files over {GREP_FILE_LIMIT // 1024 // 1024} MiB not searched: {', '.join(skipped[:5])}]"
    return text


def _grep_file(path: Path, shown: str, regex: re.Pattern[str], skipped: list[str]) -> Iterator[str]:
    try:
        if os.lstat(path).st_size > GREP_FILE_LIMIT:
            skipped.append(shown)
            return
        data = read_regular(path, shown, GREP_FILE_LIMIT)
    except (OSError, Refusal):
        return  # a symbolic link, a FIFO, a file that vanished: not text to search
    if b"\x00" in data[:8192]:
        return  # binary
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        line = line.removesuffix("\r")
        if regex.search(line):
            yield f"{shown}:{number}: {cut(line)}"


def _compile(make: Callable[[], re.Pattern[str]], pattern: str) -> re.Pattern[str]:
    try:
        return make()
    except PATTERN_ERRORS as error:
        raise Refusal(f"{pattern}: not a valid pattern ({error})") from None
