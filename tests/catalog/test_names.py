"""Dataset-name rules as properties: everything the rules allow is accepted, path tricks never are."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dal.catalog import InvalidName, validate_name

part = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,15}", fullmatch=True)


@given(st.lists(part, min_size=1, max_size=5))
def test_valid_dotted_names_are_accepted(parts: list[str]) -> None:
    name = ".".join(parts)
    assert validate_name(name) == name


@given(st.text(min_size=1, max_size=40), st.sampled_from(["/", "\\", "..", " ", "\x00", ":"]))
def test_path_separators_and_dotdot_are_refused(text: str, bad: str) -> None:
    with pytest.raises(InvalidName):
        validate_name(text[: len(text) // 2] + bad + text[len(text) // 2 :])
