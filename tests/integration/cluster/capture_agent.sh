#!/usr/bin/env bash
# The in-process capture agent on the real SLURM cluster. TaskProlog (`hook taskprolog
# --inject-agent`) exports each worker's own agent, <prefix>/lib/cupti-nodes/<host>/lib/
# libexpanse-agent.so, to a real Python job; the job loads libcuda.so.1 (the fake driver, which
# injects CUDA_INJECTION64_PATH at cuInit as the real one does) and the agent reads the fake
# libcupti's Activity API (tests/fakes/cupti, a training loop per the node's scenario). Proves:
#   - the agent's window aggregates reach the server from both workers, through each sampler's
#     capture intake and the controller's batches: GET …/jobs/<job>/capture names the kernels;
#   - a job GPU going idle (fake NVML 91 % -> 0 %) makes the sampler write a Phase B trigger and
#     the agents on that node record a trace segment, which the intake accepts, while the
#     controller is down (kill -9). w1 (EXPANSE_SEGMENT_UPLOAD_MODE=relay) relays it into the
#     shared spool, where the restarted controller uploads it; w2 (direct) asks for a grant
#     through the shared spool, which the restarted controller obtains, and sends its segment
#     to the data plane itself (the bytes never cross the shared mount). Each is listed once,
#     downloaded byte for byte, and kept once when sent again; a corrupt and an oversized
#     relayed segment are quarantined; w1's window carries PC samples of the job's GEMM (the
#     fake CUPTI's), w2's says CUPTI refused PC sampling, and the server's list briefs both;
#   - the disable marker on one worker stops injection for tasks started afterwards there only;
#   - a job whose agent finds no usable libcupti runs to completion with the same output.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
# The data plane on the controller's cluster address, where w2's sampler sends its segments.
SERVER_DP_HOST="$EXPANSE_TC_SUBNET.1"
agent="$(ls "$BUILD"/cupti/*/lib/libexpanse-agent.so | head -1)"
[[ -f "$agent" ]] || fail "no libexpanse-agent.so in $BUILD/cupti (is a CUDA toolkit installed?)"
dc_setup

# Each worker's own CUPTI build, as its sampler bootstrap leaves it, holding the agent.
for w in $EXPANSE_TC_WORKERS; do
  mkdir -p "$prefix/lib/cupti-nodes/$w/lib"
  cp "$agent" "$prefix/lib/cupti-nodes/$w/lib/libexpanse-agent.so"
done
cat >"$DIR/taskprolog" <<HOOK
#!/bin/bash
"$prefix/bin/expanse-daemon" hook taskprolog --shared-prefix $prefix --inject-agent || true
exit 0
HOOK
chmod 755 "$DIR/taskprolog"
printf 'TaskProlog=%s\n' "$DIR/taskprolog" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure

