"""bash's confinement: the scrubbed environment, the bubblewrap command line, detection, and the real sandbox.

The tests that need a working bubblewrap skip, saying why, where it cannot
create namespaces (or is not installed); ``.ci/run`` installs it first.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import until

from tiny_agent.agent.tools.sandbox import (
    SandboxProbe,
    SandboxUnavailable,
    bubblewrap_argv,
    is_secret_name,
    probe_sandbox,
    resolve_sandbox,
    scrubbed_environment,
    unconfined_notice,
)
from tiny_agent.agent.tools.toolbox import ToolBox

KEY = "sk-test-0123456789abcdef0123456789abcdef"
OTHER_KEY = "sk-openai-fedcba9876543210fedcba9876543210"


@pytest.fixture()
def bubblewrap() -> SandboxProbe:
    probe = probe_sandbox()
    if probe.mode != "bubblewrap":
        pytest.skip(f"needs a working bubblewrap: {probe.reason}")
    return probe


@pytest.fixture()
def fresh_probe() -> Iterator[None]:
    """Forget the cached probe before and after, so a faked bwrap does not leak into other tests."""
    probe_sandbox.cache_clear()
    yield
    probe_sandbox.cache_clear()


def sandboxed(root: Path, **options: object) -> ToolBox:
    return ToolBox(root, allow_bash=True, sandbox="bubblewrap", **options)  # type: ignore[arg-type]


def run(toolbox: ToolBox, command: str) -> tuple[str, bool]:
    outcome = toolbox.execute("bash", {"command": command})
    return outcome.content, outcome.ok


# -- the environment ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "TINY_AGENT_API_KEY",
        "TINY_AGENT_BASE_URL",
        "OPENAI_API_KEY",
        "openrouter_api_key",
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AZURE_CLIENT_ID",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GITHUB_TOKEN",
        "SSH_AUTH_SOCK",
        "KUBECONFIG",
        "DB_PASSWORD",
        "MYSQL_PWD_PASSWD",
        "SESSION_COOKIE",
        "HTTP_AUTHORIZATION",
        "Some_Secret_Thing",
    ],
)
def test_credential_names_are_recognised(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "TMPDIR", "EDITOR"])
def test_ordinary_names_are_not_credentials(name: str) -> None:
    assert not is_secret_name(name)


def test_the_environment_is_an_allow_list_with_credentials_denied_on_top() -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/someone",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_SECRET": "never",  # allowed by prefix, denied by name
        "TERM": "xterm",
        "TMPDIR": "/var/tmp/someone",
        "TINY_AGENT_API_KEY": KEY,
        "OPENAI_API_KEY": OTHER_KEY,
        "DATABASE_URL": "postgres://user:hunter22@db/app",  # no credential word, dropped by the allow-list
        "PYTHONPATH": "/somewhere",
    }
    outside = scrubbed_environment(environ, sandboxed=False)
    assert outside == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/someone",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "TMPDIR": "/var/tmp/someone",
    }
    inside = scrubbed_environment(environ, sandboxed=True)
    assert inside["TMPDIR"] == "/tmp"  # the private /tmp: an inherited TMPDIR elsewhere is read-only there


def test_a_missing_path_gets_the_default() -> None:
    assert scrubbed_environment({}, sandboxed=False) == {"PATH": os.defpath}


# -- the command line -----------------------------------------------------------------


def test_bubblewrap_argv_mounts_in_the_right_order(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    argv = bubblewrap_argv("/usr/bin/bwrap", tmp_path, ["bash", "-c", "true"], read_only=[sessions])
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--die-with-parent", "--new-session", "--unshare-all"):
        assert flag in argv

    def position(*triple: str) -> int:
        for index in range(len(argv) - len(triple) + 1):
            if tuple(argv[index : index + len(triple)]) == triple:
                return index
        raise AssertionError(f"{triple} not in {argv}")

    root = str(tmp_path)
    read_only_root = position("--ro-bind", "/", "/")
    private_tmp = position("--tmpfs", "/tmp")
    private_run = position("--tmpfs", "/run")
    writable = position("--bind", root, root)
    protected = position("--ro-bind-try", str(sessions), str(sessions))
    # Later mounts cover earlier ones: the working directory may lie in /tmp, the sessions in it.
    assert read_only_root < private_tmp < writable < protected
    assert private_run < writable
    assert argv[argv.index("--") :] == ["--", "bash", "-c", "true"]
    assert argv[argv.index("--chdir") + 1] == root


# -- detection --------------------------------------------------------------------------


def fake_bwrap(directory: Path, script: str) -> Path:
    directory.mkdir()
    path = directory / "bwrap"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_without_bwrap_the_mode_is_none_and_the_notice_says_why(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    probe = probe_sandbox()
    assert probe.mode == "none"
    assert probe.reason == "bubblewrap (bwrap) is not installed"
    notice = unconfined_notice(probe)
    assert notice == (
        "bash is not sandboxed: bubblewrap (bwrap) is not installed; "
        "a command can read and write anything you can, and use the network"
    )
    assert "\n" not in notice


def test_a_bwrap_that_cannot_make_namespaces_is_tried_once_and_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    tries = tmp_path / "tries"
    refusal = 'echo "bwrap: No permissions to creating new namespace" >&2\nexit 1\n'
    fake = fake_bwrap(tmp_path / "bin", f'echo try >> "{tries}"\n{refusal}')
    monkeypatch.setattr("shutil.which", lambda name: str(fake))
    first = probe_sandbox()
    second = probe_sandbox()
    assert first is second
    assert tries.read_text() == "try\n"  # probed once per process, then cached
    assert first.mode == "none"
    assert "cannot create a sandbox here (bwrap: No permissions to creating new namespace)" in first.reason
    with pytest.raises(SandboxUnavailable, match="bash must run in bubblewrap, but bwrap is installed but cannot"):
        resolve_sandbox("bubblewrap")
    toolbox = ToolBox(tmp_path, allow_bash=True)
    assert toolbox.sandbox_mode == "none"
    assert toolbox.unconfined_notice is not None
    content, ok = run(toolbox, "echo still runs")
    assert ok
    assert content.splitlines()[:2] == ["[sandbox: none]", "still runs"]


def test_a_required_sandbox_that_is_missing_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(SandboxUnavailable) as caught:
        ToolBox(Path("."), allow_bash=True, sandbox="bubblewrap")
    assert caught.value.exit_code == 2
    assert str(caught.value) == "CONFIG: bash must run in bubblewrap, but bubblewrap (bwrap) is not installed"


def test_no_probe_when_bash_is_not_offered(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    def refuse(name: str) -> None:
        raise AssertionError("probed although bash is not offered")

    monkeypatch.setattr("shutil.which", refuse)
    toolbox = ToolBox(Path("."))
    assert toolbox.sandbox_mode is None
    assert toolbox.unconfined_notice is None


# -- the real sandbox -----------------------------------------------------------------------


def test_sandboxed_bash_says_so_and_prints_no_notice(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    toolbox = sandboxed(tmp_path)
    assert toolbox.sandbox_mode == "bubblewrap"
    assert toolbox.unconfined_notice is None
    content, ok = run(toolbox, "pwd")
    assert ok
    assert content.splitlines() == ["[sandbox: bubblewrap]", str(tmp_path.resolve()), "", "[exit status 0]"]


def test_env_shows_no_key(tmp_path: Path, bubblewrap: SandboxProbe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OTHER_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value-123456")
    content, ok = run(sandboxed(tmp_path), "env; cat /proc/self/environ | tr '\\0' '\\n'")
    assert ok
    for leaked in (KEY, OTHER_KEY, "aws-secret-value-123456", "TINY_AGENT", "OPENAI_API_KEY", "AWS_"):
        assert leaked not in content
    assert "PATH=" in content


def test_writing_outside_the_working_directory_fails(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    name = f"tiny-agent-escape-{uuid.uuid4().hex}"
    home = Path(os.path.expanduser("~"))
    commands = {Path("/etc") / name: f"touch /tmp/../etc/{name}", home / name: f'touch "$HOME/{name}"'}
    try:
        for target, command in commands.items():
            content, ok = run(sandboxed(tmp_path), command)
            assert not ok, content
            assert "Read-only file system" in content
            assert not target.exists()
    finally:
        for target in commands:
            if target.exists():
                target.unlink()


def test_a_sibling_of_the_working_directory_under_tmp_is_not_the_real_one(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    """The working directory may lie in /tmp; its neighbours inside the sandbox are in the private /tmp."""
    sibling = tmp_path.parent / f"tiny-agent-escape-{uuid.uuid4().hex}"
    content, ok = run(sandboxed(tmp_path), f"touch '{sibling}'")
    assert not sibling.exists(), content


def test_tmp_is_private(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    name = f"tiny-agent-private-{uuid.uuid4().hex}"
    content, ok = run(sandboxed(tmp_path), f"echo inside > /tmp/{name} && cat /tmp/{name} && echo $TMPDIR")
    assert ok
    assert content.splitlines()[1:3] == ["inside", "/tmp"]
    assert not (Path("/tmp") / name).exists()


def test_run_is_empty_so_its_sockets_are_out_of_reach(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    content, ok = run(sandboxed(tmp_path), "ls -A /run | wc -l")
    assert ok
    assert content.splitlines()[1].strip() == "0"


def test_writing_inside_the_working_directory_works(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    content, ok = run(sandboxed(tmp_path), "mkdir -p out && echo made > out/file.txt && cat out/file.txt")
    assert ok, content
    assert (tmp_path / "out" / "file.txt").read_text() == "made\n"


def test_protected_paths_stay_read_only_inside(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "journal.jsonl").write_text("kept\n")
    toolbox = sandboxed(tmp_path, protected=[Path("sessions")])
    content, ok = run(toolbox, "cat sessions/journal.jsonl && echo forged > sessions/journal.jsonl")
    assert not ok
    assert "kept" in content
    assert "Read-only file system" in content
    content, ok = run(toolbox, "rm -rf sessions")
    assert not ok
    assert (sessions / "journal.jsonl").read_text() == "kept\n"


class Listener:
    """A TCP server on 127.0.0.1 outside the sandbox that records whether anyone connected."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.server.close()


