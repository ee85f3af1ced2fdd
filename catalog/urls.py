"""Credentials in URLs and in text: the one place that knows which parts of a URL are secret.

A password in the user info (``postgresql://u:pw@host/db``, ``s3://key:secret@bucket``) and query parameters
that carry secrets (``?password=``, ``?secret=``, ``?token=``, Azure SAS ``?sig=``, ``?X-Amz-Credential=``,
``?access_key=``, …) are never printed: ``mask_url`` and ``mask_text`` replace them with ``***``.
``has_credentials`` tells whether a URL carries any (dataset locations that do are refused, never stored).

This lives in ``catalog`` (which never imports ``dal``) so that the catalog URL is masked the same way;
``dal.io`` re-exports it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
# a query parameter whose name contains one of these words carries a secret (or may: masking is cheap)
_SECRET_WORDS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "sig",
    "key",
    "cred",
    "auth",
    "sas",
    "session",
    "signature",
)
_SECRET_NAME = re.compile("|".join(_SECRET_WORDS), re.IGNORECASE)
# ``name=value`` after ``?``, ``&`` or ``;`` (a URL's query), or a bare DSN keyword (``password=…``)
_PARAM = re.compile(r"(?P<lead>[?&;]|\b)(?P<name>[A-Za-z][\w.-]*)=(?P<value>[^&;\s#'\"]*)")
# the password of a URL's user info: ``scheme://user:password@host``
_USERINFO = re.compile(r"(?P<lead>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<value>[^\s@]*)@")


def is_secret_param(name: str) -> bool:
    """Whether a query-parameter name is one that carries credentials (``password``, ``sig``, ``access_key``…)."""
    return bool(_SECRET_NAME.search(name))


def _mask_param(m: re.Match[str]) -> str:
    name = m.group("name")
    lead = m.group("lead")
    if not is_secret_param(name):
        return m.group(0)
    if not lead and name.lower() not in ("password", "passwd", "pwd", "secret", "token", "sig"):
        return m.group(0)  # outside a query string only the unmistakable DSN keywords
    return f"{lead}{name}={MASK}" if m.group("value") else m.group(0)


def mask_text(text: object) -> str:
    """``text`` with every URL password and credential-bearing parameter value replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m.group('lead')}{MASK}@", str(text))
    return _PARAM.sub(_mask_param, text)


def mask_url(url: object) -> str:
    """The URL with its password and secret query parameters masked (for messages and ``dal db status``)."""
    return mask_text(url)


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a password in its user info or a credential-bearing query parameter."""
    if _USERINFO.search(url):
        return True
    try:
        parts = urlsplit(url)
        if parts.password:
            return True
    except ValueError:  # e.g. an unbalanced '[' in the host: judge the query by hand
        query = url.partition("?")[2]
    else:
        query = parts.query
    return any(is_secret_param(k) for k, _ in parse_qsl(query, keep_blank_values=True))
