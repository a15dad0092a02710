#!/usr/bin/env bash
# Run the test suite with every core kept busy, to show the tests wait on conditions, not on luck.
#
#   scripts/test_under_load.sh                 # the README's test command: the whole default run
#   scripts/test_under_load.sh tests/unit      # arguments go to pytest (a subset, -k, -m ...)
#
# One CPU burner per core (nproc) runs at normal priority beside pytest and is killed on exit,
# however the script ends. Exits with pytest's code. PYTHON overrides the interpreter (default: the
# repo's .venv).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
cores="$(nproc)"
burners=()

stop_burners() {
    if ((${#burners[@]})); then
        kill "${burners[@]}" 2>/dev/null || true
        wait "${burners[@]}" 2>/dev/null || true
    fi
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$cores"); do
    "$python" -c 'while True: pass' &
    burners+=("$!")
done
echo "test_under_load: $cores CPU burner(s) running (pids ${burners[*]})" >&2

cd "$repo"
status=0
"$python" -m pytest -q -p no:cacheprovider "$@" || status=$?
exit "$status"
