"""The web UI of ``dal serve`` in a real headless Chromium (as ``tests/ui/test_browser.py``): sign in with a token,
see only the dataset the principal may read, a forbidden dataset's address is the not-found page a missing one
gets, sign out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.serve.conftest import Served
from tests.ui.test_browser import browser, by_id, navigate, texts

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the fixture, imported to be found here


def test_sign_in_see_only_what_may_be_read_sign_out(browser: Any, served: Served) -> None:
    d = browser
    d.delete_all_cookies()
    d.get(served.url + "/d/weather.radar")
    assert by_id(d, "signin-form") is not None and "sign in" in d.title
    by_id(d, "token").send_keys(str(served.tokens["one_reader"]))
    navigate(d, by_id(d, "signin"))
    assert d.current_url == served.url + "/d/weather.radar"  # where it was going
    assert by_id(d, "dataset-name").text == "weather.radar"
    assert "signed in as one_reader" in by_id(d, "signed-in-as").text
    assert str(served.tokens["one_reader"]) not in d.page_source
    session = d.get_cookie("dal_session")
    assert session is not None and session["httpOnly"] and session["sameSite"] == "Strict"
    assert d.execute_script("return document.cookie") in ("", None)  # no script can read it (none runs anyway)

    d.get(served.url + "/")
    assert texts(d, "a.dataset-link") == ["weather.radar"]
    d.get(served.url + "/?q=sales")
    assert texts(d, "a.dataset-link") == []

    d.get(served.url + "/d/sales.orders")
    forbidden = by_id(d, "error").text
    d.get(served.url + "/d/sales.ordres")
    missing = by_id(d, "error").text
    assert forbidden.replace("sales.orders", "X") == missing.replace("sales.ordres", "X")
    assert missing == "dataset 'sales.ordres' not found"

    navigate(d, by_id(d, "signout"))
    assert d.get_cookie("dal_session") is None
    d.get(served.url + "/")
    assert by_id(d, "signin-form") is not None

    # a wrong token: the sign-in page again, saying so
    by_id(d, "token").send_keys(str(served.tokens["revoked"]))
    navigate(d, by_id(d, "signin"))
    assert "not valid" in by_id(d, "signin-error").text
