"""A real llama.cpp ``llama-server`` for tests: find the binary, start it on 127.0.0.1, stop it.

The binary and its tiny random-weight models are built by ``.ci/build-llama`` (from the llama.cpp
tree in the llama-cpp-python sdist, see ``../shared/tools/llama/``) into
``~/.cache/tiny-agent-ci/llama`` or ``$TINY_AGENT_LLAMA_DIR``:

    bin/llama-server   tiny.gguf   tiny-tools.gguf   (tiny-slow.gguf, when .ci/build-llama made it)

Without the binary every test that asks for a server is skipped, saying how to get one.

Use it as a pytest plugin, from a test module::

    pytest_plugins = ["llama_server"]

    def test_something(llama):                      # a fresh server on tiny.gguf, killed at teardown
        httpx.post(f"{llama.api_url}/chat/completions", json={...})

    def test_tools(start_llama):                    # any model, context size or extra flags
        server = start_llama("tiny-tools", context=512)
        ...
        server.kill()                               # SIGKILL, e.g. in the middle of a stream

or without pytest: ``with LlamaServer("tiny") as server: ...``.

Every wait has a deadline; nothing here measures time to assert on it.

(PYTEST_DONT_REWRITE: a test module imports this before pytest registers it as a plugin, and it
holds no test assertions.)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from conftest import isolated_workspace

LLAMA_DIR_ENV = "TINY_AGENT_LLAMA_DIR"
DEFAULT_LLAMA_DIR = Path.home() / ".cache" / "tiny-agent-ci" / "llama"
SKIP_REASON = "llama-server not built: run .ci/build-llama or set TINY_AGENT_LLAMA_DIR"

START_DEADLINE = 60.0
"""Seconds a start may take before it is a failure (a tiny model loads in well under a second)."""

STOP_DEADLINE = 10.0
"""Seconds a SIGTERM gets before SIGKILL."""

# fmt: off
DEFAULT_FLAGS: tuple[str, ...] = (
    "--jinja",  # the model's own chat template (tools, grammar-constrained tool calls)
    "-np", "1",  # one slot: requests are served one at a time, in order
    "--seed", "42",  # the server's default sampling seed (a request may still send its own `seed`)
    "-t", "1",  # one thread: the machine is shared, and a 64-wide model gains nothing from more
    "--no-webui",  # no UI (it is not built in anyway)
    "--offline",  # never reach the network (no model download)
    "--no-warmup",  # no empty warm-up run before listening
    "--log-colors", "off",
)
# fmt: on


def llama_dir() -> Path:
    """Where the binary and the models are: ``$TINY_AGENT_LLAMA_DIR``, else ``~/.cache/tiny-agent-ci/llama``."""
    override = os.environ.get(LLAMA_DIR_ENV)
    return Path(override).expanduser() if override else DEFAULT_LLAMA_DIR


def binary() -> Path | None:
    """The ``llama-server`` executable, or None when it is not built."""
    path = llama_dir() / "bin" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def model_path(model: str) -> Path:
    """A model by name (``tiny``, ``tiny-tools``, ``tiny-slow``) or by path."""
    if "/" in model or model.endswith(".gguf"):
        return Path(model)
    return llama_dir() / f"{model}.gguf"


def require(model: str = "tiny") -> tuple[Path, Path]:
    """The binary and the model, or skip the calling test, saying why."""
    executable = binary()
    if executable is None:
        pytest.skip(f"{SKIP_REASON} (looked in {llama_dir()})")
    path = model_path(model)
    if not path.is_file():
        pytest.skip(f"llama-server model {path.name} not built: run .ci/build-llama or set TINY_AGENT_LLAMA_DIR")
    return executable, path


def slow_model() -> tuple[str, int]:
    """A model and context size whose generation takes long enough to kill mid-stream: ``tiny-slow``
    (about a hundred tokens a second here) when built, else ``tiny-tools`` with a long context."""
    if model_path("tiny-slow").is_file():
        return "tiny-slow", 2048
    return "tiny-tools", 16384


def version() -> str:
    """``llama-server --version``'s first line (e.g. ``version: 0.5.0-dev (build 1, commit 0c1e570)``)."""
    executable = binary()
    if executable is None:
        return "not built"
    done = subprocess.run([str(executable), "--version"], capture_output=True, text=True, timeout=30, check=False)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return next((line for line in lines if line.startswith("version:")), lines[0] if lines else "unknown")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _health(port: int) -> int | None:
    """The status of GET /health (200 ready, 503 loading), or None when nothing answers yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as sock:
            sock.settimeout(2.0)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            head = sock.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return None
    return int(parts[1])


class LlamaServer:
    """One ``llama-server`` process on 127.0.0.1 serving one model.

    ``LlamaServer("tiny-tools", context=256).start()`` (or ``with``): waits until ``/health``
    answers 200, within ``start_deadline`` seconds. ``base_url`` is ``http://127.0.0.1:PORT``,
    ``api_url`` the OpenAI-compatible ``.../v1``. ``kill()`` ends it at once (SIGKILL: a server
    dying mid-stream), ``stop()`` politely (SIGTERM, then SIGKILL after a deadline). ``log()``
    is everything it printed.
    """

    def __init__(
        self,
        model: str = "tiny",
        *,
        context: int = 2048,
        extra: Sequence[str] = (),
        flags: Sequence[str] = DEFAULT_FLAGS,
        start_deadline: float = START_DEADLINE,
        log_dir: Path | None = None,
    ) -> None:
        self.model = model
        self.context = context
        self.extra = tuple(extra)
        self.flags = tuple(flags)
        self.start_deadline = start_deadline
        self.log_dir = log_dir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    # -- addresses ----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def chat_url(self) -> str:
        return f"{self.api_url}/chat/completions"

    def command(self, executable: Path, model: Path, port: int) -> list[str]:
        # --alias: responses name the model as requested ("tiny"), not by the file's absolute path.
        return [
            str(executable), "-m", str(model), "--alias", model.stem, "-c", str(self.context),
            "--host", "127.0.0.1", "--port", str(port), *self.flags, *self.extra,
        ]  # fmt: skip

    # -- life ---------------------------------------------------------------------------------------

    def start(self) -> LlamaServer:
        """Start it and wait for ``/health`` 200. Skips the test without the binary; fails with the log's tail otherwise."""
        executable, model = require(self.model)
        # A free port can be taken by someone else between our check and the server's bind: try a few.
        for _ in range(3):
            self._spawn(executable, model, free_port())
            if self._wait_ready():
                return self
            text = self.log()
            self.kill()
            if "bind" not in text.lower() and "address already in use" not in text.lower():
                break
        raise RuntimeError(f"llama-server did not become ready on {self.base_url}; its log ends:\n{self.log()[-2000:]}")

    def _spawn(self, executable: Path, model: Path, port: int) -> None:
        self.port = port
        directory = self.log_dir or Path(tempfile.gettempdir())
        directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"llama-server-{port}-", suffix=".log", dir=directory)
        self.log_path = Path(name)
        # The server also reads LLAMA_ARG_* variables: none of the host's may change what the tests start.
        env = {key: value for key, value in os.environ.items() if not key.startswith("LLAMA_ARG_")}
        with os.fdopen(handle, "wb") as log:
            self.process = subprocess.Popen(
                self.command(executable, model, port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal running pytest is pytest's, not the server's
            )

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.start_deadline
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if _health(self.port) == 200:
                return True
            time.sleep(0.05)
        return False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, at once (also in the middle of a response), and reap it."""
        self._signal(signal.SIGKILL, STOP_DEADLINE)

    def stop(self) -> None:
        """SIGTERM; SIGKILL if it is still there after STOP_DEADLINE seconds."""
        if not self._signal(signal.SIGTERM, STOP_DEADLINE):
            self.kill()

    def _signal(self, which: signal.Signals, deadline: float) -> bool:
        process = self.process
        if process is None or process.poll() is not None:
            return True
        try:
            process.send_signal(which)
        except ProcessLookupError:
            return True
        try:
            process.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            return False
        return True

    def log(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


# -- pytest fixtures (load with ``pytest_plugins = ["llama_server"]`` in a test module) -------------------


@pytest.fixture
def start_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LlamaServer]]:
    """A factory: ``start_llama("tiny-tools", context=256, extra=[...])`` starts a server; all are killed at teardown."""
    servers: list[LlamaServer] = []
    logs = tmp_path_factory.mktemp("llama-server")

    def start(model: str = "tiny", **options: object) -> LlamaServer:
        server = LlamaServer(model, log_dir=logs, **options)  # type: ignore[arg-type]
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.kill()


@pytest.fixture
def llama(start_llama: Callable[..., LlamaServer]) -> LlamaServer:
    """A running server on ``tiny.gguf`` (plain answers of ~20 words), killed at teardown."""
    return start_llama("tiny")


@pytest.fixture
def llama_tools(start_llama: Callable[..., LlamaServer]) -> LlamaServer:
    """A running server on ``tiny-tools.gguf`` (likely to make a grammar-constrained tool call when given tools)."""
    return start_llama("tiny-tools")


def llama_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readme: str) -> Path:
    """An isolated workspace that still finds the llama-server build (the isolation drops every TINY_AGENT_ variable)."""
    where = os.environ.get(LLAMA_DIR_ENV)
    root = isolated_workspace(tmp_path, monkeypatch, readme)
    if where is not None:
        monkeypatch.setenv(LLAMA_DIR_ENV, where)
    return root
