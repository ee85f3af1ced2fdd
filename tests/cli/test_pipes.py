"""The CLI in pipes and scripts (issue 37): off a terminal every table command prints a header line and one
tab-separated row per line (never folded, cut or boxed), ``--output table|plain|tsv|json`` asks for a layout
anywhere, a terminal still gets the Rich table; stats' floats to 6 significant digits (JSON in full); ``dal show``
names every tag; ``dal versions`` prints times to the second; "as of" a future time is refused.

Run through the real ``dal`` console script with stdout a pipe, in a shell pipeline with ``grep``, in a
pseudo-terminal, and in-process with click's CliRunner (whose stdout is not a terminal either)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.cli.app import cli
from tests.cli.test_progress import dal_exe, run_in_pty
from tests.conftest import open_catalog

NAME = "weather.daily_features_for_the_regional_forecast_model_with_a_long_name"  # 72 characters
TAGS = [f"release_candidate_{i:02d}" for i in range(12)]  # all on the newest version
DESCRIPTION = 'hourly "features"\tper station\x1b[31m (red)\nsecond line'
ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
BOX = set("│┃━─┏┓└┘╇┡")


@pytest.fixture
def env(sqlite_or_served: str, tmp_path: Path) -> dict[str, str]:
    """A catalog holding NAME in three written versions (floats, text), twelve tags on the newest, one on the
    first, and a description with a tab, a quote, an escape sequence and a newline."""
    url = sqlite_or_served
    cat = open_catalog(url)
    table = pa.table({"x": [0.1234567891, 2.5, 1e7 / 3], "label": ["a", "b", "c"], "id": [1, 2, 3]})
    for _ in range(3):
        dal.write(table, NAME, path=str(tmp_path / "data"), catalog=url)
    cat.tag(NAME, 0, "first")
    for t in TAGS:
        cat.tag(NAME, 2, t)
    cat.update_dataset(NAME, description=DESCRIPTION)
    cat.close()
    out = {k: v for k, v in os.environ.items() if k not in {"DAL_PROFILE", "PYTEST_CURRENT_TEST"}}
    out.update(DAL_CATALOG_URL=url, DAL_HOME=str(tmp_path / "home"), DAL_WAREHOUSE=str(tmp_path / "wh"))
    return out


def piped(env: dict[str, str], *args: str) -> str:
    """The real console script with stdout a pipe."""
    p = subprocess.run([dal_exe(), *args], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", env["DAL_CATALOG_URL"], *args])
    return r.exit_code, r.stdout, r.stderr


def tsv(text: str) -> list[dict[str, str]]:
    """The rows of a TSV text as the csv module reads it (every row as long as the header)."""
    rows = list(csv.reader(io.StringIO(text), delimiter="\t"))
    assert rows and all(len(r) == len(rows[0]) for r in rows), text
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def assert_unboxed(text: str) -> None:
    assert not BOX & set(text), text


def test_a_pipe_gets_one_row_per_line(env: dict[str, str]) -> None:
    listing = piped(env, "ls")
    assert_unboxed(listing)
    assert listing.splitlines()[0] == "name\tformat\tlatest\tupdated\tdescription"
    (row,) = tsv(listing)
    assert row["name"] == NAME and row["latest"] == "2" and ISO_SECONDS.match(row["updated"])
    # control characters escaped: the tab and the newline stay inside the cell, the escape sequence is inert
    assert row["description"] == 'hourly "features"\\x09per station\\x1b[31m (red)\\x0asecond line'
    assert "\x1b" not in listing and len(listing.splitlines()) == 2

    versions = piped(env, "versions", NAME)
    assert_unboxed(versions)
    rows = tsv(versions)
    assert [r["version"] for r in rows] == ["0", "1", "2"]
    assert rows[2]["tags"] == ", ".join(sorted(TAGS))  # twelve tags, whole, on the version's one line
    assert rows[0]["tags"] == "first" and all(ISO_SECONDS.match(r["created (UTC)"]) for r in rows)
    assert len(versions.splitlines()) == 4

    shown = {r["field"]: r["value"] for r in tsv(piped(env, "show", NAME))}
    assert shown["name"] == NAME and shown["latest version"] == "2"


def test_grep_finds_long_names_and_tags(env: dict[str, str]) -> None:
    def shell(pipeline: str) -> str:
        p = subprocess.run(["sh", "-c", pipeline], env={**env, "DAL": dal_exe()}, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
        assert p.returncode == 0, (pipeline, p.stdout, p.stderr)
        return p.stdout

    found = shell(f'"$DAL" ls | grep -F {NAME}')
    assert found.split("\t")[0] == NAME
    assert shell(f'"$DAL" versions {NAME} | grep -F {TAGS[-1]} | cut -f1') == "2\n"
    assert shell('"$DAL" ls | tail -n +2 | cut -f1') == NAME + "\n"
    assert shell(f'"$DAL" show {NAME} | grep ^tags | cut -f2').startswith(f"{TAGS[0]}=2, ")


def test_every_table_command_prints_tsv_off_a_terminal(env: dict[str, str]) -> None:
    """In-process (CliRunner's stdout is not a terminal): a header, then one row per line."""
    for args, header, count in (
        (["ls"], "name", 1),
        (["show", NAME], "field", 16),  # with the labels row
        (["versions", NAME], "version", 3),
        (["schema", NAME], "#", 3),
        (["files", NAME], "file", 3),
        (["stats", NAME], "column", 3),
        (["head", NAME, "-n", "2"], "x", 2),
    ):
        code, out, err = invoke(env, *args)
        assert code == 0, err
        assert_unboxed(out)
        assert out.splitlines()[0].split("\t")[0] == header, out
        assert len(tsv(out)) == count, out
    files = tsv(invoke(env, "files", NAME)[1])
    assert all(Path(f["file"]).is_file() for f in files)  # the whole path: there is no title naming the location


def test_output_option_asks_for_a_layout(env: dict[str, str]) -> None:
    code, table, _ = invoke(env, "versions", NAME, "-o", "table")
    assert code == 0 and "┃ version ┃" in table  # the Rich table on request, folded at 80 columns
    code, plain, _ = invoke(env, "versions", NAME, "--output", "plain")
    assert_unboxed(plain)
    lines = plain.splitlines()
    assert lines[0] == NAME and lines[1].split() == ["version", "created", "(UTC)", "operation", "rows", "size",
                                                     "tags", "status", "unreadable"]  # fmt: skip
    assert lines[4].endswith(", ".join(sorted(TAGS))) and len(lines) == 5
    code, out, _ = invoke(env, "versions", NAME, "-o", "json")
    assert code == 0 and json.loads(out) == json.loads(invoke(env, "versions", NAME, "--json")[1])
    code, out, err = invoke(env, "versions", NAME, "--json", "-o", "tsv")
    assert code == 2 and "--json and --output tsv" in err
    code, _, err = invoke(env, "versions", "no.such", "-o", "json")  # errors as JSON, as with --json
    assert code == 1 and json.loads(err)["type"] == "DatasetNotFound"


def test_nothing_to_list_is_a_header_and_a_message_on_stderr(env: dict[str, str]) -> None:
    code, out, err = invoke(env, "ls", "nothing-like-this")
    assert code == 0 and out == "name\tformat\tlatest\tupdated\tdescription\n"
    assert "no datasets match 'nothing-like-this'" in err
    code, out, _ = invoke(env, "ls", "nothing-like-this", "-o", "plain")
    assert out == "no datasets match 'nothing-like-this'\n"


def test_stats_floats_to_six_significant_digits_and_in_full_in_json(env: dict[str, str]) -> None:
    code, out, _ = invoke(env, "stats", NAME)
    assert code == 0
    x = next(r for r in tsv(out) if r["column"] == "x")
    assert (x["min"], x["max"]) == ("0.123457", "3.33333e+06")
    code, out, _ = invoke(env, "stats", NAME, "-o", "table")
    assert "0.123457" in out and "0.1234567891" not in out and "3333333.33" not in out
    st = json.loads(invoke(env, "stats", NAME, "--json")[1])
    x = next(c for c in st["columns"] if c["column"] == "x")
    assert (x["min"], x["max"]) == (0.1234567891, 1e7 / 3)


def test_show_names_every_tag_with_its_version(env: dict[str, str]) -> None:
    shown = {r["field"]: r["value"] for r in tsv(invoke(env, "show", NAME)[1])}
    assert shown["tags"] == ", ".join([f"{t}=2" for t in sorted(TAGS)] + ["first=0"])
    info = json.loads(invoke(env, "show", NAME, "--json")[1])
    assert info["tags"] == {"first": 0, **dict.fromkeys(TAGS, 2)}


def test_versions_to_the_second_and_as_of_a_printed_time(env: dict[str, str]) -> None:
    cat = open_catalog(env["DAL_CATALOG_URL"])
    rows = tsv(invoke(env, "versions", NAME)[1])
    for r, v in zip(rows, cat.versions(NAME), strict=True):
        printed = r["created (UTC)"]
        assert printed == v.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # text `dal.open` and --version take back: the instant cut to its second
        assert datetime.fromisoformat(printed) <= v.created_at < datetime.fromisoformat(printed) + timedelta(seconds=1)
        end_of_second = min(datetime.fromisoformat(printed) + timedelta(seconds=1), datetime.now(UTC))
        assert cat.version(NAME, end_of_second.isoformat()).number >= v.number
    cat.close()


def test_as_of_a_future_time_is_refused(env: dict[str, str]) -> None:
    cat = open_catalog(env["DAL_CATALOG_URL"])
    latest = cat.version(NAME)
    assert cat.version(NAME, datetime.now(UTC)).number == 2  # after the latest version, not in the future
    future = datetime.now(UTC) + timedelta(days=1)
    with pytest.raises(dal.errors.VersionNotFound, match="in the future") as e:
        dal.open(NAME, future, catalog=cat)
    assert f"its latest version, 2, is from {latest.created_at.isoformat()}" in str(e.value)
    cat.close()
    code, _, err = invoke(env, "schema", NAME, "-v", future.date().isoformat())
    assert code == 1 and err.startswith("dal: error: a version of ") and "in the future" in err


def test_a_terminal_still_gets_the_rich_table(env: dict[str, str]) -> None:
    code, screen, _ = run_in_pty([dal_exe(), "versions", NAME], env)
    assert code == 0, screen
    screen = re.sub(r"\x1b\[[0-9;]*m", "", screen)  # Rich's bold and italic
    assert "┃ version ┃" in screen and "│" in screen  # boxed, as wide as the terminal
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", screen), screen
    code, screen, _ = run_in_pty([dal_exe(), "versions", NAME, "-o", "tsv"], env)
    assert code == 0 and not BOX & set(screen) and f"\t{', '.join(sorted(TAGS))}\t" in screen
    # stdout a pipe, stderr the terminal: the rows go to the pipe unboxed
    code, _, out = run_in_pty([dal_exe(), "ls"], env, stdout_pipe=True)
    assert code == 0 and out.splitlines()[1].startswith(NAME + "\t")


def test_lineage_escapes_what_the_writer_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    from dal.cli.content import _print_written_by

    _print_written_by({"time": "2026-01-01T00:00:00Z", "user": "u", "host": "h", "program": "x\x1b[2Jy"})
    out = capsys.readouterr().out
    assert "\x1b" not in out and "program: x\\x1b[2Jy" in out
