"""MCP servers as tools (issue 25), against real servers: the conformance suite's client scenarios,
server-everything over stdio and Streamable HTTP, server-filesystem, and whole runs (a loopback
model calls a server's tool; the journal replays, audits and verifies; a SIGKILL mid-call is
answered "interrupted" on resume, never called again).  Without the kit (.ci/install-mcp) the
tests that need it skip, saying why.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import replies
from conftest import PROJECT_ROOT

from tiny_agent.agent.tools.mcp import SCHEMA_DEPTH, schema_problem, servers_from_flags, tool_name
from tiny_agent.errors import ConfigError, CorruptionError, McpUnavailable, UsageError
from tiny_agent.journal.facts import McpFact, decode_fact
from tiny_agent.journal.secrets import known, redact_facts
from tiny_agent.journal.transcript import SYNTHETIC_TEXTS, ToolMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.providers.userconfig import parse_user_config
from tiny_agent.stores.files import disk
from tiny_agent.stores.journal import facts_of, read_journal

KIT = Path(os.environ.get("TINY_AGENT_MCP_KIT") or Path.home() / ".cache/tiny-agent-ci/mcp") / "paths.json"


def _kit() -> dict[str, str]:
    try:
        paths = json.loads(KIT.read_text())
    except (OSError, ValueError):
        pytest.skip(f"the MCP kit is not installed ({KIT} missing; .ci/install-mcp installs it)")
    if not all(Path(path).exists() for path in paths.values()):
        pytest.skip(f"the MCP kit at {KIT.parent} is incomplete; run .ci/install-mcp")
    return paths


@pytest.fixture(scope="module")
def kit() -> dict[str, str]:
    return _kit()


def everything(kit: dict[str, str]) -> str:
    return f"everything={kit['TINY_AGENT_MCP_NODE']} {kit['TINY_AGENT_MCP_SERVER_EVERYTHING']}"


def wire_messages(fact_list: list[McpFact]) -> list[dict[str, Any]]:
    found = []
    for fact in fact_list:
        for message in fact.messages:
            if isinstance(message.body, str) and message.body.startswith("{"):
                found.append(json.loads(message.body) | {"_direction": message.direction, "_link": fact.toolStartedId})
    return found


# -- names, limits, configuration (no server needed) -------------------------------------------


def test_tool_names_are_sanitised_bounded_and_collision_free():
    taken: set[str] = set()
    assert tool_name("everything", "get-sum", taken) == "mcp__everything__get-sum"
    assert tool_name("my server", "a.b/c", taken) == "mcp__my_server__a_b_c"
    again = tool_name("my server", "a b c", taken)  # sanitises to the same name: a hash tells them apart
    assert again != "mcp__my_server__a_b_c" and again.startswith("mcp__my_server__a_b_c_") and len(again) <= 64
    long = tool_name("s", "x" * 200, taken)
    assert len(long) == 64 and long != tool_name("s", "x" * 199, taken)


def test_schemas_past_the_limits_are_refused_with_a_reason():
    assert schema_problem({"type": "object", "properties": {"a": {"type": "string"}}}) is None
    assert "type" in (schema_problem({"type": "string"}) or "")
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(SCHEMA_DEPTH):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    assert "deeper" in (schema_problem(deep) or "")
    assert "bytes" in (schema_problem({"type": "object", "description": "x" * 40_000}) or "")


def test_flags_name_servers():
    configured = parse_user_config(b'[mcp.docs]\nurl = "https://docs.example/mcp"\nallowed_tools = ["search"]\n', "c").mcp
    servers = servers_from_flags(["docs", "http://127.0.0.1:9/mcp", "node server.js --flag", "fs=npx x /tmp", "node b.js"], configured)
    assert [(s.name, s.url, s.command, s.args) for s in servers] == [
        ("docs", "https://docs.example/mcp", None, ()),
        ("127_0_0_1", "http://127.0.0.1:9/mcp", None, ()),
        ("node", None, "node", ("server.js", "--flag")),
        ("fs", None, "npx", ("x", "/tmp")),
        ("node2", None, "node", ("b.js",)),
    ]
    assert servers[0].allowed_tools == ("search",)
    with pytest.raises(UsageError):
        servers_from_flags(["a=x", "a=y"], {})


@pytest.mark.parametrize(
    "toml, problem",
    [
        (b'[mcp.a]\nurl = "https://x"\nheaders = { Authorization = "Bearer sk-123" }', "referenced as ${VARIABLE}"),
        (b'[mcp.a]\nurl = "https://x"\ncommand = "y"', "exactly one of url"),
        (b'[mcp.a]\ncommand = "y"\nheaders = { X = "1" }', "url) only"),
        (b'[mcp.a]\ncommand = "y"\ncall_timeout = 0', "call_timeout"),
        (b'[mcp.A]\ncommand = "y"', "server name"),
    ],
)
def test_bad_server_tables_are_one_line_config_errors(toml, problem):
    with pytest.raises(ConfigError, match=None) as caught:
        parse_user_config(toml, "c.toml")
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def _journal_with(fact: dict[str, Any]) -> list[bytes]:
    """A v3 journal of a header and one mcp fact line (the seal computed), as bytes lines."""
    from tiny_agent.fold.fold import Fold

    header = {"kind": "header", "version": 3, "id": "0190a0a0-0000-7000-8000-000000000001", "createdAt": 1, "cwd": "/w",
              "provider": "p", "model": "m", "environmentIdentity": "/w"}
    fold = Fold()
    head = msgspec.json.encode(header)
    fold.apply_header(head)
    seal = {"kind": "seal", "seq": 2, "id": "0190a0a0-0000-7000-8000-000000000003", "timestamp": 1, "chain": fold.chain}
    line = msgspec.json.encode([fact, seal])
    fold.apply_line(line)
    return [head, line]


MCP_FACT = {"kind": "mcp", "seq": 1, "id": "0190a0a0-0000-7000-8000-000000000002", "timestamp": 1, "server": "s",
            "messages": [{"direction": "send", "body": "{}"}, {"direction": "recv", "method": "POST", "url": "http://h/",
                                                              "status": 200, "contentType": None, "bodyBase64": "AA=="}]}


def test_the_fold_takes_mcp_facts_with_exact_keys_and_fails_closed():
    _journal_with(MCP_FACT)
    bad = [
        ({**MCP_FACT, "extra": 1}, 'unknown key "extra"'),
        ({**MCP_FACT, "messages": []}, "non-empty array"),
        ({**MCP_FACT, "messages": [{"direction": "up", "body": ""}]}, "direction"),
        ({**MCP_FACT, "messages": [{"direction": "send", "body": "", "bodyBase64": ""}]}, "exactly one"),
        ({**MCP_FACT, "messages": [{"direction": "send", "body": "", "x": 1}]}, 'unknown key "x"'),
        ({**MCP_FACT, "toolStartedId": "0190a0a0-0000-7000-8000-000000000009"}, "names no toolStarted"),
    ]
    for fact, reason in bad:
        with pytest.raises(CorruptionError) as caught:
            _journal_with(fact)
        assert reason in str(caught.value)


# -- real servers through McpTools ----------------------------------------------------------------


def hub(server: str, **options: Any) -> tuple[Any, list[McpFact], list[str]]:
    from tiny_agent.agent.tools.mcp.hub import McpTools

    spoken: list[str] = []
    tools = McpTools(servers_from_flags([server], {}), report=spoken.append, **options)
    found: list[McpFact] = []
    tools.commit = found.extend
    return tools, found, spoken


def test_server_everything_over_stdio(kit):
    tools, found, spoken = hub(everything(kit), allow=["everything"])
    try:
        names = [spec.name for spec in tools.specs()]
        assert "mcp__everything__echo" in names and "mcp__everything__simulate-research-query" not in names
        assert any("simulate-research-query is not offered" in line for line in spoken)
        echo = tools.execute("mcp__everything__echo", {"message": "h\u00e9llo \u2028 \U0001f600"}, None)
        assert echo.ok and echo.content.endswith("Echo: h\u00e9llo \u2028 \U0001f600")
        image = tools.execute("mcp__everything__get-tiny-image", {}, None)
        assert image.ok and "[image image/png, 5380 base64 characters; kept in the journal]" in image.content
        failed = tools.execute("mcp__everything__get-sum", {"a": "x", "b": 1}, None)
        assert not failed.ok and "Error: " in failed.content
    finally:
        tools.close()
    messages = wire_messages(found)
    methods = [m.get("method") for m in messages if m["_direction"] == "send"]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    assert methods.count("tools/call") == 3
    images = [m for m in messages if "result" in m and any(c.get("type") == "image" for c in m["result"].get("content", []))]
    assert len(images[0]["result"]["content"][1]["data"]) == 5380  # the raw bytes are journaled whole


def test_a_timed_out_call_is_cancelled_per_the_protocol(kit):
    from tiny_agent.providers.userconfig import McpServer

    command, *args = everything(kit).split("=", 1)[1].split()
    from tiny_agent.agent.tools.mcp.hub import McpTools

    tools = McpTools([McpServer(name="e", command=command, args=tuple(args), call_timeout=3, allowed_tools=("*",))])
    found: list[McpFact] = []
    tools.commit = found.extend
    try:
        outcome = tools.execute("mcp__e__trigger-long-running-operation", {"duration": 60, "steps": 5}, None)
        # 3 s, not less: the echo after it must answer within the same limit on a loaded machine
        assert not outcome.ok and "no answer within 3 s" in outcome.content
        assert tools.execute("mcp__e__echo", {"message": "still there"}, None).ok
    finally:
        tools.close()
    sent = [m for m in wire_messages(found) if m["_direction"] == "send"]
    call = next(m for m in sent if m.get("method") == "tools/call")
    cancel = next(m for m in sent if m.get("method") == "notifications/cancelled")
    assert cancel["params"]["requestId"] == call["id"]


def test_servers_that_fail_at_start_are_one_line_errors(kit, tmp_path):
    node = kit["TINY_AGENT_MCP_NODE"]
    script = tmp_path / "bad.js"
    script.write_text("console.error('fatal: no config'); process.exit(3)")
    silent = tmp_path / "silent.js"
    silent.write_text("setInterval(() => {}, 1000)")
    garbage = tmp_path / "garbage.js"
    garbage.write_text("process.stdin.on('data', () => process.stdout.write('not json\\n'))")
    from tiny_agent.agent.tools.mcp.hub import McpTools
    from tiny_agent.providers.userconfig import McpServer

    cases = [
        (McpServer(name="a", command="/nonexistent/server"), "cannot start the server"),
        (McpServer(name="b", command=node, args=(str(script),)), "fatal: no config"),
        (McpServer(name="c", command=node, args=(str(silent),), startup_timeout=1), "within 1 s"),
        (McpServer(name="d", command=node, args=(str(garbage),), startup_timeout=1), "within 1 s"),
        (McpServer(name="e", url=f"http://127.0.0.1:{_free_port()}/mcp", startup_timeout=5), "cannot reach the server"),
    ]
    for server, reason in cases:
        with pytest.raises(McpUnavailable) as caught:
            McpTools([server])
        message = str(caught.value)
        assert message.startswith(f"MCP: MCP server {server.name}: ") and reason in message and "\n" not in message


def test_refusals_are_said_on_stderr_and_approvals_journaled(kit):
    answers = iter(["no", "always"])
    asked: list[str] = []

    def approve(server: str, tool: str, arguments: dict[str, Any]) -> Any:
        asked.append(tool)
        return next(answers)

    tools, _, spoken = hub(everything(kit))
    try:
        refused = tools.execute("mcp__everything__echo", {"message": "x"}, None)
        assert not refused.ok and "no terminal to ask" in refused.content
        assert spoken[-1] == "mcp: not running everything/echo: not in everything's allowed_tools, no --allow-mcp everything, and no terminal to ask"
        tools.approve = approve
        assert "the user declined" in tools.execute("mcp__everything__echo", {"message": "x"}, None).content
        first = tools.execute("mcp__everything__echo", {"message": "x"}, None)
        second = tools.execute("mcp__everything__get-sum", {"a": 1, "b": 2}, None)
        assert first.content.startswith("[mcp everything: approved by the user: always for this server]")
        assert second.ok and second.content.startswith("[mcp everything: approved by the user: always for this server]")
        assert asked == ["echo", "echo"]
    finally:
        tools.close()


def test_an_always_answer_on_record_is_remembered(kit):
    from types import SimpleNamespace

    tools, _, _ = hub(everything(kit))
    try:
        earlier = ToolMessage(content="[mcp everything: approved by the user: always for this server]\nEcho: x", tool_call_id="c")
        tools.attach(lambda facts: None, SimpleNamespace(version=3, transcript=[earlier]))
        assert tools.execute("mcp__everything__echo", {"message": "y"}, None).ok
    finally:
        tools.close()


def test_secrets_given_to_a_server_are_redacted_from_the_journal(kit):
    from tiny_agent.agent.tools.mcp.hub import McpTools
    from tiny_agent.providers.userconfig import McpServer

    command, *args = everything(kit).split("=", 1)[1].split()
    server = McpServer(name="e", command=command, args=tuple(args), env={"MY_TOKEN": "${TEST_MCP_SECRET}"}, allowed_tools=("*",))
    tools = McpTools([server], environ={"TEST_MCP_SECRET": "s3cret-value-1234"})
    found: list[McpFact] = []
    tools.commit = lambda facts: found.extend(redact_facts(facts))  # as the journal's writer commits them
    try:
        shown = tools.execute("mcp__e__get-env", {}, None)
    finally:
        tools.close()
    assert "s3cret-value-1234" in known().values  # the process hides it from now on, as every secret it holds
    assert shown.ok
    journaled = msgspec.json.encode(found)
    assert b"s3cret-value-1234" not in journaled and b"[REDACTED]" in journaled
    assert any(m.redactions for fact in found for m in fact.messages if m.redactions is not msgspec.UNSET)
    with pytest.raises(ConfigError, match=r"\$\{TEST_MCP_SECRET\}, which is not set"):
        McpTools([server], environ={})


def test_a_dead_server_fails_the_call_and_the_next_call_reconnects(kit):
    tools, found, _ = hub(everything(kit), allow=["everything"])
    try:
        assert tools.execute("mcp__everything__echo", {"message": "one"}, None).ok
        (server,) = [pid for pid in _children(os.getpid()) if "server-everything" in Path(f"/proc/{pid}/cmdline").read_text()]
        os.kill(server, signal.SIGKILL)
        dead = tools.execute("mcp__everything__echo", {"message": "two"}, None)
        assert not dead.ok and "MCP server everything:" in dead.content
        again = tools.execute("mcp__everything__echo", {"message": "three"}, None)
        assert again.ok and again.content.endswith("Echo: three")
    finally:
        tools.close()
    sent = [m.get("method") for m in wire_messages(found) if m["_direction"] == "send"]
    assert sent.count("initialize") == 2


@pytest.mark.parametrize("typed, answer", [("y\n", "yes"), ("a\n", "always"), ("\n", "no"), ("nope\n", "no"), ("", "closed")])
def test_the_terminal_question(monkeypatch, typed, answer):
    import io

    from tiny_agent.agent.tools.mcp.hub import ask_on_terminal

    prompts = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    monkeypatch.setattr(sys, "stderr", prompts)
    assert ask_on_terminal("everything", "echo\x1b[2J", {"message": "\u202e"}) == answer
    shown = prompts.getvalue()
    assert "run MCP tool echo\\x1b[2J of server everything" in shown and "\\u202e" in shown and "\x1b" not in shown


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture()
def http_everything(kit):
    port = _free_port()
    process = subprocess.Popen(
        [kit["TINY_AGENT_MCP_NODE"], kit["TINY_AGENT_MCP_SERVER_EVERYTHING"], "streamableHttp"],
        env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("server-everything (streamableHttp) did not listen within 30 s")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def test_server_everything_over_streamable_http(http_everything):
    tools, found, _ = hub(f"everything={http_everything}", allow=["everything"])
    try:
        assert tools.execute("mcp__everything__echo", {"message": "over http"}, None).content.endswith("Echo: over http")
        link = tools.execute("mcp__everything__get-resource-links", {"count": 2}, None)
        assert "[resource link demo://resource/dynamic/" in link.content
    finally:
        tools.close()
    posts = [m for fact in found for m in fact.messages if m.method == "POST"]
    assert posts and all(m.url == http_everything and m.direction == "send" for m in posts)
    answers = [m for fact in found for m in fact.messages if m.direction == "recv" and isinstance(m.status, int)]
    assert any(m.contentType == "text/event-stream" and "Echo: over http" in str(m.body) for m in answers)
    assert any(m.method == "DELETE" for fact in found for m in fact.messages)  # the session is ended at close


def test_server_filesystem(kit, tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    server = f"fs={kit['TINY_AGENT_MCP_NODE']} {kit['TINY_AGENT_MCP_SERVER_FILESYSTEM']} {tmp_path}"
    tools, _, _ = hub(server, allow=["fs"])
    try:
        listing = tools.execute("mcp__fs__list_directory", {"path": str(tmp_path)}, None)
        assert listing.ok and "a.txt" in listing.content
        outside = tools.execute("mcp__fs__read_text_file", {"path": "/etc/hostname"}, None)
        assert not outside.ok and "Access denied" in outside.content
    finally:
        tools.close()


# -- the conformance suite, tiny-agent as the client ---------------------------------------------


@pytest.mark.parametrize(
    "scenario, checks",
    [
        ("initialize", ["mcp-client-initialization"]),
        ("tools_call", ["tool-add-numbers"]),
        ("sse-retry", ["client-sse-graceful-reconnect", "client-sse-last-event-id"]),
    ],
)
def test_conformance_client_scenarios(kit, tmp_path, scenario, checks):
    command = f"{sys.executable} {PROJECT_ROOT / 'tests' / 'mcp_conformance_client.py'}"
    subprocess.run(
        [kit["TINY_AGENT_MCP_NODE"], kit["TINY_AGENT_MCP_CONFORMANCE"], "client", "--command", command,
         "--scenario", scenario, "-o", str(tmp_path)],
        cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, capture_output=True, timeout=180,
    )
    (result,) = tmp_path.glob(f"{scenario}-*/checks.json")
    recorded = {check["id"]: check["status"] for check in json.loads(result.read_text())}
    for check in checks:  # by id; client-sse-retry-timing is the suite's wall-clock threshold: reported, not asserted
        assert recorded.get(check) == "SUCCESS", (check, recorded)
    assert "FAILURE" not in {status for name, status in recorded.items() if name != "client-sse-retry-timing"}


def test_tiny_agent_run_is_the_client_of_the_tools_call_scenario(kit, tmp_path):
    """The suite starts `tiny-agent run ... --mcp URL` itself; a loopback model calls the scenario's tool."""
    with LoopbackServer(ToolModel("mcp__localhost__add_numbers", {"a": 5, "b": 3})) as model:
        command = f"{sys.executable} -m tiny_agent run add --allow-mcp localhost --mcp"
        env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_")}
        env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_BASE_URL=model.base_url, TINY_AGENT_MODEL="test/model",
                   TINY_AGENT_CONFIG=str(tmp_path / "none.toml"), TINY_AGENT_SESSIONS_DIR=str(tmp_path / "sessions"))
        (tmp_path / "none.toml").write_text("")
        subprocess.run(
            [kit["TINY_AGENT_MCP_NODE"], kit["TINY_AGENT_MCP_CONFORMANCE"], "client", "--command", command,
             "--scenario", "tools_call", "-o", str(tmp_path / "out")],
            cwd=tmp_path, env=env, capture_output=True, timeout=180,
        )
    (result,) = (tmp_path / "out").glob("tools_call-*/checks.json")
    assert {check["id"]: check["status"] for check in json.loads(result.read_text())}["tool-add-numbers"] == "SUCCESS"
    (path,) = (tmp_path / "sessions").glob("*.jsonl")
    result_text = next(m.content for m in read_journal(path).transcript if type(m) is ToolMessage)
    assert result_text.startswith("[mcp localhost: allowed by --allow-mcp localhost]\n") and "8" in result_text


