"""Shared test plumbing: where the read-only conformance data lives."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# Hypothesis has clocks of its own: a 200 ms deadline per example and a "too slow" health check.  On a
# loaded machine those fail a correct test, so neither applies anywhere (a test may still set its own).
settings.register_profile("no-clocks", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("no-clocks")


def shared_dir() -> Path:
    """``../shared`` beside the project root, unless TINY_AGENT_SHARED points elsewhere."""
    override = os.environ.get("TINY_AGENT_SHARED")
    return Path(override) if override else PROJECT_ROOT.parent / "shared"


def conformance_dir() -> Path:
    return shared_dir() / "conformance" / "tiny-agent-session-v2"


@pytest.fixture(autouse=True)
def _no_secrets_from_other_tests():
    """Each test starts with a process that holds no secrets (a runtime built by another test remembers its key)."""
    from tiny_agent.journal.secrets import Secrets, remember

    remember(Secrets(), replace=True)
    yield
    remember(Secrets(), replace=True)


@pytest.fixture(scope="session")
def conformance() -> Path:
    path = conformance_dir()
    if not path.is_dir():
        pytest.fail(f"conformance fixtures not found at {path} (set TINY_AGENT_SHARED)")
    return path


def until(ready: Callable[[], bool], what: str, process: subprocess.Popen[str] | None = None, seconds: float = 60.0) -> None:
    """Wait for ``ready()``; fail naming ``what`` if it has not happened in ``seconds`` (generous: a loaded
    machine is slow, not wrong), or at once if ``process`` ended meanwhile."""
    deadline = time.monotonic() + seconds
    while not ready():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended before {what}: {process.communicate()}")
        assert time.monotonic() < deadline, f"{what}: not within {seconds:g} s"
        time.sleep(0.02)


# -- PostgreSQL: a scratch schema per test, all of a run's dropped at its end --------------------------

PG_ENV = "TINY_AGENT_TEST_POSTGRES"
"""A base URL for the PostgreSQL tests (default: the local server, as user postgres, then as the current user)."""

_PG_CANDIDATES = ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://127.0.0.1:5432/test")


class Postgres:
    """A reachable server and this run's schemas on it: each test gets a fresh one through ``schema_url``."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base
        self.prefix = f"tiny_agent_test_{os.getpid()}_{os.urandom(3).hex()}"
        self.admin = psycopg.connect(base, autocommit=True, connect_timeout=5)
        self.count = 0

    def schema_url(self) -> str:
        self.count += 1
        schema = f"{self.prefix}_{self.count}"
        self.admin.execute(f'CREATE SCHEMA "{schema}"')
        return self.url_for(schema)

    def url_for(self, schema: str) -> str:
        joiner = "&" if "?" in self.base else "?"
        return f"{self.base}{joiner}options=-csearch_path%3D{schema}"

    def drop_all(self) -> None:
        rows = self.admin.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (self.prefix + "%",)).fetchall()
        for (schema,) in rows:
            self.admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        self.admin.close()


def isolated_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readme: str) -> Path:
    """``tmp_path/work`` with a README, made current; sessions and config beside it; no keys or tiny-agent settings from the host."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text(readme)
    monkeypatch.chdir(root)
    for name in list(os.environ):
        if name.endswith("_API_KEY") or name.startswith("TINY_AGENT_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root


def _reachable_postgres() -> tuple[str | None, str]:
    """A base URL that connects, or None and why not (the tests that need it skip with that reason)."""
    try:
        import psycopg
    except ImportError:
        return None, "psycopg is not installed (pip install 'tiny-agent[postgres]')"
    configured = os.environ.get(PG_ENV)
    reasons = []
    for base in (configured,) if configured else _PG_CANDIDATES:
        try:
            psycopg.connect(base, autocommit=True, connect_timeout=3).close()
        except psycopg.Error as error:
            reasons.append(f"{base}: {' '.join(str(error).split())}")
            continue
        return base, ""
    return None, "no PostgreSQL server reachable (" + "; ".join(reasons) + ")"


@pytest.fixture(scope="session")
def postgres():
    base, why = _reachable_postgres()
    if base is None:
        pytest.skip(why)
    server = Postgres(base)
    yield server
    server.drop_all()


@pytest.fixture()
def pg_url(postgres: Postgres) -> str:
    """A store URL whose tables live in a schema of this test's own."""
    return postgres.schema_url()


# -- one suite, either store: what the agent and crash suites run against -------------------------------

STORES = ("file", "postgres")


class StoreUnderTest:
    """Where a test's sessions live (a directory, or a scratch schema), and each journal's bytes as a file to check.

    For PostgreSQL, :meth:`journals` writes each session's rows out as the
    file the file store would hold (``<stamp>_<id>.jsonl``, fresh on every
    call), so every check on a journal's bytes runs unchanged on both stores.
    """

    def __init__(self, kind: str, root: Path, url: str | None = None) -> None:
        self.kind = kind
        self.root = root
        self.url = url

    @property
    def env(self) -> dict[str, str]:
        if self.url is None:
            return {"TINY_AGENT_SESSIONS_DIR": str(self.root / "sessions")}
        return {"TINY_AGENT_STORE": self.url}

    def journals(self) -> list[Path]:
        if self.url is None:
            return sorted((self.root / "sessions").glob("*.jsonl"))
        import time

        import psycopg

        out = self.root / "exported"
        out.mkdir(exist_ok=True)
        for old in out.glob("*.jsonl"):
            old.unlink()
        with psycopg.connect(self.url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('tiny_agent_sessions')").fetchone() == (None,):
                return []
            for session_id, created in conn.execute("SELECT id, created_at FROM tiny_agent_sessions").fetchall():
                rows = conn.execute("SELECT bytes FROM tiny_agent_lines WHERE session_id = %s ORDER BY line", (session_id,))
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(created / 1000))
                (out / f"{stamp}_{session_id}.jsonl").write_bytes(b"".join(bytes(row[0]) + b"\n" for row in rows))
        return sorted(out.glob("*.jsonl"))

    def newest(self) -> Path | None:
        found = self.journals()
        return found[-1] if found else None


@pytest.fixture(params=STORES)
def store_under_test(request, tmp_path: Path) -> StoreUnderTest:
    """Each test that asks for it runs once per store (the PostgreSQL run skips, saying why, without a server)."""
    if request.param == "file":
        return StoreUnderTest("file", tmp_path)
    return StoreUnderTest("postgres", tmp_path, request.getfixturevalue("pg_url"))
