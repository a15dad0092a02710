"""A NIM for LLMs container: how it is recognised, and where it answers.

``sparktui init`` reads the docker containers of a host (``sparktui.discovery`` reads ``docker run``
and ``docker inspect``); what is NIM's is here. A NIM is one container of an image under
``nvcr.io/nim/`` (``nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4``: the image names the model), whose
entrypoint starts the server itself: there is no command line to read. It answers on ``NIM_SERVER_PORT``
(8000 when not set) inside the container, and ``NIM_SERVED_MODEL_NAME`` names the model on ``/v1/models``
(docs.nvidia.com/nim/large-language-models, "Configuring a NIM"). Pure: the words are untrusted text from
a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sparktui.engines.command_line import bounded_whole

DEFAULT_PORT = 8000  # NIM_SERVER_PORT's default
PORT_VARIABLE = "NIM_SERVER_PORT"
SERVED_NAME_VARIABLE = "NIM_SERVED_MODEL_NAME"
# nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4, nvcr.io/nim/nvidia/llama-3.3-nemotron-super-49b-v1@sha256:...
_IMAGE = re.compile(
    r"^(?:[A-Za-z0-9.-]+/)?nvcr\.io/nim/(?P<model>[a-z0-9][a-z0-9._/-]*?)(?::[A-Za-z0-9_.-]+)?(?:@sha256:[0-9a-f]+)?$"
)


def is_nim_image(image: str) -> bool:
    """An image of NVIDIA's NIM catalogue (``nvcr.io/nim/ORG/MODEL:TAG``)."""
    return _IMAGE.match(image) is not None


@dataclass(frozen=True, slots=True)
class NimContainer:
    """What a NIM container's image and environment say about the server sparktui will watch."""

    port: int | None = DEFAULT_PORT  # None: NIM_SERVER_PORT set, but not a port
    port_raw: str | None = None  # NIM_SERVER_PORT as set; None: not set
    model: str | None = None  # the model the image is named for (meta/llama-3.1-8b-instruct)
    served_model_name: str | None = None  # NIM_SERVED_MODEL_NAME

    def port_how(self) -> str:
        """How the port inside the container was given, for the config's comment."""
        if self.port_raw is None:
            return f"NIM's default port {self.port}"
        if self.port is None:
            return f"`{PORT_VARIABLE}={self.port_raw}`, which init cannot read"
        return f"`{PORT_VARIABLE}={self.port}`"


def read_container(image: str, env: Mapping[str, str]) -> NimContainer | None:
    """A NIM container's port and model, from its image and environment; None when the image is not a
    NIM's."""
    found = _IMAGE.match(image)
    if found is None:
        return None
    raw = env.get(PORT_VARIABLE)
    return NimContainer(
        port=DEFAULT_PORT if raw is None else bounded_whole(raw, 65535),
        port_raw=raw,
        model=found.group("model"),
        served_model_name=env.get(SERVED_NAME_VARIABLE) or None,
    )
