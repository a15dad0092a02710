"""Shell completion in a real bash: the code ``sparktui completion bash`` prints is loaded and bash's
completion function is called the way bash calls it on Tab, for commands, node names (from the config),
actions and a node's vLLM instances."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[[nodes]]
name = "spark1"
host = "127.0.0.1"
[[nodes.vllm]]
name = "qwen36"
port = 8000
[[nodes]]
name = "spark2"
host = "127.0.0.1"
[[nodes.vllm]]
name = "gemma4"
port = 8001
"""
# Sets COMP_* as bash does for the line typed so far, calls the registered function, prints COMPREPLY.
COMPLETE = r"""
eval "$(sparktui completion bash)"
complete_line() {
    COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
    read -ra COMP_WORDS <<< "$1"; [[ "$1" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    "$(complete -p sparktui | sed -E 's/.* -F ([^ ]+) .*/\1/')" sparktui
    printf '%s\n' "${COMPREPLY[@]}"
}
complete_line "$LINE"
"""


def _complete(line: str, tmp_path: Path) -> list[str]:
    config = tmp_path / "fleet.toml"
    config.write_text(CONFIG)
    scripts = str(Path(sys.executable).parent)
    if not (Path(scripts) / "sparktui").exists():
        pytest.skip("no sparktui script beside the interpreter (install the package)")
    env = {
        **os.environ,
        "PATH": f"{scripts}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "SPARKTUI_CONFIG": str(config),
        "LINE": line,
    }
    done = subprocess.run(["bash", "-c", COMPLETE], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("sparktui act", ["action"]),
        ("sparktui action sp", ["spark1", "spark2"]),
        ("sparktui action spark2 re", ["restart"]),
        ("sparktui action spark2 restart --instance ", ["gemma4"]),
        ("sparktui completion ", ["-h", "--help", "bash", "zsh", "fish"]),
        ("sparktui bench sp", ["spark1", "spark2"]),
        ("sparktui bench spark2/", ["spark2/gemma4"]),
    ],
)
def test_bash_completes_commands_node_names_actions_and_instances(
    line: str, expected: list[str], tmp_path: Path
) -> None:
    assert _complete(line, tmp_path) == expected


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_the_other_shells_get_their_code(shell: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparktui", "completion", shell],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "sparktui" in done.stdout and "_ARGCOMPLETE" in done.stdout
