"""Running the built-in tools, confined to one working directory (docs/tools.md); a failure is an error result, never raised."""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import signal
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TextIO

import msgspec

from tiny_agent.agent.tools import files
from tiny_agent.agent.tools.builtin import BASH, BUILTIN, validate_arguments, with_defaults
from tiny_agent.agent.tools.files import OUTPUT_LIMIT, Refusal, cut, open_regular, read_regular, require_regular
from tiny_agent.agent.tools.sandbox import (
    SandboxChoice,
    SandboxMode,
    SandboxProbe,
    bubblewrap_argv,
    resolve_sandbox,
    scrubbed_environment,
    unconfined_notice,
)
from tiny_agent.journal.state import NOT_APPROVED
from tiny_agent.journal.tools import ToolDeclaration, ToolOutcome, ToolSpec

READ_LIMIT: Final = 256 * 1024
DIFF_LINE_LIMIT: Final = 200
DIFF_WIDTH_LIMIT: Final = 400
DIFF_INPUT_LIMIT: Final = READ_LIMIT
"""Files larger than this on either side get no diff: difflib's cost grows faster than their size."""

NO_APPROVER_REASON: Final = "no terminal; use --allow-write"


class WriteProposal(msgspec.Struct, frozen=True):
    """What a ``write`` or ``edit`` call would do, shown to whoever approves it (docs/tools.md, "Write approval")."""

    path: str
    exists: bool
    size_before: int | None
    size_after: int
    diff: str | None
    no_diff_reason: str | None = None


class ApprovalDecision(msgspec.Struct, frozen=True):
    """An answer to a write proposal; ``reason`` goes into the tool result."""

    approved: bool
    reason: str


Approver = Callable[[WriteProposal], ApprovalDecision]


class MoreTools(Protocol):
    """Tools run elsewhere (MCP servers): their specs, their declarations (in the same order), running one."""

    def specs(self) -> list[ToolSpec]: ...

    def declarations(self) -> list[ToolDeclaration]: ...

    def execute(self, name: str, arguments: dict[str, Any], link: str | None) -> ToolOutcome: ...


