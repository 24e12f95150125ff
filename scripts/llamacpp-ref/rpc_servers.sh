# Sourced by the reference scripts (make-placement-2026.sh, make-sm-tensor.sh): makes $TMP (removed
# at exit) and starts one llama.cpp rpc-server on 127.0.0.1 per port given, stopped at exit; their
# logs are $TMP/rpc-<port>.log.
# Usage: source scripts/llamacpp-ref/rpc_servers.sh; start_rpc_servers RPC_SERVER_BINARY PORT...
TMP=$(mktemp -d)
RPC_PIDS=()
rpc_servers_cleanup() {
  for p in "${RPC_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap rpc_servers_cleanup EXIT
start_rpc_servers() {
  local bin=$1
  shift
  for port in "$@"; do
    "$bin" -H 127.0.0.1 -p "$port" -t 1 >"$TMP/rpc-$port.log" 2>&1 &
    RPC_PIDS+=($!)
  done
  sleep 2
}
