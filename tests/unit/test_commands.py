"""Recovery commands are built from validated names only; hostile names are refused, not escaped."""

from __future__ import annotations

import pytest

from sparktui.model.commands import (
    DROP_CACHES,
    UnsafeName,
    drop_caches_commands,
    kill_workers_command,
    restart_command,
)
from sparktui.model.specs import VllmSpec

HOSTILE = ["x; rm -rf /", "a b", "it's", 'q"uote', "new\nline", "-rf", "$(id)", "`id`", "a|b"]


def test_restart_through_the_service_manager() -> None:
    assert restart_command(VllmSpec(port=8001, unit="vllm-qwen36.service")) == (
        "sudo -n systemctl restart vllm-qwen36.service"
    )
    assert restart_command(VllmSpec(port=8001, container="vllm-gemma4")) == "docker restart vllm-gemma4"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_unit_and_container_names_are_refused(name: str) -> None:
    # The config refuses them too; build a spec around its validation to test this layer alone.
    unit = VllmSpec.model_construct(name="v", unit=name, container=None)
    container = VllmSpec.model_construct(name="v", unit=None, container=name)
    with pytest.raises(UnsafeName):
        restart_command(unit)
    with pytest.raises(UnsafeName):
        restart_command(container)


def test_drop_caches_then_removes_only_known_leftovers() -> None:
    assert drop_caches_commands() == (DROP_CACHES,)
    assert drop_caches_commands(["psm_8f2a1c", "sem.mp-x1y2"]) == (
        DROP_CACHES,
        "sudo -n rm -f -- /dev/shm/psm_8f2a1c /dev/shm/sem.mp-x1y2",
    )
    for name in ["../etc/passwd", "psm_a b", "random-file", "psm_*"]:
        with pytest.raises(UnsafeName):
            drop_caches_commands([name])


def test_kill_workers_takes_integer_pids_only() -> None:
    assert kill_workers_command([4242, 4243]) == "sudo -n kill -9 -- 4242 4243"
    for bad in ([], [1], [0], [-5]):
        with pytest.raises(UnsafeName):
            kill_workers_command(bad)
