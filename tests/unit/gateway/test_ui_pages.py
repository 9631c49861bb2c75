"""The console's pages and assets as the gateway serves them (no cluster needed)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from services.gateway.errors import install_error_handlers
from services.gateway.routes import ui


def get(*paths: str) -> list[httpx.Response]:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(ui.router)

    async def fetch() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as http:
            return [await http.get(path) for path in paths]

    return asyncio.run(fetch())


def test_the_console_page_and_its_assets_are_served():
    root, page, *assets = get("/ui", "/ui/", "/ui/static/console.js", "/ui/static/linechart.js",
                              "/ui/static/console.css")
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in assets:
        assert asset.status_code == 200
        assert asset.url.path in page.text


def test_nothing_outside_the_static_directory_is_served():
    for answer in get("/ui/static/nope.js", "/ui/static/%2e%2e%2fsampler.py", "/ui/static/%2e%2e"):
        assert answer.status_code == 404, answer.url


def test_the_pages_load_nothing_from_elsewhere():
    for name in ("index.html", "console.js", "linechart.js", "console.css"):
        text = (ui.STATIC_DIR / name).read_text().replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text and "https://" not in text, name
