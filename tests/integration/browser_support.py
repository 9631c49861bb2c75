"""Debian's Chromium driven by Playwright, for the web console's browser tests: the module-level skip
when either is missing, and one headless browser per test module."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (make system-deps installs Debian's chromium)", allow_module_level=True)

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium, closed on the way out."""
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
