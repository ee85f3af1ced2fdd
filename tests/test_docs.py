"""The documentation: what `make docs` (``mkdocs build --strict``) cannot see.

The site build already fails on a reference to a name that is gone, a broken link or anchor between pages of
``docs/`` and a page missing from the nav. These tests cover the rest: the links of ``README.md`` and
``CHANGELOG.md`` (outside the site), the repository paths the pages name, the Python examples, the README as a
short front door, and an API reference entry for every public name of ``dal``.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import pytest

import dal

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
CHANGELOG = REPO / "CHANGELOG.md"
# The project URL the README's absolute links use (PyPI shows the README without the repository around it).
PROJECT_URL = "https://github.com/dal-catalog/dal/"
# Pages whose repository paths are not checked: the changelog names modules as they were then, and the
# architecture page is redrawn from the code separately.
HISTORY = {CHANGELOG, DOCS / "ARCHITECTURE.md"}
REPO_PATH = re.compile(r"^(?:dal|catalog|tests|examples|benchmarks|scripts|docs|alembic)/[\w./-]*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def pages() -> list[Path]:
    return [README, CHANGELOG, *sorted(DOCS.rglob("*.md"))]


def outside_code(text: str) -> str:
    """``text`` without fenced code blocks (links and headings there are not Markdown)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (as mkdocs and GitHub use) gives a heading."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", outside_code(page.read_text()), re.M)
    return {slug(h) for h in headings}


def links(page: Path) -> list[str]:
    return LINK.findall(outside_code(page.read_text()))


@pytest.mark.parametrize("page", [README, CHANGELOG], ids=lambda p: p.name)
def test_relative_links_resolve_to_files_and_headings(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert not broken, f"{page.name}: {broken}"


def test_absolute_project_links_name_files_of_this_repository() -> None:
    """The README's absolute links (the screenshot, for PyPI) point at files that exist here."""
    absolute = [t for p in pages() for t in links(p) if t.startswith(PROJECT_URL)]
    assert any(t.endswith("docs/ui.png") for t in absolute)
    for target in absolute:
        m = re.match(re.escape(PROJECT_URL) + r"(?:raw|blob|tree)/main/(.+)$", target.split("#")[0])
        if m:
            assert (REPO / m.group(1)).exists(), target


def test_repository_paths_named_in_the_pages_exist() -> None:
    missing = []
    for page in pages():
        if page in HISTORY:
            continue
        for token in re.findall(r"`([^`\n]+)`", page.read_text()):
            if REPO_PATH.match(token) and not (REPO / token).exists():
                missing.append(f"{page.relative_to(REPO)}: {token}")
    assert not missing, missing


def test_python_examples_parse() -> None:
    bad = []
    for page in pages():
        for language, code in FENCE.findall(page.read_text()):
            if language == "python":
                try:
                    ast.parse(code)
                except SyntaxError as e:
                    bad.append(f"{page.relative_to(REPO)}: {e}")
    assert not bad, bad


def test_readme_is_a_front_door() -> None:
    """Short (issue: at most ~300 lines), and it describes no tests: those live in docs/CONFORMANCE.md."""
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert "tests/" not in text
    for command in re.findall(r"^make (\w+)", text, re.M):
        assert re.search(rf"^{command}:", (REPO / "Makefile").read_text(), re.M), f"make {command}"


def test_every_public_name_has_a_reference_entry() -> None:
    reference = "".join(p.read_text() for p in (DOCS / "reference").glob("*.md"))
    missing = [name for name in dal.__all__ if name != "__version__" and f"dal.{name}" not in reference]
    assert not missing, f"add these to a page of docs/reference/: {missing}"


def test_the_docs_recipe_fails_on_a_broken_link(tmp_path: Path) -> None:
    """``make docs`` runs mkdocs with the Makefile's own flags; on a site with a broken link they must fail the
    build. ``--quiet`` beside ``--strict`` hid the warnings ``--strict`` counts: the build passed with a broken
    link (the changelog's, included into the site from the repository root)."""
    import shlex
    import subprocess
    import sys

    recipe = (REPO / "Makefile").read_text().split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    line = next(x for x in recipe.splitlines() if "mkdocs build" in x)
    flags = [a for a in shlex.split(line.split("mkdocs", 1)[1]) if a != "build"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nnav:\n  - index.md\n")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", *flags, "-d", str(tmp_path / "site")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "--strict" in flags and out.returncode != 0 and "missing.md" in out.stdout + out.stderr, out.stderr
