# Sourced by the export soak and the fleet simulation: a test Collector on 127.0.0.1 and the
# servers they record. Needs $out (where logs go) set by the caller.

# Every process started is added to $pids, and killed on exit.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

otelcol=$(bash scripts/otelcol.sh)
http=$(free_port)
grpc=$(free_port)

# start_collector OUT_FILE: a Collector writing what it receives to OUT_FILE, on $http and
# $grpc; sets $collector to its pid once both ports listen.
start_collector() {
  OTELCOL_HTTP_ENDPOINT=127.0.0.1:$http OTELCOL_GRPC_ENDPOINT=127.0.0.1:$grpc OTELCOL_OUT=$1 \
    "$otelcol" --config crates/export/otelcol/config.yaml --feature-gates=+service.profilesSupport \
    >/dev/null 2>>"$out/otelcol.log" &
  collector=$!
  pids+=("$collector")
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$grpc") 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  printf 'error: the Collector did not start; hint: see %s/otelcol.log\n' "$out" >&2
  exit 2
}

# ready_port FILE: the port of a server's `ready <port>` line in FILE, waited for up to 30 s.
ready_port() {
  local port=
  for _ in $(seq 300); do
    port=$(sed -n 's/^ready \([0-9]*\)$/\1/p' "$1" | head -n1)
    [ -n "$port" ] && { printf '%s\n' "$port"; return 0; }
    sleep 0.1
  done
  return 1
}