uuid() { printf 'GPU-0000000%d-0000-4000-8000-0000000000%02x' "$1" "$2"; }
n=0
for w in $EXPANSE_TC_WORKERS; do
  n=$((n + 1))
  read -r lo hi < <(dc_minors "$w")
  dc_gpu_scenario "$w" "[
    {\"uuid\": \"$(uuid $n "$hi")\", \"minor\": $hi, \"sm_util\": 91},
    {\"uuid\": \"$(uuid $n "$lo")\", \"minor\": $lo, \"sm_util\": 91}]"
  # The GPU's work as CUPTI reports it: a GEMM, a copy in, a synchronisation, an NVTX step;
  # and where PC sampling finds the GEMM's warps, on the first worker. The second refuses the
  # job's process PC sampling, as a node that restricts profiling to administrators does.
  pc_enable_error=0
  ((n == 2)) && pc_enable_error=35
  "$TESTCLUSTER" exec "$w" -- bash -c "cat >/etc/expanse/fake-cupti.json" <<JSON
{"devices": [{"uuid": "$(uuid $n "$lo")"}],
 "activity": {"loop_ms": 100, "loop": [
   {"kind": "kernel", "name": "ampere_bf16_gemm_$w", "duration_us": 4000, "grid": [132, 1, 1], "block": [256, 1, 1]},
   {"kind": "memcpy", "copy": "htod", "bytes": 1048576, "duration_us": 200},
   {"kind": "sync", "type": "device", "duration_us": 5000},
   {"kind": "nvtx_range", "name": "train_step", "duration_us": 9500}]},
 "pc_sampling": {"enable_error": $pc_enable_error,
   "stall_reasons": {"2": "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                     "9": "smsp__pcsamp_warps_issue_stalled_selected"},
   "pcs": [{"function": "ampere_bf16_gemm_$w", "pc_offset": 512, "cubin_crc": 41,
            "stalls": {"2": 700, "9": 100}}]}}
JSON
done
# Each worker's transport for trace segments, in its node-local daemon.env as an operator writes
# it (put back afterwards): w1 relays through the controller, w2 sends its own with grants.
KEEP="$(mktemp -d)"
for w in $EXPANSE_TC_WORKERS; do save_host_etc_files "$KEEP" "$w"; done
"$TESTCLUSTER" exec "$w1" -- bash -c 'cat >/etc/expanse/daemon.env' <<<"EXPANSE_SEGMENT_UPLOAD_MODE=relay"
"$TESTCLUSTER" exec "$w2" -- bash -c 'cat >/etc/expanse/daemon.env' <<ENV
EXPANSE_SEGMENT_UPLOAD_MODE=direct
SSL_CERT_FILE=$CA_FILE
ENV
cleanup_capture() {
  for w in $EXPANSE_TC_WORKERS; do
    restore_host_etc_files "$KEEP" "$w" || true
    "$TESTCLUSTER" exec "$w" -- bash -c 'rm -rf /etc/expanse/fake-cupti.json /var/lib/expanse/control/disabled \
      /var/lib/expanse/control/capture-ready /var/lib/expanse/control/capture-quarantine \
      /var/lib/expanse/control/segment-quarantine \
      /var/lib/expanse/control/phase-b/* /var/lib/expanse/control/capture/*' || true
  done
  rm -rf "$KEEP"
  dc_cleanup
}
trap cleanup_capture EXIT
dc_controller_start

# The job: real Python, as a CUDA framework starts (dlopen libcuda, cuInit), then "trains".
cat >"$DIR/train.py" <<'PY'
import ctypes, hashlib, os, sys, time
seconds = float(sys.argv[1])
stop = sys.argv[2] if len(sys.argv) > 2 else None  # ends early once this file exists
cuda = ctypes.CDLL("libcuda.so.1")
rc = cuda.cuInit(0)
digest = hashlib.sha256()
end = time.time() + seconds
while time.time() < end and not (stop and os.path.exists(stop)):
    digest.update(b"step")
    time.sleep(0.05)
print(f"rank {os.environ.get('SLURM_PROCID')} cuInit={rc} injected={'yes' if os.environ.get('CUDA_INJECTION64_PATH') else 'no'}", flush=True)
PY
job_env="LD_LIBRARY_PATH=$BUILD/fakes/cupti"
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o "$DIR/train-%j.out" \
  --wrap "srun -N 2 --ntasks-per-node=1 env $job_env python3 $DIR/train.py 200 $DIR/train.stop")"

# Aggregates from both workers reach the server's capture summary of the job.
capture() { api GET "/api/v1/computes/$COMPUTE/jobs/$job/capture"; }
both_hosts() { capture | jq_holds '[.processes[].host] | unique | length == 2'; }
if ! (wait_until 90 "capture windows of job $job from both workers" both_hosts); then
  fail "capture of job $job: $(capture | head -c 600); samplers' health: $(for w in $EXPANSE_TC_WORKERS; do cat "$prefix/spool/$w/"*health* 2>/dev/null | jq -c .capture; done)"
fi
summary="$(capture)"
for w in "$w1" "$w2"; do
  assert_match "ampere_bf16_gemm_$w" "$(jq -r '[.kernels.top[].name] | join(",")' <<<"$summary")" \
    "the kernel of $w's job process among the job's top kernels"
done
assert_eq 0 "$(jq '.kernels.top | map(select(.gpu_ns != .count * 4000000)) | length' <<<"$summary")" \
  "every top kernel's GPU time is 4 ms per launch"
assert_eq "$(jq '.kernels.count' <<<"$summary")" "$(jq '.memcpy.htod.count' <<<"$summary")" \
  "one host-to-device copy per GEMM"
assert_eq "$(jq '.memcpy.htod.count * 1048576' <<<"$summary")" "$(jq '.memcpy.htod.bytes' <<<"$summary")" \
  "copied bytes"
assert_eq "$(jq '.kernels.count' <<<"$summary")" "$(jq '.nvtx.ranges[] | select(.name == "train_step") | .count' <<<"$summary")" \
  "one NVTX train_step per GEMM"
pass "job $job: the agents' kernels, copies, syncs and NVTX ranges reach the server from both workers"

# Both workers' job GPUs go idle while the controller is down (kill -9): each sampler escalates
# its GPU and asks the job's agents there for a trace window, and its intake accepts the
# segment. w1 relays its segment into the shared spool, where it waits; w2 asks for a grant
# (request-<sha256>-<bytes> in the shared spool's segment-grants/) and waits for an answer.
dc_controller_kill9
n=0
for w in "$w1" "$w2"; do
  n=$((n + 1))
  read -r lo hi < <(dc_minors "$w")
  dc_gpu_scenario "$w" "[
    {\"uuid\": \"$(uuid $n "$hi")\", \"minor\": $hi, \"sm_util\": 91},
    {\"uuid\": \"$(uuid $n "$lo")\", \"minor\": $lo, \"sm_util\": 0}]"
done
read -r lo hi < <(dc_minors "$w1")
relay="$prefix/spool/segments"
grants="$prefix/spool/segment-grants"
relayed() { ls "$relay/$w1/seg-$job-"* 2>/dev/null | head -1; }
segment_relayed() { [[ -n "$(relayed)" ]]; }
if ! (wait_until 60 "a Phase B segment of job $job relayed from $w1" segment_relayed); then
  fail "no segment from $w1: trigger $("$TESTCLUSTER" exec "$w1" -- cat "/var/lib/expanse/control/phase-b/$job" 2>&1); spool $("$TESTCLUSTER" exec "$w1" -- ls -la /var/lib/expanse/control/capture /var/lib/expanse/control/capture-ready 2>&1 | tr '\n' ';')"
fi
trigger="$("$TESTCLUSTER" exec "$w1" -- cat "/var/lib/expanse/control/phase-b/$job")"
assert_eq gpu_idle "$(jq -r .reason <<<"$trigger")" "the trigger's reason"
assert_eq "$(uuid 1 "$lo")" "$(jq -r '.gpus[0]' <<<"$trigger")" "the trigger's GPU (the job's, gone idle)"
seg="$(relayed)"
cp "$seg" "$DIR/segment.json"
doc="$(cat "$DIR/segment.json")"
assert_eq "$(jq -r .id <<<"$trigger")" "$(jq -r .otherData.trigger.id <<<"$doc")" "the segment's trigger"
assert_match "ampere_bf16_gemm_$w1" "$(jq -r '[.traceEvents[] | select(.cat == "kernel") | .name] | unique | join(",")' <<<"$doc")" \
  "kernels in the segment"
assert_eq true "$(jq '[.traceEvents[] | select(.ph == "X")] | length > 10' <<<"$doc")" "events in the segment"
# PC sampling in the window, by the agent in the job's (unprivileged) process.
assert_eq sampled "$(jq -r .otherData.pc_sampling.state <<<"$doc")" "PC sampling in $w1's window"
assert_eq "ampere_bf16_gemm_$w1 700" \
  "$(jq -r '.otherData.pc_sampling.functions[0] | "\(.name) \(.stall_reasons.smsp__pcsamp_warps_issue_stalled_long_scoreboard)"' <<<"$doc")" \
  "the GEMM's warps on the long scoreboard"
pass "job $job: $w1's GPU idle -> Phase B trigger -> a trace segment with PC samples, relayed into the shared spool"

ready="/var/lib/expanse/control/capture-ready"
asked() { ls "$grants/$w2/" 2>/dev/null | grep -q '^request-'; }
if ! (wait_until 60 "$w2's grant request for its Phase B segment" asked); then
  fail "no grant request from $w2: grants $(ls -la "$grants/$w2" 2>&1 | tr '\n' ';'); ready $("$TESTCLUSTER" exec "$w2" -- ls -la "$ready" 2>&1 | tr '\n' ';')"
fi
request="$(ls "$grants/$w2" | grep '^request-' | head -1)"
direct_sha="$(grep -oP '^request-\K[0-9a-f]{64}' <<<"$request")"
direct_file="$("$TESTCLUSTER" exec "$w2" -- bash -c "cd $ready && sha256sum seg-*" | awk -v s="$direct_sha" '$1 == s { print $2 }')"
[[ -n "$direct_file" ]] || fail "$request names no segment in $w2's $ready"
"$TESTCLUSTER" exec "$w2" -- cat "$ready/$direct_file" >"$DIR/direct.json"
assert_eq "request-$direct_sha-$(stat -c %s "$DIR/direct.json")" "$request" "$w2's request names its ready segment's SHA-256 and length"
assert_match "ampere_bf16_gemm_$w2" "$(jq -r '[.traceEvents[] | select(.cat == "kernel") | .name] | unique | join(",")' "$DIR/direct.json")" \
  "kernels in $w2's segment"
assert_eq "" "$(ls "$relay/$w2" 2>/dev/null)" "$w2's entries in the relay spool"
pass "job $job: $w2's Phase B segment waits on $w2 for a grant, nothing of it on the shared mount"

# Hostile entries beside the relayed one, as a broken or malicious worker could leave them: a
# corrupt segment and one past 64 MiB. The controller comes back: it uploads w1's segment and
# obtains w2's grant, and w2 sends its segment itself.
mkdir -p "$relay/$w2"
printf '{"traceEvents": [' >"$relay/$w2/seg-$job-$w2-1-1.json"
truncate -s 65M "$relay/$w2/seg-$job-$w2-2-1.json"
dc_controller_start
sha="$(sha256sum "$DIR/segment.json" | cut -d' ' -f1)"
segments() { api GET "/api/v1/computes/$COMPUTE/jobs/$job/segments"; }
stored() { segments | jq "[.segments[] | select(.sha256 == \"$1\")] | length"; }
uploaded() { [[ "$(stored "$1")" == 1 ]]; }
for s in "$sha" "$direct_sha"; do
  if ! (wait_until 60 "job $job's segment $s at the server" uploaded "$s"); then
    fail "segments of job $job: $(segments); relay: $(ls -la "$relay"/* 2>&1 | tr '\n' ';'); grants: $(ls -la "$grants"/* 2>&1 | tr '\n' ';'); controller: $(tail -5 "$DIR/controller.log")"
  fi
done
for pair in "$sha:$w1:segment.json" "$direct_sha:$w2:direct.json"; do
  IFS=: read -r s host file <<<"$pair"
  listed="$(segments | jq -c ".segments[] | select(.sha256 == \"$s\")")"
  assert_eq "$host" "$(jq -r .host <<<"$listed")" "the listed segment's host"
  assert_eq gpu_idle "$(jq -r .trigger_reason <<<"$listed")" "the listed segment's trigger reason"
  # What the job page shows of the window's PC sampling: w1 sampled, w2 refused by CUPTI.
  if [[ "$host" == "$w1" ]]; then
    assert_eq "sampled long_scoreboard ampere_bf16_gemm_$w1" \
      "$(jq -r '.pc_sampling | "\(.state) \(.stall_reasons[0][0] | sub("smsp__pcsamp_warps_issue_stalled_"; "")) \(.functions[0].name)"' <<<"$listed")" \
      "the listed PC sampling brief of $w1's segment"
  else
    assert_eq "restricted cuptiPCSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" \
      "$(jq -r '.pc_sampling | "\(.state) \(.reason)"' <<<"$listed")" "the listed PC sampling of $w2's segment"
  fi
  api GET "$(jq -r .download <<<"$listed")" >"$DIR/$file.download"
  cmp -s "$DIR/$file" "$DIR/$file.download" || fail "the downloaded segment of $host differs from the one it sent"
  pass "$host's segment downloaded byte for byte"
done
gone() { [[ ! -e "$seg" ]]; }
wait_until 30 "the uploaded segment to leave the shared spool" gone
direct_done() {
  ! "$TESTCLUSTER" exec "$w2" -- test -e "$ready/$direct_file" && [[ -z "$(ls "$grants/$w2")" ]]
}
wait_until 30 "$w2's sent segment, its request and its grant to go" direct_done
issued="$(api GET "/api/v1/computes/$COMPUTE" | jq '.heartbeat.diagnostics.segments.grants.issued')"
((issued >= 1)) || fail "the controller's heartbeat counts $issued segment grants"
pass "$w2's segment sent with the grant the restarted controller obtained ($issued issued); nothing left behind"
# Copies put back, as a controller or sampler killed between the upload and the removal leaves
# them: each sent again, kept once.
cp "$DIR/segment.json" "$seg"
"$TESTCLUSTER" exec "$w2" -- bash -c "cat >$ready/.again && mv $ready/.again $ready/$direct_file" <"$DIR/direct.json"
wait_until 30 "the segment sent again to leave the shared spool" gone
wait_until 60 "$w2's segment sent again, with a new grant" direct_done
for s in "$sha" "$direct_sha"; do
  assert_eq 1 "$(stored "$s")" "job $job's segment $s at the server after it was sent twice"
done
quarantined() { (($(ls "$relay/.quarantine" 2>/dev/null | grep -c "$w2-seg-$job-$w2-") == 2)); }
if ! (wait_until 30 "the corrupt and the oversized segment quarantined" quarantined); then
  fail "quarantine: $(ls "$relay/.quarantine" 2>&1); left: $(ls "$relay/$w2" 2>&1)"
fi
assert_match 'bad_segment' "$(ls "$relay/.quarantine")" "the corrupt segment's reason"
assert_match 'too_large' "$(ls "$relay/.quarantine")" "the oversized segment's reason"
# ... and counted, by reason, in the controller's heartbeat.
refusals_counted() {
  api GET "/api/v1/computes/$COMPUTE" |
    jq_holds '.heartbeat.diagnostics.segments.refused | .bad_segment >= 1 and .too_large >= 1' >/dev/null
}
if ! (wait_until 60 "the controller's heartbeat to count the refused segments" refusals_counted); then
  fail "refused segments in the heartbeat: $(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.diagnostics.segments')"
fi
pass "job $job's segments: relayed ($w1) and direct ($w2) each delivered once across a controller kill -9 and a resend; hostile entries quarantined"
touch "$DIR/train.stop"
wait_job_done "$job" 120
assert_eq COMPLETED "$(job_state "$job")" "job $job with the agent injected"
assert_eq 2 "$(grep -c 'cuInit=0 injected=yes' "$DIR/train-$job.out")" "both ranks ran with the agent"

# The disable marker on w2: a task started there afterwards gets no agent; w1's still does.
"$TESTCLUSTER" exec "$w2" -- touch /var/lib/expanse/control/disabled
job2="$(submit -N 2 -w "$w1,$w2" -o "$DIR/train-%j.out" \
  --wrap "srun -N 2 --ntasks-per-node=1 -l env $job_env python3 $DIR/train.py 2")"
wait_job_done "$job2" 90
assert_eq COMPLETED "$(job_state "$job2")" "job $job2"
assert_match '^0: rank 0 cuInit=0 injected=yes$' "$(grep '^0:' "$DIR/train-$job2.out")" "rank 0 on $w1 injected"
assert_match '^1: rank 1 cuInit=0 injected=no$' "$(grep '^1:' "$DIR/train-$job2.out")" "rank 1 on $w2, disabled, not injected"
"$TESTCLUSTER" exec "$w2" -- rm -f /var/lib/expanse/control/disabled
pass "the disable marker stops injection on $w2 only, for tasks started after it"

# An agent without a usable libcupti (only the fake libcuda on the library path, and an
# override that is not a library): the job runs to completion with the output it has without
# the agent.
mkdir -p "$DIR/only-cuda"
ln -sf "$BUILD/fakes/cupti/libcuda.so.1" "$DIR/only-cuda/libcuda.so.1"
echo "not a library" >"$DIR/only-cuda/not-cupti.so"
job3="$(submit -N 1 -w "$w1" -o "$DIR/train-%j.out" \
  --wrap "srun env LD_LIBRARY_PATH=$DIR/only-cuda EXPANSE_AGENT_CUPTI=$DIR/only-cuda/not-cupti.so python3 $DIR/train.py 2")"
wait_job_done "$job3" 90
assert_eq COMPLETED "$(job_state "$job3")" "job $job3 whose agent cannot capture"
assert_eq "rank 0 cuInit=0 injected=yes" "$(cat "$DIR/train-$job3.out")" "job $job3's output"
log="$("$TESTCLUSTER" exec "$w1" -- bash -c "cat /var/lib/expanse/control/capture/agent-$job3-*.log 2>/dev/null")"
assert_match 'capture off: no usable libcupti|not captured: cuptiActivityEnable' "$log" "the agent's note of why it captured nothing"
dc_assert_no_drain
pass "capture agent on the cluster: aggregates, Phase B, the disable marker, a job unaltered without libcupti"
