"""What the Ollama tests share: the docs' ``/api/ps`` example (docs.ollama.com/api/ps) and a
``/v1/models`` answer (docs.ollama.com/api/openai-compatibility), a one-node fleet with one Ollama, and a
GB10 host sample to lay a ledger on."""

from __future__ import annotations

from datetime import UTC, datetime

from sparktui.model.host import FrameSplitter, HostSample, parse_frame
from tests.conftest import DATA
from tests.support.ollama_server import DETAILS

# docs.ollama.com/api/ps, its example answer
PS = {
    "models": [
        {
            "name": "gemma3",
            "model": "gemma3",
            "size": 6591830464,
            "digest": "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a",
            "details": DETAILS,
            "expires_at": "2025-10-17T16:47:07.93355-07:00",
            "size_vram": 5333539264,
            "context_length": 4096,
        }
    ]
}
EXPIRES = datetime(2025, 10, 17, 23, 47, 7, 933550, tzinfo=UTC).timestamp()
MODELS = {
    "object": "list",
    "data": [
        {"id": "gemma3", "object": "model", "created": 1759559643, "owned_by": "library"},
        {"id": "qwen3:8b", "object": "model", "created": 1759559643, "owned_by": "library"},
    ],
}

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "ollama"
engine = "ollama"
port = 11434
"""


def serving_sample() -> HostSample:
    """The first frame of a GB10 serving vLLM (``tests/data/host/frames-serving.txt``)."""
    splitter = FrameSplitter()
    text = (DATA / "host" / "frames-serving.txt").read_text()
    return parse_frame(next(f for line in text.splitlines() if (f := splitter.feed(line)) is not None))
