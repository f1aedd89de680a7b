"""Where ``bash`` runs: inside bubblewrap when it works here, with a scrubbed environment always (docs/tools.md, "bash")."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

import msgspec

from tiny_agent.errors import ConfigError

SandboxMode = Literal["bubblewrap", "none"]
SandboxChoice = Literal["auto", "bubblewrap", "none"]

PASSED_VARIABLES: Final = frozenset("PATH HOME USER LOGNAME SHELL LANG LANGUAGE TERM TZ TMPDIR COLORTERM NO_COLOR".split())
PASSED_PREFIXES: Final = ("LC_",)
SECRET_WORDS: Final = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
SECRET_PREFIXES: Final = tuple(
    "TINY_AGENT_ AWS_ AZURE_ ARM_ GOOGLE_ GCLOUD_ CLOUDSDK_ GCP_ DIGITALOCEAN_ HCLOUD_ OPENAI_ OPENROUTER_ ANTHROPIC_ HF_ GH_ "
    "GITHUB_ GITLAB_ NPM_ PYPI_ TWINE_ DOCKER_ VAULT_ KUBE SSH_ GPG_".split()
)
PROBE_TIMEOUT: Final = 10.0


class SandboxUnavailable(ConfigError):
    """Bubblewrap was required (``sandbox="bubblewrap"``) but does not work here."""


class SandboxProbe(msgspec.Struct, frozen=True):
    """What trying bubblewrap once found: the mode ``auto`` resolves to, and why."""

    mode: SandboxMode
    reason: str
    executable: str | None = None


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says it holds (or points at) a credential."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS) or upper.startswith(SECRET_PREFIXES)


def scrubbed_environment(environ: Mapping[str, str], *, sandboxed: bool) -> dict[str, str]:
    """The environment a ``bash`` command gets: allow-listed names only, never a credential (sandboxed: TMPDIR=/tmp)."""
    kept = {
        name: value
        for name, value in environ.items()
        if (name in PASSED_VARIABLES or name.startswith(PASSED_PREFIXES)) and not is_secret_name(name)
    }
    kept.setdefault("PATH", os.defpath)
    if sandboxed:
        kept["TMPDIR"] = "/tmp"
    return kept


def bubblewrap_argv(executable: str, root: Path, command: Sequence[str], *, read_only: Sequence[Path] = ()) -> list[str]:
    """The ``bwrap`` command line that runs ``command`` confined to ``root`` (docs/tools.md, "bash: the sandbox").

    Bubblewrap mounts left to right: the working directory is bound after the private ``/tmp`` and ``/run`` (it may lie
    inside them), and the ``read_only`` paths after the working directory they may lie in.
    """
    argv = [executable, *"--die-with-parent --new-session --unshare-all --ro-bind / / --dev /dev --proc /proc".split()]
    argv += ["--tmpfs", "/tmp", "--tmpfs", "/run", "--bind", str(root), str(root)]
    for path in read_only:
        argv += ["--ro-bind-try", str(path), str(path)]
    argv += ["--chdir", str(root), "--", *command]
    return argv


@functools.cache
def probe_sandbox() -> SandboxProbe:
    """Try ``bwrap ... true`` with the flags ``bash`` will use; the answer is cached for the process."""
    executable = shutil.which("bwrap")
    if executable is None:
        return SandboxProbe(mode="none", reason="bubblewrap (bwrap) is not installed")
    try:
        with tempfile.TemporaryDirectory(prefix="tiny-agent-probe-") as scratch:
            problem = _trial_run(bubblewrap_argv(executable, Path(scratch), ["true"]))
    except OSError as error:
        problem = f"no scratch directory for a trial run: {error.strerror or error}"
    if problem is not None:
        return SandboxProbe(mode="none", reason=problem)
    return SandboxProbe(mode="bubblewrap", reason="bubblewrap works", executable=executable)


def _trial_run(argv: list[str]) -> str | None:
    """Why ``argv`` (a sandboxed ``true``) did not succeed, or None when it did."""
    try:
        completed = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT,
            env=scrubbed_environment(os.environ, sandboxed=True),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"bwrap did not finish a trial run within {PROBE_TIMEOUT:g} s"
    except OSError as error:
        return f"bwrap could not be started: {error.strerror or error}"
    if completed.returncode == 0:
        return None
    said = " ".join(completed.stderr.decode("utf-8", "replace").split()) or f"exit status {completed.returncode}"
    return f"bwrap is installed but cannot create a sandbox here ({said})"


def resolve_sandbox(choice: SandboxChoice) -> SandboxProbe:
    """The probe for ``choice``: ``none`` never tries bwrap; ``bubblewrap`` fails closed without it."""
    if choice == "none":
        return SandboxProbe(mode="none", reason="the sandbox was turned off")
    probe = probe_sandbox()
    if choice == "bubblewrap" and probe.mode != "bubblewrap":
        raise SandboxUnavailable(f"bash must run in bubblewrap, but {probe.reason}")
    return probe


def unconfined_notice(probe: SandboxProbe) -> str | None:
    """The one line to show the user when ``bash`` runs unconfined, or None when it is sandboxed."""
    if probe.mode == "bubblewrap":
        return None
    return f"bash is not sandboxed: {probe.reason}; a command can read and write anything you can, and use the network"
