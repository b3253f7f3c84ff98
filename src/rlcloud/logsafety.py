"""Keeping secrets out of logs, even at DEBUG.

The kubernetes client logs whole response bodies at DEBUG (Secrets included) and urllib3/google-auth
log request headers; this filter redacts bearer tokens, private keys, and the values of secret-looking
keys before any handler sees a record.
"""

from __future__ import annotations

import logging
import re

REDACTED = "<redacted>"

_PATTERNS = [
    re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(
        r"(?i)(['\"]?(?:access_token|refresh_token|id_token|private_key|client_secret|password|token)['\"]?"
        r"\s*[:=]\s*['\"]?)[^'\",\s}]+"
    ),
    re.compile(r"ya29\.[A-Za-z0-9._-]+"),  # Google OAuth access tokens
]


def redact(text: str) -> str:
    """``text`` with tokens, private keys and secret values replaced by <redacted>."""
    for pattern in _PATTERNS:
        if pattern.groups >= 1:
            text = pattern.sub(lambda m: (m.group(1) or "") + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that renders each record and redacts secrets from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render ``record`` with its secrets redacted; always keep it."""
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave the record to logging's own error handling
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_installed = False


def install_redaction() -> None:
    """Attach the redacting filter to every existing handler of the root logger and to the chatty client
    loggers, once."""
    global _installed
    if _installed:
        return
    flt = RedactingFilter()
    for handler in logging.getLogger().handlers:
        handler.addFilter(flt)
    for name in ("kubernetes", "kubernetes.client.rest", "urllib3", "google", "google.auth", "rlcloud"):
        logging.getLogger(name).addFilter(flt)
    _installed = True