def test_the_network_is_unreachable(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    listener = Listener()
    try:
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo connected"
        outside, outside_ok = run(ToolBox(tmp_path, allow_bash=True, sandbox="none"), probe)
        assert outside_ok and "connected" in outside  # the server works: only the sandbox keeps the command out
        until(lambda: listener.connections == 1, "the listener accepted the outside connection")
        content, ok = run(sandboxed(tmp_path), probe)
        assert not ok
        assert "connected" not in content
        assert "Connection refused" in content or "Network is unreachable" in content
        # A marker connection from outside: accepts come in order, so once it is counted any connection the
        # sandbox had made would have been counted before it.
        socket.create_connection(("127.0.0.1", listener.port), timeout=10).close()
        until(lambda: listener.connections >= 2, "the listener accepted the marker connection")
        assert listener.connections == 2
    finally:
        listener.close()


def test_a_timeout_kills_everything_in_the_sandbox(tmp_path: Path, bubblewrap: SandboxProbe) -> None:
    toolbox = ToolBox(tmp_path, allow_bash=True, sandbox="bubblewrap", bash_timeout=0.5)
    command = "(sleep 1.5; echo late > late.txt) & setsid bash -c 'sleep 1.5; echo late > setsid.txt' & sleep 30; echo done > done.txt"
    content, ok = run(toolbox, command)
    assert not (tmp_path / "done.txt").exists(), "the call returned when the command was killed, not when it ended"
    assert not ok
    assert content == "[sandbox: bubblewrap]\nError: command timed out after 0.5 s and was killed"
    time.sleep(2.5)
    assert not (tmp_path / "late.txt").exists()
    assert not (tmp_path / "setsid.txt").exists()  # setsid leaves the group, not the PID namespace
