"""CLI conventions: every command has --json and reports errors as JSON then; --version; shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import dal
from dal.cli.app import cli

# `dal ui` serves pages until stopped: there is no result to print as JSON
NO_JSON = {"ui", "serve"}  # servers: they print where they listen


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += leaf_commands(cmd, (*prefix, name))
        else:
            out.append(((*prefix, name), cmd))
    return out


def test_every_command_has_json() -> None:
    commands = leaf_commands(cli)
    assert len(commands) >= 20
    missing = [
        " ".join(p)
        for p, c in commands
        if p[-1] not in NO_JSON and "--json" not in {o for p_ in c.params for o in p_.opts}
    ]
    assert missing == []


ERRORS = [
    ("show", "no.such"),
    ("versions", "no.such"),
    ("untag", "no.such", "prod"),
    ("tag", "no.such", "1", "prod"),
    ("head", "no.such"),
    ("changes", "no.such", "--since", "0"),
    ("stats", "no.such"),
    ("gc", "no.such"),
    ("set", "no.such", "--owner", "x"),
    ("rename", "no.such", "other.name"),
    ("drop", "no.such", "--yes"),
    ("db", "status", "--bogus"),
    ("schema", "bad name!"),
]


@pytest.mark.parametrize("args", ERRORS)
def test_errors_are_json_with_json(sqlite_url: str, args: tuple[str, ...]) -> None:
    r = CliRunner().invoke(cli, ["--catalog", sqlite_url, *args, "--json"])
    assert r.exit_code in (1, 2) and r.stdout == ""
    body = json.loads(r.stderr)
    assert set(body) == {"error", "type", "exit_code"} and body["exit_code"] == r.exit_code and body["error"]
    # without --json: the one-line text form
    r = CliRunner().invoke(cli, ["--catalog", sqlite_url, *args])
    assert r.exit_code in (1, 2) and not r.stderr.lstrip().startswith("{")


def test_untag_json(sqlite_or_served: str) -> None:
    from dal.catalog import Field, Schema, VersionDraft
    from tests.conftest import open_catalog

    sqlite_url = sqlite_or_served
    cat = open_catalog(sqlite_url)
    cat.create_dataset("a.b", format="delta", location="/w/a")
    cat.publish("a.b", VersionDraft("create", Schema((Field("x", "int64"),)), row_count=1, storage_version=0))
    cat.tag("a.b", 0, "prod")
    cat.tag("a.b", 0, "keep")
    r = CliRunner().invoke(cli, ["--catalog", sqlite_url, "untag", "a.b", "prod", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout) == {"dataset": "a.b", "removed_tag": "prod", "tags": {"keep": 0}}


def test_version_and_completion() -> None:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"dal, version {dal.__version__}"
    exe = Path(sys.executable).with_name("dal")
    env = {**os.environ, "_DAL_COMPLETE": "bash_source"}
    script = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert script.returncode == 0 and "_dal_completion" in script.stdout and "complete " in script.stdout
    env = {**os.environ, "_DAL_COMPLETE": "bash_complete", "COMP_WORDS": "dal dr", "COMP_CWORD": "1"}
    words = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert "plain,drop" in words.stdout.split()


@pytest.mark.parametrize("args", ERRORS)
def test_a_served_catalog_errs_as_the_database_does(served_url: str, sqlite_url: str, args: tuple[str, ...]) -> None:
    """The same error (text, class, exit code) through a ``dal serve`` catalog with a MANAGE token as from the
    database URL, with --json and without."""
    from dal.catalog import Catalog

    Catalog(sqlite_url).close()  # made, empty: as the served one is
    for json_flag in (("--json",), ()):
        direct = CliRunner().invoke(cli, ["--catalog", sqlite_url, *args, *json_flag])
        served = CliRunner().invoke(cli, ["--catalog", served_url, *args, *json_flag])
        assert (served.exit_code, served.stdout, served.stderr) == (direct.exit_code, direct.stdout, direct.stderr)
