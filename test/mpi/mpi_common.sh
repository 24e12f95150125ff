# Shared by the MPI tests (sourced after BIN=...): SKIP and exit 0 without mpirun or an MPI-enabled
# stowage-run; a scratch folder $T removed at exit; MPI, the mpirun command line (Open MPI as root
# needs --allow-run-as-root, one core per rank --oversubscribe); fail, which counts failures; and
# killed_rank_check, the killed-rank check.
if ! command -v mpirun > /dev/null; then echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 0; fi
if ! nm -C "$BIN/stowage-run" 2> /dev/null | grep -q CreateMpiTransport; then
  echo "SKIP: stowage-run built without MPI (STOWAGE_ENABLE_MPI)"; exit 0
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
MPI=(timeout 120 mpirun --allow-run-as-root --oversubscribe)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# killed_rank_check MODEL PLAN: one of two ranks killed mid-generation; every rank must end non-zero
# within seconds, mpirun's or the ranks' messages naming the rank.
killed_rank_check() {
  local model=$1 plan=$2 start pid victim rc el
  start=$(date +%s)
  "${MPI[@]}" -np 2 "$BIN/stowage-run" -m "$model" --plan "$plan" -p y -n -1 --ignore-eos -t 1 \
    > /dev/null 2> "$T/kill.err" &
  pid=$!
  sleep 1.5
  victim=$(pgrep -f "stowage-run -m $model --plan $plan -p y -n -1" | tail -1)
  [ -n "$victim" ] && kill -KILL "$victim"
  wait $pid; rc=$?
  el=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ] && [ "$el" -lt 30 ] && grep -q "rank [01]" "$T/kill.err"; then
    echo "ok: a killed rank ends every rank in ${el}s (exit $rc): $(grep -m1 'rank [01]' "$T/kill.err")"
  else fail "killed rank: exit $rc after ${el}s"; cat "$T/kill.err"; fi
}
