#!/bin/sh
# Every CUDA check of the toolbox on a GPU machine: the @pytest.mark.gpu tests, then each
# bench/<method>/gpu.py (GPU result vs CPU result, and `case size cpu_s gpu_s ratio` lines).
#   sh bench/gpu/all.sh [SECONDS_PER_SCRIPT]     (needs CuPy, CUDA torch, Numba; methodkit importable)
# Exit status: the number of failed parts (0: all agree).
limit=${1:-120}
failed=0
files=$(grep -rl "pytest.mark.gpu" tests --include="*.py" | sort)
echo "== pytest -m gpu: $files"
# shellcheck disable=SC2086
timeout "$limit" python3 -P -m pytest -q -p no:cacheprovider -m gpu $files || failed=$((failed + 1))
for script in bench/*/gpu.py; do
  echo "== $script"
  timeout "$limit" python3 -P "$script" || { echo "FAILED: $script"; failed=$((failed + 1)); }
done
echo "== failed parts: $failed"
exit "$failed"
