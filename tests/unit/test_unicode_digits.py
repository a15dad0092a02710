"""Text from a host with digits that are digits to ``str.isdigit()`` but not to ``int()`` ("²", "٣"):
every reader of host text takes them as what they are, not a number, and never raises on them."""

from __future__ import annotations

import pytest

from sparktui.discovery.commands import analyse_command
from sparktui.discovery.listeners import parse_ss_listeners
from sparktui.engines.llamacpp.command import parse_server_args as llama_args
from sparktui.engines.sglang.command import parse_server_args as sglang_args
from sparktui.engines.vllm.command import parse_server_args as vllm_args
from sparktui.model.memory import parse_meminfo
from sparktui.model.numbers import is_digits

NOT_ASCII = ("²", "٣", "1²", "８０")


@pytest.mark.parametrize("text", NOT_ASCII)
def test_digits_are_ascii_digits_only(text: str) -> None:
    assert text.isdigit() and not is_digits(text)
    assert is_digits("8080")


@pytest.mark.parametrize("text", NOT_ASCII)
def test_the_engines_command_lines_read_such_a_port_as_no_port(text: str) -> None:
    assert llama_args(["--port", text]).port is None
    assert sglang_args(["--port", text]).port is None
    assert vllm_args(["M", "--port", text, "--nnodes", text]).port is None


@pytest.mark.parametrize("text", NOT_ASCII)
def test_a_docker_port_mapping_or_command_with_such_digits_is_read_without_raising(text: str) -> None:
    found = analyse_command(["docker", "run", "-p", f"{text}:8000", "vllm/vllm-openai", "--model", "M"])
    assert found is not None
    analyse_command(["vllm", "serve", "M", "--nnodes", text, "--port", text])


@pytest.mark.parametrize("text", NOT_ASCII)
def test_a_listener_on_such_a_port_is_no_listener(text: str) -> None:
    line = f"LISTEN 0 4096 0.0.0.0:{text} 0.0.0.0:*"
    assert parse_ss_listeners(f"State Recv-Q Send-Q Local Peer\n{line}\n") == ()


@pytest.mark.parametrize("text", NOT_ASCII)
def test_meminfo_with_such_a_value_is_refused_in_its_own_words(text: str) -> None:
    with pytest.raises(ValueError, match="is not 'Key: value \\[kB\\]'"):
        parse_meminfo(f"MemTotal: {text} kB\n")
