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
  wait_listening
}

# start_tls_collector OUT_FILE: a Collector as a hosted backend is set up, on $http and $grpc:
# TLS only (a CA and a server certificate for localhost and 127.0.0.1, made here with openssl
# under $out/pki), and every request must carry `authorization: Bearer $token`. Sets $ca
# (the CA's PEM file), $token and $collector.
start_tls_collector() {
  local pki=$out/pki
  mkdir -p "$pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=switchyard test CA" -keyout "$pki/ca.key" -out "$pki/ca.pem" 2>>"$out/otelcol.log"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$pki/server.key" -out "$pki/server.csr" 2>>"$out/otelcol.log"
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$pki/server.ext"
  openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/server.ext" -out "$pki/server.pem" 2>>"$out/otelcol.log"
  token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  printf '%s' "$token" >"$pki/token"
  ca=$pki/ca.pem
  OTELCOL_HTTP_ENDPOINT=127.0.0.1:$http OTELCOL_GRPC_ENDPOINT=127.0.0.1:$grpc OTELCOL_OUT=$1 \
    OTELCOL_CERT=$pki/server.pem OTELCOL_KEY=$pki/server.key OTELCOL_TOKEN_FILE=$pki/token \
    "$otelcol" --config crates/export/otelcol/config-tls.yaml --feature-gates=+service.profilesSupport \
    >/dev/null 2>>"$out/otelcol.log" &
  collector=$!
  pids+=("$collector")
  wait_listening
}

# wait_listening: until $http and $grpc take connections (30 s at most).
wait_listening() {
  for _ in $(seq 300); do
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
