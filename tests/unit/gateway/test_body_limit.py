"""The request body cap: a body over `max.request.bytes` is answered 413 in REST Proxy's error shape,
whether its size is declared (Content-Length) or only seen as it arrives (chunked), and the route
never sees it."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI, Request

from services.gateway.app import BodyLimitMiddleware

LIMIT = 1000


def capped_app() -> tuple[FastAPI, list[int]]:
    app = FastAPI()
    seen: list[int] = []

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        body = await request.body()
        seen.append(len(body))
        return {"bytes": len(body)}

    app.add_middleware(BodyLimitMiddleware, max_bytes=LIMIT)
    return app, seen


def post(app: FastAPI, content) -> httpx.Response:
    async def main() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
            return await client.post("/echo", content=content)

    return asyncio.run(main())


def test_a_body_within_the_cap_reaches_the_route():
    app, seen = capped_app()
    answer = post(app, b"x" * LIMIT)
    assert (answer.status_code, answer.json(), seen) == (200, {"bytes": LIMIT}, [LIMIT])


def test_a_declared_body_over_the_cap_is_413_unread():
    app, seen = capped_app()
    answer = post(app, b"x" * (LIMIT + 1))
    assert answer.status_code == 413
    assert answer.json()["error_code"] == 413 and "max.request.bytes" in answer.json()["message"]
    assert seen == []


def test_a_chunked_body_over_the_cap_is_413_as_it_arrives():
    app, seen = capped_app()

    async def chunks():
        for _ in range(5):
            yield b"y" * 300

    answer = post(app, chunks())
    assert answer.status_code == 413 and answer.json()["error_code"] == 413
    assert seen == []
