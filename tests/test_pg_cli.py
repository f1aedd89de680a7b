"""The command line on the PostgreSQL store: export byte for byte and verified, import round trips, a corrupt import refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"


def tiny(cwd: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_")}
    env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_SESSIONS_DIR=str(cwd / "sessions"))
    if store is not None:
        env["TINY_AGENT_STORE"] = store
        del env["TINY_AGENT_SESSIONS_DIR"]
    return subprocess.run([sys.executable, "-m", "tiny_agent", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_demo_in_the_database_exports_the_file_the_file_store_holds(tmp_path: Path, pg_url: str) -> None:
    ran = tiny(tmp_path, "demo", store=pg_url)
    assert ran.returncode == 0, ran.stderr
    (row,) = json.loads(tiny(tmp_path, "sessions", "--json", store=pg_url).stdout)
    exported = tmp_path / "out.jsonl"
    assert tiny(tmp_path, "export", row["handle"], "-o", str(exported), store=pg_url).returncode == 0
    verified = tiny(tmp_path, "verify", str(exported))
    assert verified.returncode == 0 and verified.stdout.startswith("OK"), verified.stdout
    # The same bytes in the file store: import there, and its journal file is the export.
    assert tiny(tmp_path, "import", str(exported)).returncode == 0
    (journal,) = (tmp_path / "sessions").glob("*.jsonl")
    assert journal.read_bytes() == exported.read_bytes()
    assert tiny(tmp_path, "verify", "--all", store=pg_url).returncode == 0


def test_import_then_export_is_the_same_file_and_again_is_found(tmp_path: Path, pg_url: str) -> None:
    source = EXAMPLES / "tool-run.jsonl"
    first = tiny(tmp_path, "import", str(source), "--json", store=pg_url)
    assert first.returncode == 0, first.stderr
    imported = json.loads(first.stdout)
    again = tiny(tmp_path, "import", str(source), "--json", store=pg_url)
    assert json.loads(again.stdout)["already"] is True
    out = tmp_path / "back.jsonl"
    assert tiny(tmp_path, "export", imported["handle"], "-o", str(out), store=pg_url).returncode == 0
    assert out.read_bytes() == source.read_bytes()
    replayed = tiny(tmp_path, "replay", imported["handle"], store=pg_url)
    assert replayed.returncode == 0 and "integrity: sealed" in replayed.stdout


def test_a_corrupt_file_is_refused_with_its_reducer_error_and_nothing_is_stored(tmp_path: Path, pg_url: str) -> None:
    refused = tiny(tmp_path, "import", str(EXAMPLES / "tampered.jsonl"), store=pg_url)
    assert refused.returncode == 65
    assert refused.stderr.startswith("SEAL_MISMATCH at line ")
    listed = tiny(tmp_path, "sessions", "--all", "--json", store=pg_url)
    assert json.loads(listed.stdout) == []


def test_no_psycopg_needed_for_the_file_store_and_a_missing_server_is_unavailable(tmp_path: Path) -> None:
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('psycopg loaded: %s' % ('psycopg' in sys.modules)))\n"
        "from tiny_agent.cli import main\n"
        f"main(['replay', {str(EXAMPLES / 'tool-run.jsonl')!r}])\n"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert completed.returncode == 0 and completed.stderr.endswith("psycopg loaded: False")
    gone = tiny(tmp_path, "sessions", store="postgresql://someone:hunter2@127.0.0.1:1/test")
    assert gone.returncode == 69 and gone.stderr.startswith("UNAVAILABLE: postgresql://someone@127.0.0.1:1/test: ")
    assert "hunter2" not in gone.stderr


def test_a_malformed_store_url_is_a_config_error_in_one_line_that_never_shows_the_password(tmp_path: Path) -> None:
    for url in (
        "postgresql://u:hunter2@[::1:5432/test",  # an unclosed [
        "postgresql://u:hunter2@127.0.0.1:port/test",  # a port that is not a number
        "postgresql://u:hunter2@127.0.0.1:5432/test?no_such_option=1",  # what libpq refuses
        "postgresql://u:hunter2%zz@127.0.0.1:5432/test",  # a broken percent escape in the password itself
    ):
        for command in (("sessions",), ("replay", "abcd"), ("verify", "--all")):
            done = tiny(tmp_path, *command, store=url)
            assert (done.returncode, done.stdout) == (2, ""), (url, command, done.stderr)
            assert done.stderr.startswith("CONFIG: ") and done.stderr.count("\n") == 1, done.stderr
            assert "hunter2" not in done.stderr
