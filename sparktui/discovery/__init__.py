"""What ``sparktui init`` found on a host, turned into a commented config: the pure half of init.

``sparktui.init`` does the I/O (HTTP probes of the usual ports, ``systemctl`` and ``docker`` over SSH)
and hands this package plain text and ``HttpResult``s. Here they are read and rendered, one module a step:

- ``commands``: the command lines that start a server, found in a systemd ``ExecStart``, a ``docker run``
  (with its ``-p HOST:CONTAINER`` mappings and ``--network host``), a ``docker inspect`` or a ``bash -c``
  string; the server's start is recognised and its arguments read by its engine's own reader
  (``engines.vllm.command``: ``vllm serve``'s ``--port``, ``--gpu-memory-utilization``,
  ``--served-model-name``...; ``engines.llamacpp.command``: ``llama-server``'s ``--port``, ``-m``,
  ``--alias``, ``--models-dir``...; ``engines.sglang.command``), with the images whose entrypoint is it;
- ``units``: ``systemctl list-units`` / ``systemctl show`` / ``docker ps`` / ``docker inspect`` output;
- ``launches``: the units and containers among them that start a vLLM, a llama-server or an SGLang, each
  engine's found the same way (a unit that runs a container is one launch, written as the unit);
- ``probes``: the ports probed and what their HTTP answers say is there: an SGLang (its
  ``/server_info``), a vLLM (its ``/version``), a llama-server (its ``/props``), a GPU exporter or
  node_exporter, Ollama, a side service;
- ``plan``: matching what SSH found (units, containers, their host ports) with the servers of the same
  engine that answered, by host port;
- ``names``: names for the config, valid and unique;
- ``render``: the TOML text: every value with a comment saying how it was found, and what was probed
  and not found listed in comments.

Pure: no I/O, no asyncio; it imports only the model and the engines. Everything that comes from a host
is treated as untrusted text: names that go into the config are checked against the spec's patterns,
comments are kept to one line.
"""
