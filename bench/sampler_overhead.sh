#!/usr/bin/env bash
# The GPU sampler's cost for 8 GPUs at 1 Hz on this machine, NVML and nvidia-smi side by side:
# the NVML backend runs its real dlopen path against the fake libnvidia-ml.so.1
# (tests/fakes/nvml); the nvidia-smi backend runs bench/gpu/fake-nvidia-smi (see its header for
# why that flatters nvidia-smi). Prints each backend's CPU share of one core and peak RSS.
# The same measurement against real GPUs is part of scripts/gpu-check.
#
# Usage: bench/sampler_overhead.sh BUILD_DIR [SECONDS]   (a Release build with the fakes built:
#   cmake -B build/bench -DCMAKE_BUILD_TYPE=Release -DEXPANSE_BUILD_BENCH=ON -DEXPANSE_BUILD_TESTS=OFF
#   ninja -C build/bench expanse-daemon expanse_fake_nvml)
set -euo pipefail
build=${1:?usage: bench/sampler_overhead.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
daemon="$build/bin/expanse-daemon"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

python3 - "$scratch/scenario.json" <<'PY'
import json, sys
gpus = [{"minor": 7 - i, "sm_util": 100, "mem_util": 24, "memory_used_mib": 31859,
         "power_mw": 694770, "processes": [{"pid": 1000 + i, "used_memory_mib": 31850,
                                            "sm_util": 98, "mem_util": 23}]} for i in range(8)]
json.dump({"gpus": gpus}, open(sys.argv[1], "w"))
PY

report() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<22} {r['cpu_percent_of_core']:7.3f} % of a core (children {100 * r['children_cpu_seconds'] / r['wall_seconds']:.3f} %)"
      f"  max RSS {r['max_rss_kib'] / 1024:5.1f} MiB (largest child {r['children_max_rss_kib'] / 1024:5.1f} MiB)"
      f"  {r['ticks']} ticks  {r['samples']} samples  gpus {r['gpus']}  {r['state']}")
PY
}

echo "sampler, 8 GPUs, 1 Hz, ${seconds}s each"
EXPANSE_FAKE_NVML_SCENARIO="$scratch/scenario.json" "$daemon" sample --backend nvml \
  --nvml-library "$build/fakes/nvml/libnvidia-ml.so.1" --duration "${seconds}s" >"$scratch/nvml.json"
report "$scratch/nvml.json" "nvml (fake library)"
"$daemon" sample --backend nvidia-smi --nvidia-smi "$here/gpu/fake-nvidia-smi" \
  --duration "${seconds}s" >"$scratch/smi.json"
report "$scratch/smi.json" "nvidia-smi (fake, sh)"
python3 - "$scratch/nvml.json" "$scratch/smi.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if a["cpu_seconds"] > 0:
    print(f"nvidia-smi path / nvml path CPU: {b['cpu_seconds'] / a['cpu_seconds']:.1f}x")
PY
