"""dal.storage.ownership's rules one by one: metadata paths against a root (local and object-store roots), the
listing that never follows links, deletion never through a link, cache roots and their sentinel."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dal.errors import FormatError, NotOwned
from dal.storage import ownership
from dal.storage.location import Location

LOCAL = "/data/tables/t"
S3 = "s3://bucket/tables/t"


@pytest.mark.parametrize(
    ("root", "path", "expected"),
    [
        (LOCAL, "part-0.parquet", "part-0.parquet"),
        (LOCAL, "date=2024-01-01/part-0.parquet", "date=2024-01-01/part-0.parquet"),
        (LOCAL, "p=a%2520b/x.parquet", "p=a%20b/x.parquet"),  # decoded once: the folder is named p=a%20b
        (LOCAL, "a/./b/../x.parquet", "a/x.parquet"),  # '..' that stays inside is fine
        (LOCAL, "..x/y.parquet", "..x/y.parquet"),  # a name starting with dots is no '..'
        (LOCAL, "d/", "d"),
        (LOCAL, "/data/tables/t/x.parquet", "x.parquet"),  # absolute, inside
        (LOCAL, "file:///data/tables/t/d/x.parquet", "d/x.parquet"),
        (LOCAL, "file:/data/tables/t/x.parquet", "x.parquet"),  # Spark's spelling
        ("file:///data/tables/t/", "/data/tables/t/x.parquet", "x.parquet"),  # a root named by URL
        (S3, "x.parquet", "x.parquet"),
        (S3, "s3://bucket/tables/t/d/x.parquet", "d/x.parquet"),
        (S3, "s3a://bucket/tables/t/x.parquet", "x.parquet"),  # Hadoop's scheme for the same store
        (LOCAL, "../t2/x.parquet", None),
        (LOCAL, "%2E%2E/t2/x.parquet", None),
        (LOCAL, "a/../../x.parquet", None),
        (LOCAL, "/data/tables/t2/x.parquet", None),  # a sibling sharing the prefix "t"
        (LOCAL, "/etc/passwd", None),
        (LOCAL, "file://otherhost/data/tables/t/x.parquet", None),
        (LOCAL, "s3://bucket/tables/t/x.parquet", None),
        (LOCAL, "", None),
        (LOCAL, ".", None),  # the root itself is not a file of it
        (S3, "../../victim/x.parquet", None),
        (S3, "s3://victim/tables/t/x.parquet", None),
        (S3, "s3://bucket/tables/t2/x.parquet", None),
        (S3, "gs://bucket/tables/t/x.parquet", None),
        (S3, "/bucket/tables/t/x.parquet", None),  # an absolute path is no object key
    ],
)
def test_metadata_paths_resolve_under_the_root(root: str, path: str, expected: str | None) -> None:
    assert ownership.inside(root, path) == expected
    if expected is None:
        with pytest.raises(FormatError, match=r"^t\.d version 3: a data file names .*; dal reads nothing outside"):
            ownership.below(root, path, table="t.d version 3", entry="a data file")
    else:
        assert ownership.below(root, path, table="t", entry="e") == expected


def test_unencoded_paths_are_never_urls() -> None:
    assert ownership.inside(LOCAL, "s3://x/y", encoded=False) == "s3:/x/y"  # a folder named "s3:", inside
    assert ownership.inside(LOCAL, "a%2E%2E/x", encoded=False) == "a%2E%2E/x"
    assert ownership.inside(LOCAL, "../x", encoded=False) is None


def test_listing_never_follows_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "t", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret").write_text("s")
    (root / "d" / "a.parquet").write_text("a")
    (root / "linked").symlink_to(outside)
    (root / "d" / "file-link").symlink_to(outside / "deep" / "secret")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    loc = Location.of(str(root))
    listed = ownership.listing(loc)
    assert [(f.rel, f.link) for f in listed.files] == [
        ("d/a.parquet", False),
        ("d/file-link", True),
        ("dangling", True),
    ]
    assert listed.linked_dirs == ("linked",)
    assert not ownership.remove_file(loc, "linked/deep/secret")  # never through a link
    assert ownership.remove_file(loc, "d/file-link")  # the link itself
    assert (outside / "deep" / "secret").read_text() == "s" and not os.path.lexists(root / "d" / "file-link")
    ownership.remove_tree(loc, "linked")  # a link where a folder was expected: the link only
    assert (outside / "deep" / "secret").exists() and not os.path.lexists(root / "linked")
    for bad in ("", "..", "../outside", "/etc", "d/../.."):
        with pytest.raises(ValueError):
            ownership.remove_file(loc, bad)


def test_cache_roots(tmp_path: Path) -> None:
    new = Location.of(str(tmp_path / "new"))
    assert ownership.check_cache_root(new, ownership.CONVERSIONS) is False  # absent: nothing to clear
    ownership.claim_cache_root(new, ownership.CONVERSIONS)
    assert json.loads((tmp_path / "new" / ownership.SENTINEL).read_text())["dal_cache"] == "conversions"
    assert ownership.check_cache_root(new, ownership.CONVERSIONS) is True
    with pytest.raises(NotOwned, match="converter cache, not its file cache"):
        ownership.claim_cache_root(new, ownership.RANGES)

    used = tmp_path / "used"
    (used / "photos").mkdir(parents=True)
    with pytest.raises(NotOwned, match=r"holds entries dal did not write \(photos/\).*name a new or empty folder"):
        ownership.claim_cache_root(Location.of(str(used)), ownership.CONVERSIONS)
    assert not (used / ownership.SENTINEL).exists()

    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ownership.SENTINEL).symlink_to(tmp_path / "new" / ownership.SENTINEL)  # borrowed: not dal's
    with pytest.raises(NotOwned, match="is not dal's"):
        ownership.check_cache_root(Location.of(str(linked)), ownership.CONVERSIONS)
