"""Secret masking in linear time (issue #32: ``mask_text`` took ~15 s on a 40k-character value, so a long URL in
an error message hung ``dal ls`` and the UI): the same output as the former patterns on any text, and a
megabyte masked in well under a second whatever its shape; and overlong catalog URLs refused at the edges."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dal
from dal.catalog import Catalog
from dal.catalog.errors import CatalogUnavailable
from dal.catalog.home import ProfileError
from dal.catalog.urls import MASK, has_credentials, is_secret_param, mask_text

# the patterns masking used before (quadratic on runs of name or scheme characters): the reference for the output
_OLD_PARAM = re.compile(r"(?P<lead>[?&;]|\b)(?P<name>[A-Za-z][\w.-]*)=(?P<value>[^&;\s#'\"]*)")
_OLD_USERINFO = re.compile(r"(?P<lead>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<value>[^\s@]*)@")


def _old_mask_param(m: re.Match[str]) -> str:
    name, lead = m.group("name"), m.group("lead")
    if not is_secret_param(name):
        return m.group(0)
    if not lead and name.lower() not in ("password", "passwd", "pwd", "secret", "token", "sig"):
        return m.group(0)
    return f"{lead}{name}={MASK}" if m.group("value") else m.group(0)


def _old_mask_text(text: str) -> str:
    return _OLD_PARAM.sub(_old_mask_param, _OLD_USERINFO.sub(lambda m: f"{m.group('lead')}{MASK}@", text))


def _old_has_credentials(url: str) -> bool:
    if _OLD_USERINFO.search(url):
        return True
    try:
        parts = urlsplit(url)
        if parts.password:
            return True
    except ValueError:
        query = url.partition("?")[2]
    else:
        query = parts.query
    return any(is_secret_param(k) for k, _ in parse_qsl(query, keep_blank_values=True))


PIECES = [*"aZp1_.-+:/@?&;=# \t'\"%é٣", "password", "sig", "token", "://", "s3://", "u:", "key=", "X-Amz-Signature"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_masking_says_what_the_former_patterns_said(text: str) -> None:
    assert mask_text(text) == _old_mask_text(text)
    assert has_credentials(text) == _old_has_credentials(text)


SHAPES: dict[str, Callable[[int], str]] = {  # hostile values of about n characters
    "letters": lambda n: "a" * n,
    "name-runs": lambda n: "a-" * (n // 2),
    "letters-digits": lambda n: "a1" * (n // 2),
    "schemes-without-password": lambda n: "a://b:" * (n // 6),
    "schemes": lambda n: "x://" * (n // 4),
    "queries": lambda n: "?a" * (n // 2),
    "params": lambda n: "a.b=" * (n // 4),
    "passwords": lambda n: "a://u:p@" * (n // 8),
    "dsn": lambda n: "password=x " * (n // 11),
}


def _seconds(fn: Callable[[], object], tries: int = 3) -> float:
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("shape", SHAPES)
def test_a_megabyte_masks_in_linear_time(shape: str) -> None:
    big, small = SHAPES[shape](1_000_000), SHAPES[shape](100_000)
    assert _seconds(lambda: mask_text(small), tries=1) < 1.0  # before the megabyte: quadratic code fails here
    assert _seconds(lambda: mask_text(big)) < 2.0
    assert _seconds(lambda: has_credentials(big)) < 2.0
    # ten times the text, about ten times the time (quadratic would be a hundred): 30 leaves room for noise
    ratio = _seconds(lambda: mask_text(big)) / max(_seconds(lambda: mask_text(small)), 1e-3)
    assert ratio < 30, ratio


def test_what_a_long_value_hides_is_still_masked() -> None:
    secret = "s" * 50_000
    assert secret not in mask_text(f"{'a' * 50_000}://user:{secret}@host/db")
    assert secret not in mask_text(f"{'a-' * 20_000}?password={secret}")


# -- the edges: overlong catalog URLs and profile values are refused in one line, before anything is parsed --------


LIMIT = 10_000  # catalog.urls.MAX_URL_LENGTH, as dal.validate bounded catalog URLs and locations already


def _dal(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dal.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})  # fmt: skip
    return proc, time.perf_counter() - start


def test_a_megabyte_profile_url_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'default = "big"\n[catalogs.big]\nurl = "sqlite:///{tmp_path}/{"a" * 1_000_000}.db"\n')
    proc, took = _dal("ls", env={"DAL_CONFIG": str(config)})
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[:500]
    assert proc.stderr.startswith("dal: error: ") and "profile 'big' is 1,000,0" in proc.stderr, proc.stderr[:500]
    assert f"at most {LIMIT:,}" in proc.stderr and took < 30
    monkeypatch.setenv("DAL_CONFIG", str(config))
    with pytest.raises(ProfileError, match="profile 'big'"):
        dal.open("a.b")


@pytest.mark.parametrize("where", ["env", "option"])
def test_an_overlong_catalog_url_is_refused_in_one_line(tmp_path: Path, where: str) -> None:
    url = f"postgresql://u:{'p' * 100_000}@127.0.0.1:1/db"  # the most one argument or variable may hold: 128 KiB
    args, env = (["ls"], {"DAL_CATALOG_URL": url}) if where == "env" else (["--catalog", url, "ls"], {})
    proc, took = _dal(*args, env=env)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[:500]
    assert proc.stderr.startswith("dal: error: invalid catalog URL: 100,0") and took < 30, proc.stderr[:500]
    assert "ppppp" not in proc.stderr
    with pytest.raises(CatalogUnavailable, match=f"at most {LIMIT:,}"):
        Catalog("sqlite:///" + "a" * 1_000_000)
