"""Sending canaries: one request per order, under the canary's deadline: a completion of ``max_tokens``
1, or the engine's own request where its ``CanaryPlan`` made one (the order carries its path and payload).

When to send and what an answer means is the model's (``sparktui.model.canary``, asked through
``CanaryPlanner``); this is the I/O. A result is kept until the instance's next poll takes it into its
``ServerObservation.canary``, so it reaches the model (and a recording) the way every answer does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from sparktui.model.canary import CANARY_MAX_TOKENS
from sparktui.model.fleet import CanaryOrder
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.specs import CanarySpec, FleetSpec, ServerSpec
from sparktui.sources._httpx import httpx
from sparktui.sources.http import make_client, post_json

ANSWER_CAP = 64 * 1024  # a 1-token completion's answer is a few hundred bytes
COMPLETIONS_PATH = "/v1/completions"


class CanaryPlanner(Protocol):
    """What decides which canaries are due: the monitor core (``Monitor.canaries_due``)."""

    def canaries_due(self, node: str, t: float) -> Sequence[CanaryOrder]: ...


def auth_headers(spec: ServerSpec) -> dict[str, str]:
    """The instance's API key as a bearer token (none when it has none)."""
    key = spec.api_key
    return {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}


def canary_payload(canary: CanarySpec, model: str | None) -> dict[str, object]:
    """The completion a canary asks for: the configured prompt, one token, greedy, not streamed."""
    payload: dict[str, object] = {
        "prompt": canary.prompt,
        "max_tokens": CANARY_MAX_TOKENS,
        "temperature": 0,
        "stream": False,
    }
    if model is not None:
        payload["model"] = model
    return payload


def canary_request(canary: CanarySpec, order: CanaryOrder) -> tuple[str, dict[str, object]]:
    """The path and payload of ``order``: the engine's own (``CanaryPlan``), else an OpenAI completion."""
    if order.path is not None and order.payload is not None:
        return order.path, order.payload
    return COMPLETIONS_PATH, canary_payload(canary, order.model)


async def send_canary(
    client: httpx.AsyncClient, spec: ServerSpec, canary: CanarySpec, order: CanaryOrder
) -> HttpResult:
    """POST the canary ``order`` to the instance; never raises (but for cancellation)."""
    assert spec.base_url is not None
    path, payload = canary_request(canary, order)
    return await post_json(
        client,
        f"{spec.base_url}{path}",
        payload,
        timeout_s=canary.timeout_s,
        max_bytes=ANSWER_CAP,
        headers=auth_headers(spec),
    )


class CanarySender:
    """Sends the canaries it is given, each on its own task, and keeps each result for ``take``."""

    def __init__(self, fleet: FleetSpec) -> None:
        self.fleet = fleet
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._results: dict[tuple[str, str], HttpResult] = {}

    def send(self, node: str, orders: Sequence[CanaryOrder]) -> None:
        spec = self.fleet.node(node)
        for order in orders:
            vllm = next((v for v in spec.vllm if v.name == order.instance), None) if spec is not None else None
            if vllm is None or vllm.base_url is None:
                continue
            task = asyncio.create_task(self._one(node, vllm, order))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _one(self, node: str, vllm: ServerSpec, order: CanaryOrder) -> None:
        if self._client is None:
            self._client = make_client(ca_file=self.fleet.ca_file)
        try:
            result = await send_canary(self._client, vllm, self.fleet.canary, order)
        except Exception as exc:  # a bug must still hand back a result: the model waits for one
            path = order.path or COMPLETIONS_PATH
            result = HttpResult(url=f"{vllm.base_url}{path}", kind=FetchKind.ERROR, error=repr(exc)[:200])
        self._results[(node, order.instance)] = result

    def take(self, node: str, instance: str) -> HttpResult | None:
        """The instance's canary result that finished since the last call, if any."""
        return self._results.pop((node, instance), None)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def wait(self) -> None:
        """Until every canary sent has its result (each ends by its deadline)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
