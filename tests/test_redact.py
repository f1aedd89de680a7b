"""Redaction: every shape in which a provider can echo a secret, and the properties that make it safe."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiny_agent.journal.secrets import (
    MARKER,
    MIN_SECRET_LENGTH,
    Secrets,
    collect_secrets,
    is_secret_parameter,
    redact_bytes,
    redact_text,
    url_secrets,
)

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"
SECRETS = collect_secrets(api_key=KEY)


def test_the_key_and_its_header_are_secrets_and_never_shown() -> None:
    assert SECRETS.values == (f"Bearer {KEY}", KEY)
    assert repr(SECRETS) == "Secrets(<2 values>)"
    assert KEY not in str(SECRETS)


def test_short_secrets_are_ignored() -> None:
    assert MIN_SECRET_LENGTH == 8
    secrets = Secrets(["short", "1234567", "12345678"])
    assert secrets.values == ("12345678",)
    assert redact_text("short test 1234567 12345678", secrets) == (f"short test 1234567 {MARKER}", 1)


def test_pieces_of_the_marker_are_not_secrets() -> None:
    assert not Secrets(["REDACTED", "[REDACTED]", "ED][REDACTED][RE"])
    assert redact_text(MARKER, Secrets(["REDACTED"])) == (MARKER, 0)


def test_no_secrets_change_nothing() -> None:
    empty = collect_secrets()
    assert not empty
    assert redact_text("anything", empty) == ("anything", 0)
    assert redact_bytes(b"anything", empty) == (b"anything", 0)


# -- every echo shape ---------------------------------------------------------------------


def test_a_401_body_quoting_the_authorization_header() -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: Bearer {KEY}. Check it.", "code": 401}})
    redacted, count = redact_text(body, SECRETS)
    assert count == 1  # "Bearer <key>" is one secret, matched before the key inside it
    assert json.loads(redacted) == {"error": {"message": f"Incorrect API key provided: {MARKER}. Check it.", "code": 401}}


def test_a_200_whose_content_and_reasoning_repeat_the_key() -> None:
    body = msgspec.json.encode(
        {
            "id": "gen-1",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": f"Your key is {KEY}; keep {KEY} safe.",
                        "reasoning": f"they sent {KEY}",
                    },
                    "finish_reason": "stop",
                }
            ],
        }
    )
    redacted, count = redact_bytes(body, SECRETS)
    assert count == 3
    assert KEY.encode() not in redacted
    message = msgspec.json.decode(redacted)["choices"][0]["message"]
    assert message["content"] == f"Your key is {MARKER}; keep {MARKER} safe."
    assert message["reasoning"] == f"they sent {MARKER}"


def test_a_500_text_body_and_an_html_page() -> None:
    text, count = redact_text(f"Internal error while checking {KEY}\n", SECRETS)
    assert (text, count) == (f"Internal error while checking {MARKER}\n", 1)
    page = f"<html><body><pre>Authorization: Bearer {KEY}</pre></body></html>".encode()
    assert redact_bytes(page, SECRETS) == (f"<html><body><pre>Authorization: {MARKER}</pre></body></html>".encode(), 1)


def test_a_body_that_is_not_utf8() -> None:
    body = b"\xff\xfe garbage " + KEY.encode() + b" \x80"
    assert redact_bytes(body, SECRETS) == (b"\xff\xfe garbage " + MARKER.encode() + b" \x80", 1)


def test_json_escaped_forms_are_found() -> None:
    key = "sk/live+abc/def<ghi>&jkl"
    secrets = collect_secrets(api_key=key)
    php = json.dumps({"message": key}).replace("/", "\\/")
    go = json.dumps({"message": key}).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    both = go.replace("/", "\\/")
    for body in (php, go, both, json.dumps({"message": key})):
        redacted, count = redact_text(body, secrets)
        assert count == 1, body
        assert json.loads(redacted) == {"message": MARKER}


def test_quotes_backslashes_and_non_ascii_in_a_secret_are_found_escaped() -> None:
    password = 'pa"ss\\wörd-42'
    secrets = Secrets([password])
    escaped = json.dumps({"m": password})
    assert "\\u00f6" in escaped
    for body in (escaped, escaped.replace("\\u00f6", "\\u00F6"), json.dumps({"m": password}, ensure_ascii=False)):
        redacted, count = redact_text(body, secrets)
        assert count == 1, body
        assert json.loads(redacted) == {"m": MARKER}


# -- URLs ----------------------------------------------------------------------------------


def test_url_credentials_are_secrets() -> None:
    url = "https://alice:hunter2%21pw@proxy.example/v1?api_key=abcdefgh123&model=x&sig=zzzzzzzz99&format=plain-value"
    found = set(url_secrets(url))
    assert {"hunter2%21pw", "hunter2!pw", "abcdefgh123", "zzzzzzzz99"} <= found
    basic = base64.b64encode(b"alice:hunter2!pw").decode()
    assert {basic, f"Basic {basic}"} <= found
    assert "alice" not in found  # a username beside a password is not a secret on its own
    assert "plain-value" not in found
    secrets = collect_secrets(api_key=KEY, base_url=url)
    echoed = f"bad credentials hunter2!pw for {url}"
    redacted, _ = redact_text(echoed, secrets)
    for value in ("hunter2", "abcdefgh123", "zzzzzzzz99"):
        assert value not in redacted


def test_a_token_in_the_username_is_a_secret() -> None:
    assert url_secrets("https://ghp_tokenvalue123@host/v1") == ["ghp_tokenvalue123", "ghp_tokenvalue123"]


@pytest.mark.parametrize(
    "name",
    ["api_key", "apikey", "API-KEY", "key", "token", "access_token", "secret", "password", "sig", "auth", "session", "code"],
)
def test_secret_parameters(name: str) -> None:
    assert is_secret_parameter(name)


@pytest.mark.parametrize("name", ["model", "version", "api-version", "format"])
def test_ordinary_parameters(name: str) -> None:
    assert not is_secret_parameter(name, "2024-10-21")


def test_a_long_letter_and_digit_value_is_a_secret_whatever_its_name() -> None:
    assert is_secret_parameter("x", "sk-abc1234567890def")
    assert not is_secret_parameter("x", "plain-words-only-here")


# -- properties ---------------------------------------------------------------------------------

ANY_SECRET = st.text(min_size=MIN_SECRET_LENGTH, max_size=24)


@given(text=st.text(max_size=200), secrets=st.lists(ANY_SECRET, max_size=4), inserted=st.lists(st.integers(0, 3), max_size=6))
def test_no_secret_survives(text: str, secrets: list[str], inserted: list[int]) -> None:
    for index in inserted:
        if secrets:
            text = text + secrets[index % len(secrets)] + text[: len(text) // 2]
    held = Secrets(secrets)
    redacted, _ = redact_text(text, held)
    for secret in held.values:
        assert secret not in redacted


@given(text=st.text(max_size=200), secrets=st.lists(ANY_SECRET, max_size=4))
def test_bytes_and_text_agree(text: str, secrets: list[str]) -> None:
    held = Secrets(secrets)
    redacted, count = redact_text(text, held)
    assert redact_bytes(text.encode("utf-8", "surrogatepass"), held) == (redacted.encode("utf-8", "surrogatepass"), count)


SECRET_ALPHABET = st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
FILLER_ALPHABET = st.sampled_from("abcdefghijklmnopqrstuvwxyz .,:{}\"\n")


@given(
    secrets=st.lists(st.text(SECRET_ALPHABET, min_size=MIN_SECRET_LENGTH, max_size=20), min_size=1, max_size=4, unique=True),
    plan=st.lists(st.tuples(st.text(FILLER_ALPHABET, min_size=1, max_size=12), st.integers(0, 3)), max_size=8),
    tail=st.text(FILLER_ALPHABET, max_size=12),
)
def test_the_count_is_the_number_of_occurrences(secrets: list[str], plan: list[tuple[str, int]], tail: str) -> None:
    """Secrets separated by filler that cannot be part of one: each occurrence is one replacement."""
    text = "".join(filler + secrets[index % len(secrets)] for filler, index in plan) + tail
    redacted, count = redact_text(text, Secrets(secrets))
    assert count == len(plan)
    assert redacted == "".join(filler + MARKER for filler, _ in plan) + tail


def test_a_secret_that_reappears_across_a_marker_is_caught() -> None:
    tricky = Secrets(["xy[REDAC", "zzzzzzzzzz"])
    redacted, count = redact_text("xyzzzzzzzzzz", tricky)
    assert "xy[REDAC" not in redacted
    assert redacted == MARKER + "TED]"  # "xy" + marker, then that "xy[REDAC" again
    assert count == 2