# -- whole runs -----------------------------------------------------------------------------------


class ToolModel:
    """Calls one MCP tool on the user's turn, answers "done" after the tool's result."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        self.call = (name, json.dumps(arguments))
        self.numbers = itertools.count(1)

    def __call__(self, request: Any) -> Reply:
        number = next(self.numbers)
        if request["messages"][-1]["role"] == "user":
            reply = replies.calls(self.call, ids=[f"call_{number}"])
        else:
            reply = replies.answer("done")
        return Reply(body=reply.body.replace(b'"gen-test"', f'"gen-{number}"'.encode()))


def tiny(workspace: Path, server: LoopbackServer, *args: str, wait: bool = True, **env: str) -> Any:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENROUTER_", "OPENAI_"))}
    environ.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_BASE_URL=server.base_url, TINY_AGENT_MODEL="test/model",
                   TINY_AGENT_CONFIG=str(workspace / "config.toml"), TINY_AGENT_SESSIONS_DIR=str(workspace / "sessions"), **env)
    command = [sys.executable, "-m", "tiny_agent", *args]
    if not wait:
        return subprocess.Popen(command, cwd=workspace, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=workspace, env=environ, capture_output=True, text=True, timeout=180)


@pytest.fixture()
def workspace(tmp_path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "config.toml").write_text("")
    return root


def journal(workspace: Path) -> Path:
    (path,) = (workspace / "sessions").glob("*.jsonl")
    return path


def mcp_facts(path: Path) -> list[McpFact]:
    return [fact for _, line in facts_of(disk.file_chunks(path)) for fact in line if isinstance(fact, McpFact)]


def test_a_model_calls_a_real_servers_tool_and_the_journal_replays_audits_and_verifies(kit, workspace):
    (workspace / "config.toml").write_text(
        f'[mcp.everything]\ncommand = "{kit["TINY_AGENT_MCP_NODE"]}"\nargs = ["{kit["TINY_AGENT_MCP_SERVER_EVERYTHING"]}"]\n'
        'allowed_tools = ["echo"]\n'
    )
    with LoopbackServer(ToolModel("mcp__everything__echo", {"message": "from the model"})) as model:
        done = tiny(workspace, model, "run", "--mcp", "everything", "say hi")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "done"
        offered = [tool["function"]["name"] for tool in model.requests[0].body["tools"]]
        assert "mcp__everything__echo" in offered
    path = journal(workspace)
    state = read_journal(path)
    result = next(m for m in state.transcript if type(m) is ToolMessage)
    assert result.content == "[mcp everything: allowed by the config (allowed_tools)]\nEcho: from the model"
    found = mcp_facts(path)
    linked = [fact for fact in found if fact.toolStartedId is not msgspec.UNSET]
    call = [m for m in wire_messages(linked) if m.get("method") == "tools/call"]
    assert call[0]["params"] == {"name": "echo", "arguments": {"message": "from the model"}}
    assert any(m.get("method") == "initialize" for m in wire_messages(found))
    for command in ("replay", "audit", "verify"):
        checked = tiny(workspace, model, command, str(path))
        assert checked.returncode == 0, (command, checked.stderr)
    audit = tiny(workspace, model, "audit", str(path)).stdout
    assert "everything → tools/call echo (id 3)" in audit and "kept in the transcript: [mcp everything:" in audit
    assert "everything ← initialized (id 1): mcp-servers/everything" in audit
    page = tiny(workspace, model, "view", str(path), "-o", "-").stdout
    assert "MCP exchange" in page and "tools/call echo" in page
    exported = tiny(workspace, model, "export", "--v2", str(path), "-o", str(workspace / "v2.jsonl"))
    assert exported.returncode == 0 and "mcp fact(s)" in exported.stderr
    assert read_journal(workspace / "v2.jsonl").transcript == state.transcript


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_sigkill_mid_call_is_answered_interrupted_and_never_called_again(kit, workspace):
    server = ["--mcp", everything(kit), "--allow-mcp", "everything"]
    long_call = ("mcp__everything__trigger-long-running-operation", {"duration": 60, "steps": 60})
    with LoopbackServer(ToolModel(*long_call)) as model:
        process = tiny(workspace, model, "run", *server, "go", wait=False)
        deadline = time.monotonic() + 60
        children: list[int] = []
        try:
            while True:  # until the call's request is on disk: then the call is under way
                children = children or _children(process.pid)
                sessions = list((workspace / "sessions").glob("*.jsonl"))
                sent = [m for m in wire_messages(mcp_facts(sessions[0])) if m.get("method") == "tools/call"] if sessions else []
                if sent:
                    break
                assert time.monotonic() < deadline and process.poll() is None, "the call never started"
                time.sleep(0.1)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            for child in children:  # the server lives in its own session: end it, by pid
                try:
                    os.killpg(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        before = len([m for m in wire_messages(mcp_facts(journal(workspace))) if m.get("method") == "tools/call"])
        assert before == 1
        resumed = tiny(workspace, model, "resume", str(journal(workspace)), *server)
        assert resumed.returncode == 0, resumed.stderr
    path = journal(workspace)
    state = read_journal(path)
    result = next(m for m in state.transcript if type(m) is ToolMessage)
    assert result.content == SYNTHETIC_TEXTS["interrupted"]
    calls = [m for m in wire_messages(mcp_facts(path)) if m.get("method") == "tools/call"]
    assert len(calls) == 1  # resume never called it again
    assert tiny(workspace, model, "verify", str(path)).returncode == 0


def test_a_changed_server_blocks_resume_naming_it(kit, workspace, tmp_path):
    with LoopbackServer(ToolModel("mcp__everything__echo", {"message": "x"})) as model:
        crashed = tiny(workspace, model, "run", "--mcp", everything(kit), "go", TINY_AGENT_FAILPOINT="after-commit:step-attempt")
        assert crashed.returncode != 0
        other = f"everything={kit['TINY_AGENT_MCP_NODE']} {kit['TINY_AGENT_MCP_SERVER_FILESYSTEM']} {tmp_path}"
        blocked = tiny(workspace, model, "resume", str(journal(workspace)), "--mcp", other)
        assert blocked.returncode == 75, blocked.stderr
        assert "MCP server changed: everything" in blocked.stderr and "Traceback" not in blocked.stderr
        resumed = tiny(workspace, model, "resume", str(journal(workspace)), "--mcp", everything(kit), "--allow-mcp", "everything")
        assert resumed.returncode == 0, resumed.stderr


def test_a_server_that_never_starts_is_a_one_line_error(workspace):
    with LoopbackServer([]) as model:
        failed = tiny(workspace, model, "run", "--mcp", "/nonexistent/mcp-server --stdio", "go")
    assert failed.returncode == 69
    assert failed.stderr.strip().splitlines()[-1].startswith("MCP: MCP server mcp-server: cannot start the server")
    assert "Traceback" not in failed.stderr


def test_decode_fact_reads_mcp_facts():
    fact = decode_fact(MCP_FACT)
    assert isinstance(fact, McpFact) and fact.messages[1].status == 200
