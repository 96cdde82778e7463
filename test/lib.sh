# lib.sh: the start every multi-rank shell test shares (sourced): the repo root, the CPU build, one
# OpenMP thread per rank, mpirun as it must be called here, a scratch directory removed on exit, and
# PASS/FAIL/SKIP counting that ends with the "N passed, N failed, N skipped" line run_tests.sh adds
# up. A test that lacks an optional dependency is a SKIP that names it and how to install it.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=./train_gpt_cpu
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS)
W=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0; fail=0; skipped=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -8 | sed 's/^/    /'; fail=$((fail+1)); }
skip() { echo "SKIP $1"; skipped=$((skipped+1)); }
finish() { echo "$pass passed, $fail failed, $skipped skipped"; [ "$fail" -eq 0 ]; }
# have_mpi WHAT: whether WHAT can run under mpirun; if not, a SKIP that says what to install
have_mpi() {
  if ! command -v mpirun >/dev/null; then
    skip "$1: mpirun is not on the PATH (apt-get install libopenmpi-dev openmpi-bin; make then rebuilds ./train_gpt_cpu with MPI)"
    return 1
  fi
  if ! $BIN --help 2>/dev/null | grep -q "MPI: yes"; then
    skip "$1: ./train_gpt_cpu was built without MPI (apt-get install libopenmpi-dev for mpicc; make then rebuilds it)"
    return 1
  fi
}
# have_matplotlib WHAT: the same for the plots
have_matplotlib() {
  $PY -c "import matplotlib" 2>/dev/null && return 0
  skip "$1: $PY has no matplotlib (pip install matplotlib, or apt-get install python3-matplotlib)"
  return 1
}
# compare_eval REF.jsonl REF.out GOT.jsonl GOT.out [TOL]: what a layout logs besides its step lines, against
# one process: every validation loss (same steps, within TOL relative, 1e-5 unless given) and every sample
# on the console (the same text: a layout that breaks the forward, the key/value cache or the sampler's
# random stream draws other tokens). Prints the measured difference; exits 1 on a mismatch.
compare_eval() { $PY - "$@" <<'PYEOF'
import json, sys
def V(p): return {d["step"]: d["val_loss"] for d in map(json.loads, open(p)) if "val_loss" in d}
def S(p): return [l.rstrip("\n") for l in open(p, errors="replace") if l.startswith("sample: ")]
a, b = V(sys.argv[1]), V(sys.argv[3])
sa, sb = S(sys.argv[2]), S(sys.argv[4])
tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
if not a or sorted(a) != sorted(b): print(f"validation steps differ: {sorted(a)} vs {sorted(b)}"); sys.exit(1)
if not sa: print("the reference printed no sample"); sys.exit(1)
err = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
msg = f"{len(a)} validation losses within {err:.1e} (< {tol:g}), {len(sb)} of {len(sa)} samples"
same = sa == sb
if not same: msg += f" differ (first: {next((x, y) for x, y in zip(sa + [''] * 9, sb + [''] * 9) if x != y)})"
else: msg += " identical"
print(msg)
sys.exit(0 if err < tol and same else 1)
PYEOF
}
