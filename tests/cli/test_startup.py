"""A CLI that starts at once: ``import dal``, ``dal --help``, the browsing commands and shell completion load no
heavy module (pyarrow, pandas, SQLAlchemy, alembic, numpy) — checked in real processes by what they imported, not
by timing — and completion offers dataset names and tags from the catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.catalog import Catalog, Schema, VersionDraft
from dal.catalog.types import Field
from tests.conftest import open_catalog

HEAVY = ("pyarrow", "pandas", "sqlalchemy", "alembic", "mako", "numpy", "deltalake", "pyspark")
# runs the dal command in this process, then prints the heavy modules it imported on stderr's last line
PROBE = """
import json, sys
sys.argv = ["dal", *json.loads(sys.argv[1])]
from dal.cli import main
try:
    main()
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY_NAMES))
print("HEAVY=" + json.dumps(heavy), file=sys.stderr)
""".replace("HEAVY_NAMES", repr(list(HEAVY)))


def run(args: list[str], url: str | None = None, **env: str) -> tuple[str, list[str]]:
    full = {**os.environ, **env}
    if url:
        full["DAL_CATALOG_URL"] = url
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True,
                       env=full, timeout=120)  # fmt: skip
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("HEAVY="), p.stderr
    return p.stdout, json.loads(last[len("HEAVY=") :])


def populate(url: str) -> None:
    cat = open_catalog(url)
    schema = Schema((Field("id", "int64"),))
    for name in ("weather.obs", "weather.radar", "sensors.cam"):
        cat.create_dataset(name, format="delta", location=f"/data/{name}")
        cat.publish(name, VersionDraft("create", schema, 3))
    cat.publish("weather.obs", VersionDraft("append", schema, 5, tags=("prod",)))
    cat.tag("weather.obs", 0, "first")
    cat.close()


def test_import_dal_loads_nothing_heavy() -> None:
    code = f"import dal, sys; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [["--help"], ["ls", "--help"], ["--version"]])
def test_help_loads_nothing_heavy(args: list[str]) -> None:
    out, heavy = run(args)
    assert heavy == [] and "dal" in out


def test_browsing_an_existing_catalog_loads_nothing_heavy(catalog_url_or_served: str) -> None:
    catalog_url = catalog_url_or_served
    populate(catalog_url)
    out, heavy = run(["ls"], catalog_url)
    assert heavy == [] and "weather.radar" in out and "sensors.cam" in out
    out, heavy = run(["show", "weather.obs"], catalog_url)
    assert heavy == [] and "prod" in out
    out, heavy = run(["versions", "weather.obs", "--json"], catalog_url)
    assert heavy == [] and [(v["version"], v["tags"]) for v in json.loads(out)] == [(0, ["first"]), (1, ["prod"])]
    out, heavy = run(["ls", "--limit", "1", "--json"], catalog_url)
    assert heavy == [] and [d["name"] for d in json.loads(out)] == ["sensors.cam"]


def test_ls_is_bounded_by_default_and_says_so(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dal.cli import app

    url = f"sqlite:///{tmp_path}/catalog.db"
    populate(url)
    r = CliRunner().invoke(app.cli, ["--catalog", url, "ls", "--json", "--limit", "2"])
    assert [d["name"] for d in json.loads(r.stdout)] == ["sensors.cam", "weather.obs"]
    assert "listed the first 2 datasets by name; more match" in r.stderr
    r = CliRunner().invoke(app.cli, ["--catalog", url, "ls", "--json", "--limit", "0"])
    assert len(json.loads(r.stdout)) == 3 and r.stderr == ""
    r = CliRunner().invoke(app.cli, ["--catalog", url, "ls", "--help"])
    assert "default: 1000" in r.stdout


def complete(url: str, words: str) -> tuple[list[tuple[str, str]], list[str]]:
    cword = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    out, heavy = run([], url, _DAL_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=cword)
    return [tuple(line.split(",", 1)) for line in out.splitlines() if line], heavy  # type: ignore[misc]


def test_completion_of_names_and_tags(catalog_url: str) -> None:  # not through dal serve: docs/development.md
    populate(catalog_url)
    items, heavy = complete(catalog_url, "dal show weather.")
    assert items == [("plain", "weather.obs"), ("plain", "weather.radar")] and heavy == []
    items, _ = complete(catalog_url, "dal versions s")
    assert items == [("plain", "sensors.cam")]
    items, heavy = complete(catalog_url, "dal lineage weather.obs ")
    assert items == [("plain", "first"), ("plain", "prod"), ("plain", "latest")] and heavy == []
    items, _ = complete(catalog_url, "dal schema weather.obs -v ")
    assert ("plain", "prod") in items
    items, _ = complete(catalog_url, "dal diff weather.obs 1")
    assert items == [("plain", "1")]
    items, _ = complete(catalog_url, "dal untag weather.obs ")
    assert items == [("plain", "first"), ("plain", "prod")]
    items, _ = complete(catalog_url, "dal lineage nope.x ")
    assert items == [("plain", "latest")]


def test_completion_of_many_names_offers_the_next_part(tmp_path: Path) -> None:
    from dal.cli.complete import COMPLETION_LIMIT

    url = f"sqlite:///{tmp_path}/catalog.db"
    cat = Catalog(url)
    for team in range(3):
        for i in range(COMPLETION_LIMIT // 2):
            cat.create_dataset(f"team{team}.ds_{i:03d}", format="delta", location=f"/d/{team}/{i}")
    cat.close()
    items, _ = complete(url, "dal show ")
    assert [v for _, v in items] == ["team0.", "team1.", "team2."]
    items, _ = complete(url, "dal show team1.ds_0")
    assert len(items) == 100 and items[0] == ("plain", "team1.ds_000")


def test_completion_never_creates_a_catalog(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/none/catalog.db"
    items, _ = complete(url, "dal show w")
    assert items == [] and not (tmp_path / "none").exists()
