"""Opens a tcpadvise HTML page in a real browser: Debian's chromium, driven by
Playwright for Python with the system browser (no `playwright install`).

`open_page` loads the page from its file:// URL with every other request
recorded and refused (and the context offline), then reports what a person
opening it would meet: console errors and uncaught exceptions, requests the
page tried, and every chart's drawn size and element count; it saves a
full-page screenshot. The caller skips (with the reason) when chromium or
Playwright is missing: scripts/install-deps.sh installs both."""
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TCPADVISE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# LOAD_TIMEOUT_MS: a page of a few hundred KiB of SVG renders in well under a second.
LOAD_TIMEOUT_MS = 15_000


@dataclass
class PageVisit:
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every request other than the page itself
    charts: list[dict] = field(default_factory=list)  # {width, height, elements, paths} per <svg>
    title: str = ""
    text: str = ""
    screenshot: Path | None = None


def require_browser():
    """Playwright's sync API, or a skip with the reason."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (scripts/install-deps.sh installs the test extra)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"chromium is not installed at {CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)")
    return sync_playwright


_CHARTS_JS = """() => Array.from(document.querySelectorAll('div.chart > svg')).map(svg => {
  const box = svg.getBoundingClientRect();
  return {width: box.width, height: box.height, elements: svg.querySelectorAll('*').length,
          paths: svg.querySelectorAll('path').length};
})"""


def open_page(page_path: Path, screenshot: Path) -> PageVisit:
    sync_playwright = require_browser()
    url = page_path.resolve().as_uri()
    visit = PageVisit(url)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})

            def refuse(route):
                if route.request.url != url:
                    visit.requests.append(route.request.url)
                    route.abort()
                else:
                    route.continue_()

            context.route("**/*", refuse)
            page = context.new_page()
            page.on("console", lambda message: message.type == "error" and visit.console_errors.append(message.text))
            page.on("pageerror", lambda error: visit.page_errors.append(str(error)))
            page.on("request", lambda request: request.url != url and request.url not in visit.requests
                    and visit.requests.append(request.url))
            page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
            visit.title = page.title()
            visit.text = page.inner_text("body")
            visit.charts = page.evaluate(_CHARTS_JS)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            visit.screenshot = screenshot
        finally:
            browser.close()
    print(f"screenshot of {page_path.name}: {screenshot}")
    return visit


def assert_page_is_whole(visit: PageVisit, charts: int) -> None:
    """No request, console error or exception, at least `charts` charts, each drawn and non-empty."""
    assert visit.requests == [], f"the page tried to load {visit.requests}"
    assert visit.console_errors == [], visit.console_errors
    assert visit.page_errors == [], visit.page_errors
    assert len(visit.charts) >= charts, visit.charts
    for chart in visit.charts:
        # A chart is drawn at its size, with axes, ticks and data: a few dozen elements at least.
        assert chart["width"] > 200 and chart["height"] > 80, chart
        assert chart["elements"] > 30 and chart["paths"] > 5, chart