class ToolBox:
    """The tools offered to the model, bound to one working directory (docs/tools.md); ``environ`` stands for os.environ."""

    def __init__(
        self,
        cwd: Path,
        *,
        allow_bash: bool = False,
        bash_timeout: float = 30.0,
        allow_write: bool = False,
        approve: Approver | None = None,
        sandbox: SandboxChoice = "auto",
        protected: Sequence[Path] = (),
        environ: Mapping[str, str] | None = None,
        readable: Mapping[str, Path] = {},
        more: MoreTools | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(cwd))
        self.allow_bash = allow_bash
        self.bash_timeout = bash_timeout
        self.allow_write = allow_write
        self.approve = approve
        self.protected = tuple(Path(os.path.realpath(self.root / path)) for path in protected)
        self.environ = environ
        self.readable = dict(readable)
        self.more = more
        extra = more.specs() if more else []
        self._more = dict(zip((spec.name for spec in extra), more.declarations() if more else [], strict=True))
        self._specs = [spec for spec in BUILTIN if spec is not BASH or allow_bash] + extra
        # Probed now, not at the first call: the user must hear before the run that bash is unconfined.
        self.sandbox: SandboxProbe | None = resolve_sandbox(sandbox) if allow_bash else None

    @property
    def sandbox_mode(self) -> SandboxMode | None:
        return None if self.sandbox is None else self.sandbox.mode

    @property
    def unconfined_notice(self) -> str | None:
        """The one line to print before a run when ``bash`` is offered but not sandboxed; None otherwise."""
        return None if self.sandbox is None else unconfined_notice(self.sandbox)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    def declarations(self) -> list[ToolDeclaration]:
        """What the configuration snapshot holds of each tool (an MCP tool's digest covers its server too)."""
        return [self._more.get(spec.name) or spec.declaration() for spec in self._specs]

    def lookup(self, name: str) -> ToolSpec | None:
        return next((spec for spec in self._specs if spec.name == name), None)

    def validate(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the tool's parameters, or None when they do."""
        spec = self.lookup(name)
        if spec is None:
            return f"unknown tool {name}"
        if name in self._more:  # the server checks the rest against its own schema
            return None if type(arguments) is dict else "arguments are not a JSON object"
        return validate_arguments(spec.parameters, arguments)

    def execute(self, name: str, arguments: dict[str, Any], link: str | None = None) -> ToolOutcome:
        """Run a tool: a built-in's parameters are the keyword arguments of its ``_<name>`` method; ``link`` is the
        call's ``toolStarted`` id (an MCP call's journaled messages name it)."""
        spec = self.lookup(name)
        problem = self.validate(name, arguments)
        if spec is None or problem is not None:
            return ToolOutcome(content=f"Error: {problem}", ok=False)
        if self.more is not None and name in self._more:
            return self.more.execute(name, arguments, link)
        run: Callable[..., ToolOutcome] = getattr(self, f"_{name}")
        try:
            return run(**with_defaults(spec.parameters, arguments))
        except Refusal as refusal:
            return ToolOutcome(content=f"Error: {refusal}", ok=False)
        except OSError as error:
            return ToolOutcome(content=f"Error: {arguments.get('path', name)}: {error.strerror or error}", ok=False)

    # -- confinement ----------------------------------------------------------

    def confine(self, path_text: str) -> Path:
        """The real path for ``path_text`` if it stays inside the working directory."""
        if not path_text or "\x00" in path_text:
            raise Refusal("path is empty or contains a NUL byte")
        if os.path.isabs(path_text):
            raise Refusal(f"{path_text}: absolute paths are not allowed; use a path relative to the working directory")
        resolved = Path(os.path.realpath(self.root / path_text))
        if resolved != self.root and self.root not in resolved.parents:
            raise Refusal(f"{path_text}: leaves the working directory")
        return resolved

    def _refuse_protected(self, path: Path, path_text: str) -> None:
        for protected in self.protected:
            if path == protected or protected in path.parents:
                shown = os.path.relpath(protected, self.root)
                raise Refusal(f"{path_text}: {shown} is kept by tiny-agent itself; the tools may read it but not change it")

    # -- read, list, glob, grep -------------------------------------------------------

    def _read(self, path: str) -> ToolOutcome:
        data = read_regular(self.readable.get(path) or self.confine(path), path, READ_LIMIT)
        try:
            return ToolOutcome(content=data.decode("utf-8"), ok=True)
        except UnicodeDecodeError:
            return ToolOutcome(content=f"Error: {path}: not a UTF-8 text file", ok=False)

    def _list(self, path: str) -> ToolOutcome:
        return _found(files.list_directory(self.confine(path), path))

    def _glob(self, pattern: str, path: str) -> ToolOutcome:
        return _found(files.glob(self.root, self.confine(path), pattern))

    def _grep(self, pattern: str, path: str, glob: str, ignore_case: bool, limit: int) -> ToolOutcome:
        return _found(files.grep(self.root, self.confine(path), pattern, glob, ignore_case, limit))

    # -- write, edit -------------------------------------------------------------------

    def _write(self, path: str, content: str) -> ToolOutcome:
        encoded = _encode(path, content)
        return self._change(path, lambda before: encoded, "writing", f"wrote {len(encoded)} bytes to {path}")

    def _edit(self, path: str, old_text: str, new_text: str) -> ToolOutcome:
        if not old_text or old_text == new_text:
            raise Refusal("old_text is empty" if not old_text else "old_text and new_text are the same: nothing to change")

        def replace(before: ExistingFile | None) -> bytes:
            if before is None or before.text is None:
                why = "no such file" if before is None else before.no_diff_reason
                raise Refusal(f"{path}: {why}; edit changes an existing UTF-8 text file")
            found = len(re.findall(f"(?={re.escape(old_text)})", before.text))
            if found != 1:
                where = "was not found" if found == 0 else f"occurs {found} times"
                raise Refusal(f"{path}: old_text {where}; it must occur exactly once (nothing was changed)")
            return _encode(path, before.text.replace(old_text, new_text, 1))

        return self._change(path, replace, "editing", f"edited {path}: replaced 1 occurrence")

    def _change(self, path_text: str, make: Callable[[ExistingFile | None], bytes], verb: str, done: str) -> ToolOutcome:
        """Replace the file at ``path_text`` with what ``make`` makes of it, once the change is approved."""
        path = self.confine(path_text)
        self._refuse_protected(path, path_text)
        before = _existing_content(path, path_text)
        encoded = make(before)
        decision = self._decide(propose_write(path_text, before, encoded))
        if not decision.approved:
            return ToolOutcome(content=f"Error: {verb} {path_text}{NOT_APPROVED}{decision.reason}", ok=False)
        self._write_bytes(path, path_text, encoded, exists=before is not None)
        return ToolOutcome(content=f"{done} ({decision.reason})", ok=True)

    def _decide(self, proposal: WriteProposal) -> ApprovalDecision:
        if self.allow_write:
            return ApprovalDecision(approved=True, reason="allowed by --allow-write")
        if self.approve is None:
            return ApprovalDecision(approved=False, reason=NO_APPROVER_REASON)
        return self.approve(proposal)

    def _write_bytes(self, path: Path, path_text: str, encoded: bytes, *, exists: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The directories just made, or swapped in since confine(), must still lie inside.
        self.confine(os.path.relpath(path.parent, self.root))
        if exists:
            fd = open_regular(path, path_text, os.O_WRONLY)
            os.ftruncate(fd, 0)
        else:
            # O_EXCL: a file that appeared while the user was deciding is not silently replaced.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as file:
            file.write(encoded)

    # -- bash --------------------------------------------------------------------

    def _bash(self, command: str) -> ToolOutcome:
        if not self.allow_bash or self.sandbox is None:
            return ToolOutcome(content="Error: bash is disabled (start tiny-agent with --allow-bash)", ok=False)
        mode = self.sandbox.mode
        argv = ["bash", "-c", command]
        if mode == "bubblewrap" and self.sandbox.executable is not None:
            argv = bubblewrap_argv(self.sandbox.executable, self.root, argv, read_only=self.protected)
        environ = os.environ if self.environ is None else self.environ
        process = subprocess.Popen(
            argv,
            cwd=self.root,
            env=scrubbed_environment(environ, sandboxed=mode == "bubblewrap"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        header = f"[sandbox: {mode}]"
        try:
            output, _ = process.communicate(timeout=self.bash_timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            killed = f"Error: command timed out after {self.bash_timeout:g} s and was killed"
            return ToolOutcome(content=f"{header}\n{killed}", ok=False)
        except BaseException:
            _kill_group(process)  # interrupted (Ctrl-C): the command must not outlive its cancellation
            raise
        text = output[:OUTPUT_LIMIT].decode("utf-8", "replace")
        if len(output) > OUTPUT_LIMIT:
            text += f"\n[output truncated at {OUTPUT_LIMIT // 1024} KiB]"
        return ToolOutcome(content=f"{header}\n{text}\n[exit status {process.returncode}]", ok=process.returncode == 0)


def _found(text: str) -> ToolOutcome:
    """What a look found; a file name that is not UTF-8 shows U+FFFD where its bad bytes were (results are text)."""
    return ToolOutcome(content=text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), ok=True)


def _encode(path_text: str, content: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Refusal(f"{path_text}: the content is not valid Unicode text ({error.reason} at {error.start})") from None


class ExistingFile(msgspec.Struct, frozen=True):
    """The file a write would replace: its size, and its text when it is UTF-8 and small enough to diff."""

    size: int
    text: str | None
    no_diff_reason: str | None = None


def _existing_content(path: Path, path_text: str) -> ExistingFile | None:
    """The file a write would replace (None when there is none); refuses anything but a regular file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    require_regular(info.st_mode, path_text)
    if info.st_size > DIFF_INPUT_LIMIT:
        too_large = f"the file is larger than {DIFF_INPUT_LIMIT // 1024} KiB"
        return ExistingFile(size=info.st_size, text=None, no_diff_reason=too_large)
    data = read_regular(path, path_text, READ_LIMIT)
    try:
        return ExistingFile(size=len(data), text=data.decode("utf-8"))
    except UnicodeDecodeError:
        return ExistingFile(size=len(data), text=None, no_diff_reason="the file is not UTF-8 text")


def propose_write(path_text: str, before: ExistingFile | None, encoded: bytes) -> WriteProposal:
    """The proposal for replacing ``before`` (None: no file yet) with ``encoded``; its diff cut to the limits above."""
    size_before = None if before is None else before.size
    if before is not None and before.text is None:
        return WriteProposal(path_text, True, size_before, len(encoded), None, before.no_diff_reason)
    if len(encoded) > DIFF_INPUT_LIMIT:
        too_large = f"the new content is larger than {DIFF_INPUT_LIMIT // 1024} KiB"
        return WriteProposal(path_text, before is not None, size_before, len(encoded), None, too_large)
    old_lines = [] if before is None or before.text is None else before.text.splitlines(keepends=True)
    new_lines = encoded.decode("utf-8").splitlines(keepends=True)
    old_name = "/dev/null" if before is None else f"a/{path_text}"
    lines = [line.removesuffix("\n") for line in difflib.unified_diff(old_lines, new_lines, old_name, f"b/{path_text}")]
    shown = [cut(line, DIFF_WIDTH_LIMIT) for line in lines[:DIFF_LINE_LIMIT]]
    if len(lines) > DIFF_LINE_LIMIT:
        shown.append(f"[diff truncated: {len(lines) - DIFF_LINE_LIMIT} more lines]")
    diff = "\n".join(shown)
    return WriteProposal(path_text, before is not None, size_before, len(encoded), diff or None, None if diff else "no change")


def render_proposal(proposal: WriteProposal) -> str:
    """The proposal as the user reads it, every character that could steer the terminal made visible."""
    path = printable(proposal.path)
    if proposal.exists:
        summary = f"replace {path} ({proposal.size_before} bytes now, {proposal.size_after} bytes after)"
    else:
        summary = f"create {path} ({proposal.size_after} bytes)"
    lines = [f"tiny-agent: the model asks to {summary}"]
    if proposal.diff is not None:
        lines += [printable(line) for line in proposal.diff.split("\n")]
    else:
        lines.append(f"(no diff shown: {proposal.no_diff_reason})")
    return "\n".join(lines)


def printable(text: str) -> str:
    """``text`` with every control, format or unassigned character shown as an escape (``\\x1b``): the model chose it."""
    return "".join(_visible(character) for character in text)


def _visible(character: str) -> str:
    if character == "\t" or unicodedata.category(character) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        return character
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


Answer = Literal["yes", "always", "no", "closed"]
REASONS: Final = {"yes": "approved by the user", "no": "the user declined", "closed": "the terminal closed before an answer"}
"""What each answer but ``always`` puts in the result (a write's and an MCP call's alike)."""
ALWAYS: Final = "approved by the user, always for this session"


def ask(question: str, prompt: str, answers: TextIO | None = None, prompts: TextIO | None = None) -> Answer:
    """Show ``question`` and ``prompt`` on ``prompts`` (stderr), read a line of ``answers`` (stdin): y, a, else, or none."""
    answers = sys.stdin if answers is None else answers
    prompts = sys.stderr if prompts is None else prompts
    prompts.write(f"{question}\n{prompt}")
    prompts.flush()
    line = answers.readline()
    if not line:
        prompts.write("\n")
        return "closed"
    answer = line.strip().lower()
    return "yes" if answer in ("y", "yes") else "always" if answer in ("a", "always") else "no"


def at_terminal() -> bool:
    """Whether stdin and stderr are both terminals: someone can be asked."""
    return sys.stdin is not None and sys.stderr is not None and sys.stdin.isatty() and sys.stderr.isatty()


def ask_on_terminal(proposal: WriteProposal, *, answers: TextIO | None = None, prompts: TextIO | None = None) -> ApprovalDecision:
    """Show ``proposal`` on ``prompts`` (stderr) and read y/N/a from ``answers`` (stdin); anything else declines."""
    prompt = f"Write {printable(proposal.path)}? [y/N, a: always for this session] "
    answer = ask(render_proposal(proposal), prompt, answers, prompts)
    return ApprovalDecision(approved=answer in ("yes", "always"), reason=ALWAYS if answer == "always" else REASONS[answer])


class TerminalApprover:
    """Asks on the terminal until the user answers ``always``; then approves the session's writes without asking."""

    def __init__(self) -> None:
        self.always = False

    def __call__(self, proposal: WriteProposal) -> ApprovalDecision:
        if self.always:
            return ApprovalDecision(approved=True, reason="approved: the user said always for this session")
        decision = ask_on_terminal(proposal)
        self.always = decision.reason == ALWAYS
        return decision


def terminal_approver() -> Approver | None:
    """A :class:`TerminalApprover` at a terminal; None otherwise (writes are refused)."""
    return TerminalApprover() if at_terminal() else None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's process group (in bubblewrap: its PID namespace); close, not drain, the pipe (docs/tools.md)."""
    with contextlib.suppress(ProcessLookupError):  # the group already ended: nothing is left to kill
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    if process.stdout is not None:
        process.stdout.close()
