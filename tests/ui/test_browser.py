"""``dal ui`` in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium with the system
driver: nothing is downloaded): search, open a dataset, switch versions, diff, and the schema and charts render."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.conftest import EXPIRED, HOSTILE, THUMB_COLOUR, VALUE_COMMENT, Server

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        reason = f"{', '.join(missing)} not installed (apt-get install -y chromium chromium-driver; make test does it)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1600",
    ):
        options.add_argument(arg)
    # an explicit driver path: Selenium Manager is never asked to download a browser or driver
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def by_id(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def navigate(driver: Any, element: Any) -> None:
    """Click ``element`` and wait until the next page has replaced this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 20).until(expected_conditions.staleness_of(old))
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")


def texts(driver: Any, css: str, inner: str | None = None) -> list[str]:
    """The text of every element ``css`` finds (of its ``inner`` element, if given), read again if the page
    replaced a node between finding and reading it (Chromium: "Node with given id does not belong to the
    document" when a navigation lands in between)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def read(d: Any) -> tuple[list[str]] | None:
        try:
            found = d.find_elements(By.CSS_SELECTOR, css)
            return ([(e.find_element(By.CSS_SELECTOR, inner) if inner else e).text for e in found],)
        except WebDriverException:  # stale: read the settled page again
            return None

    return list(WebDriverWait(driver, 20).until(read)[0])


def select(driver: Any, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(by_id(driver, element_id)).select_by_value(value)


def svg_bars(driver: Any, element_id: str) -> int:
    from selenium.webdriver.common.by import By

    svg = by_id(driver, element_id)
    size = svg.size
    assert size["width"] > 100 and size["height"] >= 30, (element_id, size)
    return len(svg.find_elements(By.CSS_SELECTOR, "rect.bar"))


def test_search_open_switch_diff(browser: Any, sqlite_server: Server, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/")
    assert "dal catalog" in d.title
    assert "125 datasets" in by_id(d, "count").text
    box = by_id(d, "q")
    box.send_keys("radar")
    navigate(d, by_id(d, "search"))
    rows = d.find_elements(By.CSS_SELECTOR, "#datasets tbody tr")
    assert len(rows) == 1 and "Radar scans <b>hourly</b>" in rows[0].text and "240" in rows[0].text

    navigate(d, d.find_element(By.LINK_TEXT, "weather.radar"))
    assert by_id(d, "dataset-name").text == "weather.radar"
    assert by_id(d, "current-version").text == "2"
    schema = by_id(d, "schema").text
    assert "quality" in schema and "value" in schema and "partition" in schema
    assert svg_bars(d, "rows-chart") == 3 and svg_bars(d, "bytes-chart") == 3 and svg_bars(d, "partitions-chart") == 3
    assert 'dal.open("weather.radar", 2)' in by_id(d, "snippet").text

    select(d, "version-select", "0")
    navigate(d, by_id(d, "switch"))
    assert by_id(d, "current-version").text == "0"
    assert "quality" not in by_id(d, "schema").text
    assert 'dal.open("weather.radar", 0)' in by_id(d, "snippet").text
    assert svg_bars(d, "partitions-chart") == 1

    select(d, "diff-old", "0")
    select(d, "diff-new", "2")
    navigate(d, by_id(d, "diff-go"))
    diff = by_id(d, "diff").text
    assert "quality" in diff and "+" in diff
    assert "40 → 240 (+200)" in by_id(d, "row-change").text

    # the versions table beside the charts links each version (the bars are no links: no tab stop per bar)
    d.get(sqlite_server.base + "/d/weather.radar")
    assert d.find_elements(By.CSS_SELECTOR, "#rows-chart a, #bytes-chart a") == []
    navigate(d, d.find_element(By.CSS_SELECTOR, '#versions-table a[href="/d/weather.radar?v=1"]'))
    assert by_id(d, "current-version").text == "1"
    assert "prod" in by_id(d, "version-card").text

    # the preview page summarises tensor cells
    d.get(sqlite_server.base + "/d/vision.scans/preview?v=0")
    assert "<float32[3, 4] (ndarray)" in by_id(d, "preview").text

    # the chart is drawn: the screenshot of the SVG has the bar colours, the current version's among them
    d.get(sqlite_server.base + "/d/weather.radar")
    pixels = png_pixels(by_id(d, "rows-chart").screenshot_as_png)
    colours = set(pixels)
    assert len(colours) > 3, "the rows chart rendered as a blank area"
    assert any(abs(r - 0xE4) < 12 and abs(g - 0x57) < 12 and abs(b - 0x2E) < 12 for r, g, b in colours)
    assert any(abs(r - 0x5B) < 12 and abs(g - 0x8D) < 12 and abs(b - 0xEF) < 12 for r, g, b in colours)


def png_pixels(png: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit, non-interlaced RGB/RGBA PNG (what Chromium's screenshots are)."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    out: list[tuple[int, int, int]] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out += [(line[x], line[x + 1], line[x + 2]) for x in range(0, stride, bpp)]
        prev = line
    return out


def test_hostile_text_is_shown_not_run(browser: Any, sqlite_server: Server) -> None:
    d = browser
    d.get(sqlite_server.base + "/d/evil.ds")
    assert by_id(d, "description").text == "<script>alert('x')</script>\"><img src=x onerror=alert(1)>"
    from selenium.webdriver.common.by import By

    assert d.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    assert "***" in by_id(d, "location").text and "wJalrXUtnFEMI" not in d.page_source


def test_readme_screenshot(browser: Any, sqlite_server: Server) -> None:
    """Refreshes docs/ui.png when DAL_UI_SCREENSHOT=1 (kept out of normal runs: the tree stays clean)."""
    d = browser
    d.set_window_size(1280, 1640)
    d.get(sqlite_server.base + "/d/vision.street_scenes")
    png = d.get_screenshot_as_png()
    assert len(png) > 10_000
    if os.environ.get("DAL_UI_SCREENSHOT"):
        (REPO / "docs").mkdir(exist_ok=True)
        (REPO / "docs" / "ui.png").write_bytes(png)


def test_lineage_graph_links_versions(browser: Any, lineage_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(lineage_server.base + "/d/chain.b")
    graph = by_id(d, "lineage-graph")
    assert graph.size["width"] > 100 and graph.size["height"] >= 30
    links = {a.get_dom_attribute("href") for a in graph.find_elements(By.TAG_NAME, "a")}
    assert links == {"/d/chain.a?v=0", "/d/chain.c?v=0"}
    assert "written by" in by_id(d, "lineage-facts").text
    assert d.find_elements(By.CSS_SELECTOR, "main script, main img") == []

    # follow the downstream box: chain.c's page, whose graph leads back to chain.b and on to chain.forged
    navigate(d, graph.find_element(By.CSS_SELECTOR, 'a[href="/d/chain.c?v=0"]'))
    assert by_id(d, "dataset-name").text == "chain.c" and by_id(d, "current-version").text == "0"
    back = by_id(d, "lineage-graph").find_elements(By.TAG_NAME, "a")
    assert [a.get_dom_attribute("href") for a in back] == ["/d/chain.b?v=0", "/d/chain.forged?v=0"]
    if os.environ.get("DAL_UI_LINEAGE_SHOT"):
        by_id(d, "lineage").screenshot(os.environ["DAL_UI_LINEAGE_SHOT"])

    # a record with hostile text shows it as text; the link to a hostile upstream name is escaped, not run
    d.get(lineage_server.base + "/d/chain.forged")
    assert HOSTILE + "@" + HOSTILE in by_id(d, "lineage-facts").text
    assert d.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    assert "lineagesecret" not in d.page_source and "wJalrXUtnFEMI" not in d.page_source


def test_find_by_column_facet_and_sort(browser: Any, sqlite_server: Server) -> None:
    d = browser
    d.get(sqlite_server.base + "/")
    by_id(d, "q").send_keys("lane_mask")  # a column name: only name and description were searched before
    navigate(d, by_id(d, "search"))
    assert texts(d, "#datasets tbody tr", "a") == ["vision.street_scenes"]

    d.get(sqlite_server.base + "/")
    select(d, "facet-format", "petastorm")
    select(d, "sort", "-size")
    navigate(d, by_id(d, "apply"))
    assert texts(d, "#datasets a.dataset-link") == ["vision.street_scenes", "vision.scans"]  # the larger first
    (count,) = texts(d, "#count")
    assert "2 datasets" in count and "format petastorm" in count
    options = texts(d, "#facet-format option")
    assert any(o.startswith("delta (") for o in options)  # the other formats stay on offer


def test_expired_versions_are_marked(browser: Any, sqlite_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/d/vision.street_scenes")
    options = {
        o.get_attribute("value"): o.text for o in by_id(d, "version-select").find_elements(By.TAG_NAME, "option")
    }
    assert all(("expired" in options[str(n)]) == (n in EXPIRED) for n in range(12))
    select(d, "version-select", "1")
    navigate(d, by_id(d, "switch"))
    assert by_id(d, "version-status").text == "expired"
    assert "expired by dal gc" in by_id(d, "expired-note").text
    assert 'dal.open("vision.street_scenes", 1)' not in d.page_source
    assert by_id(d, "snippet").text.endswith('dal.open("vision.street_scenes", 11)')
    assert d.find_elements(By.ID, "preview-link") == []
    statuses = [
        r.find_elements(By.TAG_NAME, "td")[-1].text
        for r in d.find_elements(By.CSS_SELECTOR, "#versions-table tbody tr")
    ]
    assert statuses == [""] * 9 + ["expired"] * 3  # newest first


def test_preview_shows_image_thumbnails(browser: Any, sqlite_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/d/vision.scans/preview?v=0")
    images = d.find_elements(By.CSS_SELECTOR, "#preview img.thumb")
    assert len(images) == 8
    # decoded by the browser (the page's CSP allows data: images): 8x8 pixels, shown larger
    assert d.execute_script("return arguments[0].naturalWidth", images[0]) == 8
    assert images[0].size["width"] > 8
    pixels = set(png_pixels(images[0].screenshot_as_png))
    assert any(all(abs(a - b) < 12 for a, b in zip(p, THUMB_COLOUR, strict=True)) for p in pixels), pixels
    assert "<float32[3, 4] (ndarray)" in by_id(d, "preview").text  # tensors still summarised


def test_multi_hop_lineage_on_the_page(browser: Any, lineage_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(lineage_server.base + "/d/chain.a")
    select(d, "depth", "3")
    navigate(d, by_id(d, "depth-go"))
    tree = by_id(d, "downstream-tree")
    links = [a.get_dom_attribute("href") for a in tree.find_elements(By.TAG_NAME, "a")]
    assert links == ["/d/chain.b?v=0", "/d/chain.c?v=0", "/d/chain.forged?v=0"]  # three hops, nested
    assert len(tree.find_elements(By.CSS_SELECTOR, "ul.tree ul.tree ul.tree")) == 1
    d.get(lineage_server.base + "/d/chain.c?depth=2")
    up = [a.get_dom_attribute("href") for a in by_id(d, "upstream-tree").find_elements(By.TAG_NAME, "a")]
    assert up == ["/d/chain.b?v=0", "/d/chain.a?v=0"]
    assert "inferred" in by_id(d, "upstream-tree").text


PAGES = ["/", "/?q=radar", "/d/weather.radar", "/d/vision.street_scenes?v=1", "/d/weather.radar/diff?old=0&new=2",
         "/d/vision.scans/preview?v=0", "/d/no.such"]  # fmt: skip


def test_accessibility_basics(browser: Any, sqlite_server: Server) -> None:
    """One h1 per page, a label for every field, no focusable chart parts, and no sideways scrolling at 400 px."""
    from selenium.webdriver.common.by import By

    d = browser
    try:
        d.set_window_size(400, 900)
        for path in PAGES:
            d.get(sqlite_server.base + path)
            assert len(d.find_elements(By.TAG_NAME, "h1")) == 1, path
            for field in d.find_elements(By.CSS_SELECTOR, "input:not([type=hidden]), select, textarea"):
                fid = field.get_attribute("id")
                labelled = fid and d.find_elements(By.CSS_SELECTOR, f'label[for="{fid}"]')
                assert labelled or field.get_attribute("aria-label"), (path, fid)
            assert (
                d.find_elements(By.CSS_SELECTOR, "svg.chart:not(.lineage) a, svg.chart:not(.lineage) [tabindex]") == []
            )
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, (path, overflow)
    finally:
        d.set_window_size(1280, 1600)


def test_search_says_why_a_dataset_matched(browser: Any, sqlite_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/")
    by_id(d, "q").send_keys("QUAL")  # part of a column name of weather.radar's latest version, another case
    navigate(d, by_id(d, "search"))
    rows = d.find_elements(By.CSS_SELECTOR, "#datasets tbody tr")
    assert len(rows) == 1 and rows[0].find_element(By.CSS_SELECTOR, ".matched").text == "matched: column quality"
    d.get(sqlite_server.base + "/?column=STAT")  # the column facet: part of a name, any case
    names = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#datasets .dataset-link")]
    assert names == ["weather.radar"] and d.find_elements(By.CSS_SELECTOR, ".matched") == []


def test_dataset_page_shows_column_statistics(browser: Any, sqlite_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/d/weather.radar")  # 6 local files: computed on view, as dal stats does
    rows = {
        r.find_elements(By.TAG_NAME, "td")[0].text: [c.text for c in r.find_elements(By.TAG_NAME, "td")[1:]]
        for r in d.find_elements(By.CSS_SELECTOR, "#column-stats tbody tr")
    }
    assert set(rows) == {"date", "station", "value", "quality"}
    assert rows["station"] == ["0", "st0", "st6", ""]  # nulls, min, max, distinct (not known from footers)
    assert rows["quality"][:3] == ["120", "0", "2"]  # versions 0 and 1 had no quality column
    assert rows["date"] == ["0", "2026-03-01", "2026-03-03", "3"]  # a partition column: exact distinct count
    d.get(sqlite_server.base + "/d/vision.street_scenes")  # object storage: only when asked
    assert "in object storage" in by_id(d, "stats-deferred").text and d.find_elements(By.ID, "column-stats") == []
    assert "stats=1" in by_id(d, "stats-link").get_dom_attribute("href")


def test_schema_shows_column_descriptions(browser: Any, sqlite_server: Server) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(sqlite_server.base + "/d/weather.radar")
    cells = {
        r.find_elements(By.TAG_NAME, "td")[1].text.split()[0]: r.find_element(By.CSS_SELECTOR, "td.description").text
        for r in d.find_elements(By.CSS_SELECTOR, "#schema tbody tr")
    }
    assert cells == {"date": "", "station": "", "value": VALUE_COMMENT, "quality": ""}  # text, not markup
    assert d.find_elements(By.CSS_SELECTOR, "#schema i") == []
