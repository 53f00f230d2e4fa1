# Shell helpers for tests that need a real expanse-server and a registered compute.
# Source after setting SERVER (path to expanse-server) and DIR (a scratch directory).
#
#   server_start            starts `expanse-server serve` over TLS (self-signed CA in $DIR/tls),
#                           with $SERVER_EXTRA_ARGS (word-split) added to its flags; the data
#                           plane on $SERVER_DP_HOST (default 127.0.0.1; e.g. the test cluster's
#                           controller address, which its workers reach, named in the certificate);
#                           sets SERVER_PID, CP_URL, DP_URL, CA_FILE, API_TOKEN
#   server_register NAME    creates a compute, exchanges an install token; sets COMPUTE and
#                           CREDENTIAL and writes a daemon config to $DIR/config.json (0600)
#   api GET|POST PATH [BODY]  the console API with the bootstrap API token

server_start() {
  if [[ ! -f "$DIR/db.sqlite" ]]; then
    EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin bootstrap --db "$DIR/db.sqlite" --org acme \
      --org-name "Acme" --email ops@acme.example >"$DIR/boot.json"
  fi
  API_TOKEN="$(jq -r .api_token "$DIR/boot.json")"
  local log="$DIR/serve.log"
  : >"$log"
  local dp_host="${SERVER_DP_HOST:-127.0.0.1}" tls_host=()
  [[ "$dp_host" == 127.0.0.1 ]] || tls_host=(--tls-host "$dp_host")
  "$SERVER" serve --db "$DIR/db.sqlite" --control-listen "127.0.0.1:${SERVER_CP_PORT:-0}" \
    --data-listen "$dp_host:${SERVER_DP_PORT:-0}" --tls-self-signed "$DIR/tls" "${tls_host[@]}" \
    --credential-rate 1000 ${SERVER_EXTRA_ARGS:-} >>"$log" 2>&1 &
  SERVER_PID=$!
  local i
  for i in $(seq 1 100); do grep -q 'console API' "$log" && break; sleep 0.1; done
  CP_URL="$(grep -oP 'control plane \K\S+' "$log" | tail -1)"
  DP_URL="$(grep -oP 'data plane +\K\S+' "$log" | tail -1)"
  CA_FILE="$DIR/tls/ca.pem"
  [[ -n "$CP_URL" && -n "$DP_URL" ]] || { echo "expanse-server did not start: $(cat "$log")" >&2; return 1; }
  # Later restarts reuse the same ports, so a daemon's saved URLs stay valid.
  SERVER_CP_PORT="${CP_URL##*:}"
  SERVER_DP_PORT="${DP_URL##*:}"
}

server_stop() {
  [[ -n "${SERVER_PID:-}" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}

api() {
  local method="$1" path="$2" body="${3:-}"
  local args=(curl -sS --max-time 20 --cacert "$CA_FILE" -H "Authorization: Bearer $API_TOKEN")
  if [[ "$method" == POST ]]; then
    args+=(-X POST -H 'Content-Type: application/json' --data "${body:-{\}}")
  fi
  "${args[@]}" "$CP_URL$path"
}

server_register() {
  local name="$1" prefix="${2:-}"
  COMPUTE="$(api POST /api/v1/orgs/acme/computes "{\"name\":\"$name\",\"type\":\"slurm\"}" | jq -r .id)"
  local token
  token="$(api POST "/api/v1/computes/$COMPUTE/install-tokens" | jq -r .token)"
  local exchanged
  exchanged="$(curl -sS --max-time 20 --cacert "$CA_FILE" \
    -d "{\"token\":\"$token\",\"hostname\":\"$(hostname -s)\",\"daemon_version\":\"test\",\"role\":\"controller\"}" \
    "$CP_URL/cp/v1/install-tokens/exchange")"
  CREDENTIAL="$(jq -r .credential <<<"$exchanged")"
  [[ "$CREDENTIAL" == exp_cc_* ]] || { echo "exchange failed: $exchanged" >&2; return 1; }
  jq -n --arg c "$COMPUTE" --arg k "$CREDENTIAL" --arg cp "$CP_URL" --arg dp "$DP_URL" \
    --arg p "$prefix" '{version:1, compute_id:$c, organization:"acme", credential:$k,
      control_plane_url:$cp, data_plane_url:$dp, shared_prefix:$p, daemon_user:"root"}' \
    >"$DIR/config.json"
  chmod 600 "$DIR/config.json"
}
