"""Headless Debian Chromium driven by Playwright, with the flags this closed network needs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Page, sync_playwright

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium_page() -> Iterator[Page]:
    """A fresh page in headless ``/usr/bin/chromium`` (installed by ``make browser``) with an empty profile."""
    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is not installed: run `make browser`"
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=executable, headless=True,
                                                        args=CHROMIUM_ARGS)
        try:
            yield context.new_page()
        finally:
            context.close()
