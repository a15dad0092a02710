"""How ``before.prom`` and ``after.prom`` were made: one real vLLM 0.32 (CPU build, the tiny model) and
a known burst between two scrapes. Run from the repository root with the project's venv::

    python tests/data/vllm-0.32/capture.py OUT_DIR

It starts the server (``tests/support/vllm_server.py``), sends the warm-up and the burst, writes
``before.prom``, ``after.prom``, ``burst.json`` (every request sent and vLLM's answer: status, error
message, ``usage``) and ``expected.json`` (what the burst implies, computed from the answers alone),
then stops the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.support.vllm_server import VLLM_VENV, start_vllm, vllm_python, wait_healthy  # noqa: E402

PORT = 18123
MAX_NUM_QUEUED_REQS = 4
MAX_NUM_QUEUED_TOKENS = 1000
WORDS = [
    "the",
    "model",
    "can",
    "use",
    "the",
    "cache",
    "for",
    "one",
    "long",
    "day",
    "and",
    "the",
    "node",
    "has",
    "been",
    "up",
    "like",
    "water",
    "in",
    "a",
    "gpu",
]


def words(n: int, shift: int) -> str:
    return " ".join(WORDS[(i * 7 + shift) % len(WORDS)] for i in range(n))


SHARED_PREFIX = words(300, 1)  # several KV blocks long, so the later requests hit the prefix cache


async def complete(client: httpx.AsyncClient, prompt: str, tag: str) -> dict[str, Any]:
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 20, "temperature": 0}
    response = await client.post("/v1/completions", json=body)
    answer: dict[str, Any] = response.json()
    return {
        "tag": tag,
        "status": response.status_code,
        "message": (answer.get("error") or {}).get("message") if response.status_code != 200 else None,
        "usage": answer.get("usage"),
    }


async def settled_scrape(client: httpx.AsyncClient) -> str:
    """/metrics once the engine is idle and two scrapes a second apart agree on every vllm: line."""
    previous = ""
    while True:
        text = (await client.get("/metrics")).text
        lines = "\n".join(line for line in text.splitlines() if line.startswith("vllm:"))
        if lines == previous and "vllm:num_requests_running{" in text:
            return text
        previous = lines
        await asyncio.sleep(1.0)


async def run(out: Path, url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120.0) as client:
        warm = [await complete(client, words(40, i) + " warm", f"warm-{i}") for i in range(2)]
        before = await settled_scrape(client)
        burst: list[dict[str, Any]] = []
        # 1. sequential, one shared 300-word prefix: the first computes it, the next three hit the cache
        for i in range(4):
            burst.append(await complete(client, SHARED_PREFIX + " " + words(12, 3 + i), f"shared-{i}"))
        # 2. sixteen short prompts at once: more than max_num_queued_reqs in flight
        burst += await asyncio.gather(*(complete(client, words(10, 20 + i), f"short-{i}") for i in range(16)))
        # 3. six long distinct prompts at once: more than max_num_queued_tokens in prefill
        burst += await asyncio.gather(*(complete(client, words(500, 40 + i), f"long-{i}") for i in range(6)))
        after = await settled_scrape(client)
        version = (await client.get("/version")).json()
    (out / "before.prom").write_text(before, encoding="utf-8")
    (out / "after.prom").write_text(after, encoding="utf-8")
    record = {"version": version, "warm_up": warm, "burst": burst}
    (out / "burst.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    (out / "expected.json").write_text(json.dumps(expected(burst), indent=1) + "\n", encoding="utf-8")


def expected(burst: list[dict[str, Any]]) -> dict[str, Any]:
    """What the burst implies, from vLLM's answers alone (never from /metrics)."""
    ok = [r for r in burst if r["status"] == 200]
    prompt = sum(r["usage"]["prompt_tokens"] for r in ok)
    cached = sum((r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for r in ok)
    completion = sum(r["usage"]["completion_tokens"] for r in ok)
    busy = sum(1 for r in burst if r["status"] == 503 and "currently busy" in (r["message"] or ""))
    backlog = sum(1 for r in burst if r["status"] == 503 and "backlog limit" in (r["message"] or ""))
    return {
        "requests_sent": len(burst),
        "requests_succeeded": len(ok),
        "prompt_tokens": prompt,
        "prompt_tokens_cached": cached,
        "prompt_tokens_computed": prompt - cached,
        "generation_tokens": completion,
        "admission_rejections": {"max_num_queued_reqs": busy, "max_num_queued_tokens": backlog},
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    python = vllm_python()
    assert python is not None, "no vLLM venv"
    extra = (
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--max-num-queued-reqs",
        str(MAX_NUM_QUEUED_REQS),
        "--max-num-queued-tokens",
        str(MAX_NUM_QUEUED_TOKENS),
    )
    server = start_vllm(python, VLLM_VENV / "tiny-model", out / "vllm.log", *extra, port=PORT)
    try:
        asyncio.run(wait_healthy(server))
        asyncio.run(run(out, server.url))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
