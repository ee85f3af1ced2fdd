"""``dal label`` / ``dal unlabel`` / ``dal labels``, the labels in ``dal show`` (table, TSV, JSON), ``dal ls --label``,
column descriptions in ``dal show`` and, with column labels, in ``dal schema``: on SQLite, PostgreSQL and through ``dal serve``, every refusal one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dal.catalog import Field, Schema, VersionDraft
from dal.cli.app import cli
from tests.conftest import open_catalog

DESCRIPTION = "the customer's <b>address</b>\tand\nmore"
SCHEMA = Schema((Field("id", "int64", False), Field("email", "string"), Field("note", "string")))


@pytest.fixture
def url(catalog_url_or_served: str) -> str:
    cat = open_catalog(catalog_url_or_served)
    cat.create_dataset("crm.users", format="delta", location="/data/crm/users")
    described = SCHEMA.described({"email": DESCRIPTION})
    cat.publish("crm.users", VersionDraft("create", described, 3))
    cat.create_dataset("crm.events", format="delta", location="/data/crm/events")
    cat.close()
    return catalog_url_or_served


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--catalog", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_label_unlabel_and_show(url: str) -> None:
    assert run(url, "label", "crm.users", "gold", "owner-team=vision") == (
        0,
        "crm.users: labelled gold, owner-team=vision (labels: gold, owner-team=vision)\n",
        "",
    )
    code, out, _ = run(url, "label", "crm.users", "pii", "--column", "email", "--json")
    assert code == 0 and json.loads(out) == {
        "dataset": "crm.users",
        "labels": {"dataset": ["gold", "owner-team=vision"], "columns": {"email": ["pii"]}},
    }
    code, out, _ = run(url, "show", "crm.users", "-o", "tsv")
    rows = dict(line.split("\t") for line in out.splitlines()[1:])
    assert rows["labels"] == "gold, owner-team=vision" and rows["labels of email"] == "pii"
    assert rows["description of email"] == "the customer's <b>address</b>\\x09and\\x0amore"
    assert "description of id" not in rows
    code, out, _ = run(url, "show", "crm.users", "--json")
    shown = json.loads(out)
    assert shown["labels"] == {"dataset": ["gold", "owner-team=vision"], "columns": {"email": ["pii"]}}
    assert [f.get("description") for f in shown["latest"]["schema"]] == [None, DESCRIPTION, None]
    code, out, _ = run(url, "show", "crm.events", "--json")
    assert json.loads(out)["labels"] == {"dataset": [], "columns": {}}
    code, out, _ = run(url, "labels", "crm.users", "-o", "tsv")
    assert out == "column\tlabel\n\tgold\n\towner-team=vision\nemail\tpii\n"
    assert run(url, "unlabel", "crm.users", "owner-team")[0] == 0
    code, out, _ = run(url, "labels", "crm.users", "--json")
    assert json.loads(out)["labels"] == {"dataset": ["gold"], "columns": {"email": ["pii"]}}
    code, out, err = run(url, "labels", "crm.events")
    assert code == 0 and "crm.events has no labels" in out + err


def test_ls_by_label(url: str) -> None:
    run(url, "label", "crm.events", "gold")
    run(url, "label", "crm.users", "pii", "--column", "email")
    code, out, _ = run(url, "ls", "--label", "gold", "-o", "tsv")
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()[1:]] == ["crm.events"]
    code, out, _ = run(url, "ls", "--label", "pii", "--json")
    assert [d["name"] for d in json.loads(out)] == ["crm.users"]  # a column's label counts
    code, out, _ = run(url, "ls", "crm.u*", "--label", "gold", "--json")
    assert json.loads(out) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["label", "crm.users", "has space"], "dal: error: invalid label 'has space': a label's key is 1-63"),
        (["label", "crm.users", "ok", "bad=<b>"], "dal: error: invalid label 'bad=<b>': a label's value"),
        (["label", "crm.users", "pii", "--column", "mail"], "dal: error: crm.users has no column 'mail'"),
        (["unlabel", "crm.users", "gold"], "dal: error: label 'gold' on crm.users not found; it has no labels"),
        (["label", "crm.nobody", "gold"], "dal: error: dataset 'crm.nobody' not found"),
        (["ls", "--label", "a b"], "dal: error: invalid label 'a b'"),
    ],
)
def test_refusals_are_one_line_and_store_nothing(url: str, args: list[str], message: str) -> None:
    code, _out, err = run(url, *args)
    assert code != 0 and err.startswith(message) and err.count("\n") == 1, err
    assert run(url, "labels", "crm.users", "--json")[1].count("ok") == 0  # nothing of a refused command stored


def test_schema_shows_column_labels_and_descriptions(url: str) -> None:
    run(url, "label", "crm.users", "pii", "--column", "email")
    code, out, _ = run(url, "schema", "crm.users", "-o", "tsv")
    assert code == 0
    header, *rows = [line.split("\t") for line in out.splitlines()]
    assert header == ["#", "column", "type", "nullable", "tensor", "labels", "description"]
    email = rows[1]
    assert email[1] == "email" and email[5] == "pii"
    assert email[6] == "the customer's <b>address</b>\\x09and\\x0amore"  # escaped: one line, one cell
    assert rows[0][5:] == ["", ""]
    code, out, _ = run(url, "schema", "crm.users")
    assert "the customer's <b>address</b>" in out and "description" in out
    fields = json.loads(run(url, "schema", "crm.users", "--json")[1])["fields"]
    assert fields[1]["description"] == "the customer's <b>address</b>\tand\nmore" and "description" not in fields[0]
