#!/usr/bin/env bash
# Where expanse-cupti-helper's memory goes, on a machine without a GPU: the helper alone, then
# with NVIDIA's profiler host library initialised (`plan`, which makes the same host objects
# and configurations the sampler makes when it resolves its counter sets), then with the
# target library loaded too, as libcupti loads it on a GPU node when PM sampling starts.
# Prints peak RSS for each and what each library adds; issue 18's budget is 64 MiB. Then the
# CPU the sampler spends resolving its two counter sets for one more GPU (`plan` of one chip
# against nine times the same chip, each a fresh PmDevice as each GPU of a node gets): the
# start-up cost a node pays once per GPU, which decides whether resolutions need sharing.
#
# Usage: bench/cupti_helper_memory.sh BUILD_DIR [CUPTI_LIB_DIR]
#   BUILD_DIR: a build with the helper (ninja -C BUILD_DIR expanse-cupti-helper-cuda1300);
#   CUPTI_LIB_DIR: where libcupti.so.13 and libnvperf_*.so are (default: the CUDA toolkit's).
set -euo pipefail
build=${1:?usage: bench/cupti_helper_memory.sh BUILD_DIR [CUPTI_LIB_DIR]}
lib=${2:-/usr/local/cuda/lib64}
[[ -e "$lib/libcupti.so.13" ]] || lib=/usr/local/cuda/lib
helper=$(ls "$build"/cupti/cuda*/bin/expanse-cupti-helper | head -1)
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }

peak() {  # peak RSS in KiB of the command
  /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1
}
cpu_ms() {  # user + system CPU in ms of the command, the least of three runs
  local best="" run
  for _ in 1 2 3; do
    run=$(/usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -1 |
      awk '{ printf "%d", ($1 + $2) * 1000 }')
    [[ -z "$best" || "$run" -lt "$best" ]] && best=$run
  done
  echo "$best"
}

alone=$(peak "$helper" --version)
host=$(peak "$helper" --libcupti "$lib/libcupti.so.13" plan --chip GH100)
host_many=$(peak "$helper" --libcupti "$lib/libcupti.so.13" plan --chip GH100 --chip GA100 \
  --chip AD102 --chip GB100)
both=$(peak env LD_PRELOAD="$lib/libnvperf_target.so" "$helper" --libcupti \
  "$lib/libcupti.so.13" plan --chip GH100)
echo "libraries: $lib ($(basename "$(readlink -f "$lib/libcupti.so.13")"))"
printf '%-66s %8s MiB\n' "helper alone (--version)" "$((alone / 1024))"
printf '%-66s %8s MiB\n' "+ libcupti, libnvperf_host initialised (plan, one chip)" "$((host / 1024))"
printf '%-66s %8s MiB\n' "  the same, four chips (their host objects and configurations)" \
  "$((host_many / 1024))"
printf '%-66s %8s MiB\n' "+ libnvperf_target loaded (what a sampling helper carries)" "$((both / 1024))"
printf '%-66s %8s MiB\n' "libnvperf_host adds" "$(((host - alone) / 1024))"
printf '%-66s %8s MiB\n' "libnvperf_target adds" "$(((both - host) / 1024))"
printf '%-66s %8s MiB\n' "three more chips' objects add" "$(((host_many - host) / 1024))"

nine=()
for _ in 1 2 3 4 5 6 7 8 9; do nine+=(--chip GH100); done
one_gpu=$(cpu_ms "$helper" --libcupti "$lib/libcupti.so.13" plan --chip GH100)
nine_gpus=$(cpu_ms "$helper" --libcupti "$lib/libcupti.so.13" plan "${nine[@]}")
printf '%-66s %8s ms\n' "CPU: library start and both sets resolved for one GH100" "$one_gpu"
printf '%-66s %8s ms\n' "CPU: the same for nine GH100s" "$nine_gpus"
printf '%-66s %8s ms\n' "CPU: each GPU after the first (both sets resolved)" \
  "$(((nine_gpus - one_gpu) / 8))"
