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
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
# characters of a catalog URL (a profile's included) or a dataset location: real ones are a few hundred; a longer
# one is refused before it is parsed, connected to or printed
MAX_URL_LENGTH = 10_000
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
# Both patterns run in linear time on any text (a quadratic one made a 40k-character value take seconds): a match
# is tried only where a run of the characters that may open it begins (the lookbehinds), never again at every
# character inside the run, and ``pre`` carries the run's part before where the match proper starts.
#
# ``name=value`` after ``?``, ``&`` or ``;`` (a URL's query), or a bare DSN keyword (``password=…``) starting at a
# word boundary. Every start inside one run of name characters ends the name at the run's end, so the run is
# tried once, when it ends in '=' (the lookahead), from its first possible start.
_PARAM = re.compile(
    r"(?:(?P<lead>[?&;])|(?<![\w.-])(?=[\w.-]*=)(?P<pre>[\w.-]*?)\b)"
    r"(?P<name>[A-Za-z][\w.-]*)=(?P<value>[^&;\s#'\"]*)"
)
# the start of a URL's user info up to its password: ``scheme://user:`` (the scheme from the first letter of its
# run); the password runs to the next whitespace or '@' and counts only when that is an '@' (``_userinfo``)
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<pre>[0-9+.-]*)(?P<lead>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)")
_PASSWORD_END = re.compile(r"[\s@]")


# a dal server token anywhere in a text (``dal_<id>_<secret>``): the id stays, the secret never is printed
_DAL_TOKEN = re.compile(r"dal_([0-9a-f]{16})_[A-Za-z0-9_-]+")
# any user info of an http(s) URL (a token pasted there has no ':'), up to its '@' ('/' ends the run: linear)
_HTTP_USERINFO = re.compile(r"(?i)(?<![A-Za-z0-9+.-])(https?://)[^/\s@]+@")


def _userinfo(text: str) -> Iterator[tuple[int, int]]:
    """Where the URL passwords in ``text`` are: (first character, the '@' after it), left to right, in one pass.

    The end of a password is the first whitespace or '@' after it; candidates that fail share it (they lie
    before it), so it is searched for once per stretch instead of once per candidate."""
    pos = 0
    searched, end = -1, -1  # the first whitespace or '@' at or after ``searched`` is at ``end``
    n = len(text)
    while (m := _USERINFO.search(text, pos)) is not None:
        start = m.end()
        if not searched <= start <= end:
            found = _PASSWORD_END.search(text, start)
            searched, end = start, found.start() if found else n
        if end < n and text[end] == "@":
            yield start, end
            pos = end + 1
        else:
            pos = m.start() + 1


def is_secret_param(name: str) -> bool:
    """Whether a query-parameter name is one that carries credentials (``password``, ``sig``, ``access_key``…)."""
    return bool(_SECRET_NAME.search(name))


def _mask_param(m: re.Match[str]) -> str:
    name = m.group("name")
    lead = m.group("lead") or ""
    if not is_secret_param(name):
        return m.group(0)
    if not lead and name.lower() not in ("password", "passwd", "pwd", "secret", "token", "sig"):
        return m.group(0)  # outside a query string only the unmistakable DSN keywords
    return f"{m.group('pre') or ''}{lead}{name}={MASK}" if m.group("value") else m.group(0)


def mask_text(text: object) -> str:
    """``text`` with every URL password, credential-bearing parameter value, http(s) URL's user info and dal token
    secret replaced by ``***``."""
    text = str(text)
    parts = []
    done = 0
    for start, end in _userinfo(text):
        parts += [text[done:start], MASK]
        done = end
    parts.append(text[done:])
    masked = _PARAM.sub(_mask_param, "".join(parts))
    return _DAL_TOKEN.sub(r"dal_\1_***", _HTTP_USERINFO.sub(r"\1***@", masked))


def mask_url(url: object) -> str:
    """The URL with its password and secret query parameters masked (for messages and ``dal db status``)."""
    return mask_text(url)


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a password in its user info or a credential-bearing query parameter."""
    if next(_userinfo(url), None) is not None:
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
