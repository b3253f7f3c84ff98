"""Secrets never reach log output, even when client libraries log request headers or bodies at DEBUG."""

from __future__ import annotations

import io
import logging

from rlcloud.logsafety import REDACTED, RedactingFilter, redact

CANARY = "ya29.CANARY-token-7f3a"


def test_redact_removes_tokens_keys_and_secret_values() -> None:
    samples = [
        f"send: b'GET /api HTTP/1.1\\r\\nAuthorization: Bearer {CANARY}\\r\\n'",
        f"headers={{'authorization': 'Bearer {CANARY}'}}",
        f'{{"access_token": "{CANARY}", "expires_in": 3599}}',
        f"refresh_token={CANARY}&grant_type=refresh_token",
        "-----BEGIN PRIVATE KEY-----\nMIIEv" + CANARY + "\n-----END PRIVATE KEY-----",
        f"token {CANARY} in free text",
    ]
    for text in samples:
        cleaned = redact(text)
        assert "CANARY" not in cleaned, text
        assert REDACTED in cleaned
    assert redact("nothing secret here: 42 episodes") == "nothing secret here: 42 episodes"


def test_filter_cleans_records_of_client_loggers_before_any_handler_sees_them() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("kubernetes.client.rest")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("response body: %s", f'{{"kind": "Secret", "data": {{"token": "{CANARY}"}}}}')
        logger.debug("header %s", f"Authorization: Bearer {CANARY}")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    output = stream.getvalue()
    assert "CANARY" not in output
    assert output.count(REDACTED) == 2
