"""A server read with the wrong API (issue 28): the failure says in words which format answered and which flags read
it, for whole bodies and streams, in the seam, in settlement (live, resume, audit) and on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import replies
from test_replay_cli import call
from test_wire_e2e import workspace as workspace  # a fixture

from tiny_agent.agent.settlement import derive
from tiny_agent.journal.facts import RawResponse
from tiny_agent.loopback import LoopbackServer, event_stream, streamed, whole_body
from tiny_agent.wire.registry import API, APIS
from tiny_agent.wire.seam import Rejected

NAMES = {"chat": "Chat Completions", "anthropic": "Anthropic Messages", "responses": "OpenAI Responses"}


def said(answered: str, read: str) -> str:
    return f"the server answered in the {NAMES[answered]} format, not {NAMES[read]}: read it with --api {answered} "


@pytest.mark.parametrize(("answered", "read"), [(a, r) for a in APIS for r in APIS if a != r])
def test_each_api_read_as_another_names_the_format_and_the_flags(answered, read) -> None:
    body, stream = whole_body(answered, replies.text_answer()).decode(), event_stream(answered, replies.text_answer()).decode()
    outcomes = [API[read].normalize_body(body), API[read].normalize_stream(stream).outcome]
    for stored in (body, stream):
        outcomes.append(derive(RawResponse(status=200, contentType="application/json", body=stored), API[read].identity).outcome)
    for outcome in outcomes:
        assert isinstance(outcome, Rejected) and outcome.reason.startswith(said(answered, read)), outcome


def test_the_right_api_and_an_error_body_get_no_such_words() -> None:
    for api in APIS:
        refused = API[api].normalize_body('{"error":{"message":"no"}}')
        assert isinstance(refused, Rejected) and "the server answered" not in refused.reason
        assert not isinstance(API[api].normalize_body(whole_body(api, replies.text_answer())), Rejected)


def test_a_run_against_a_chat_server_read_as_anthropic_says_so(capsys, workspace: Path) -> None:
    with LoopbackServer([streamed(event_stream("chat", replies.text_answer()))]) as server:
        flags = ["--base-url", server.base_url, "--api", "anthropic", "-m", "m", "--durability", "process", "--retries", "0"]
        code, _, err = call(capsys, "run", "hi", *flags)
    assert code == 1
    assert said("chat", "anthropic") + "(with --base-url) or a chat provider" in err, err
