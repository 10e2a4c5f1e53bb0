"""The reference of the load bench: a bare FastAPI app with one JSON endpoint, served by the same
``uvicorn.run(app, host=..., port=..., log_level="warning")`` call as ``servesize serve``.

``python -m bench.bare_app PORT``
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI()


class Echo(BaseModel):
    model: str
    hardware: str


@app.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/bare")
async def bare(body: Echo) -> dict[str, str]:
    """Parse a small JSON body and answer a small JSON object: HTTP and framework cost only."""
    return {"model": body.model, "hardware": body.hardware}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
