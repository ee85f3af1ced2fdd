"""The CLI's layout: commands live in modules by group (dal.cli.datasets, content, io, maintenance, hive, ui) and
all register on the one ``dal`` group; sizes print with one formatter (binary units) in the CLI, the web UI and the
progress line alike."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dal.catalog import Catalog, Schema, VersionDraft
from dal.catalog.types import Field


def test_every_command_module_registers_its_commands() -> None:
    from dal.cli import app, content, datasets, hive, io, maintenance, ui

    names = set(app.cli.commands)
    for module in (datasets, content, io, maintenance):
        assert {c.name for c in module.COMMANDS} <= names
    assert {"hive", "ui", "db", "cache", "ls", "gc", "register", "head"} <= names
    assert app.cli.commands["hive"] is hive.hive_group and app.cli.commands["ui"] is ui.ui_cmd


def test_one_size_formatter_in_binary_units() -> None:
    import dal.ui.app
    from dal import progress
    from dal.cli import output

    assert output.size_text is progress.size_text is dal.ui.app.size_text
    assert progress.size_text(1536) == "1.5 KiB" and progress.size_text(3 * 1024**3) == "3.0 GiB"
    assert dal.ui.app._human_size(2048) == "2.0 KiB"


def test_cli_prints_sizes_as_the_ui_does(tmp_path: Path) -> None:
    from dal.cli.app import cli

    url = f"sqlite:///{tmp_path}/c.db"
    cat = Catalog(url)
    cat.create_dataset("a.b", format="delta", location=str(tmp_path / "ab"))
    cat.publish("a.b", VersionDraft("create", Schema((Field("id", "int64"),)), 3, size_bytes=1536))
    cat.close()
    for command in (["show", "a.b"], ["versions", "a.b"]):
        r = CliRunner().invoke(cli, ["--catalog", url, *command])
        assert r.exit_code == 0, r.output
        assert "1.5 KiB" in r.stdout and " KB" not in r.stdout
