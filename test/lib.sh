# lib.sh: the start every multi-rank shell test shares (sourced): the repo root, the CPU build, one
# OpenMP thread per rank, mpirun as it must be called here, a scratch directory removed on exit, and
# PASS/FAIL counting that ends with the "N passed, N failed" line run_tests.sh adds up.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=./train_gpt_cpu
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS)
W=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -8 | sed 's/^/    /'; fail=$((fail+1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
