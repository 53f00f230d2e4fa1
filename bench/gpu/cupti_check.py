#!/usr/bin/env python3
"""expanse-cupti-helper on a real GPU (scripts/gpu-check, section 5).

1. `probe --json` as root, as an unprivileged user without capabilities, and as that user with
   CAP_PERFMON only (setpriv), so the report shows what each can sample and why not.
2. The Light set during a bf16 matmul (tensor activity high) and while idle (near zero): the
   helper's per-second means, as the sampler reads them.
3. Counter arbitration: a job's own CUPTI range profiler (ncu) runs while the helper samples;
   ncu must succeed, and the helper must yield the GPU and resume afterwards.
4. The helper's own cost: CPU share of a core and peak RSS (VmHWM) over a sampling run, and the
   matmul's throughput with the helper on vs off, A/B/A/B.

Usage: cupti_check.py HELPER OUT_DIR [--phase-seconds 20] [--user 65534]
Prints a summary; writes the raw outputs under OUT_DIR.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time

MATMUL = r"""
import sys, time, torch
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
seconds = float(sys.argv[1]); count = 0; start = time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(10):
        a @ b
    torch.cuda.synchronize(); count += 10
print(2.0 * n * n * n * count / (time.perf_counter() - start) / 1e12)
"""


def probe(helper, prefix, out, name):
    result = subprocess.run(prefix + [helper, "probe", "--json"], capture_output=True, text=True)
    with open(os.path.join(out, f"probe_{name}.json"), "w") as f:
        f.write(result.stdout + result.stderr)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return f"{name:>18}: exit {result.returncode}, no JSON: {result.stderr.strip()[:200]}"
    devices = report.get("devices", [])
    states = ", ".join(
        f"{d.get('index')}: {d.get('pm_sampling')} {d.get('pm_sampling_reason', '')}".strip()
        for d in devices) or report.get("reason", "no devices")
    caps = report.get("effective_capabilities", {})
    light = devices[0].get("light_set", {}) if devices else {}
    return (f"{name:>18}: exit {result.returncode}; caps {caps}; "
            f"RmProfilingAdminOnly {report.get('rm_profiling_admin_only')}; {states}; "
            f"light set {sorted(light)} absent {devices[0].get('light_set_absent') if devices else None}; "
            f"libnvperf_host {report.get('libnvperf_host')}; availability image "
            f"{devices[0].get('counter_availability_bytes') if devices else None} bytes, "
            f"{devices[0].get('counter_availability_image', 'used') if devices else None}; "
            f"metric checks {devices[0].get('metric_checks') if devices else None}; "
            f"submetrics listed {Catalogue(devices[0]) if devices else None}")


def plan_beside_probe(helper, out):
    """What `plan` (the host calls alone, no availability image) chose for this GPU's chip,
    against what the root probe chose on the device: a difference is the availability image's."""
    try:
        with open(os.path.join(out, "probe_root.json")) as f:
            # The file holds the probe's JSON, then whatever it wrote to standard error.
            device = json.JSONDecoder().raw_decode(f.read())[0]["devices"][0]
    except (OSError, ValueError, KeyError, IndexError) as error:
        return f"{'plan':>18}: no chip from the root probe ({error})"
    chip = device.get("chip")
    if not chip:
        return f"{'plan':>18}: the root probe named no chip"
    try:
        result = subprocess.run([helper, "plan", "--chip", chip], capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        return f"{'plan':>18}: no answer in 120 s"
    with open(os.path.join(out, "plan.json"), "w") as f:
        f.write(result.stdout + result.stderr)
    try:
        planned = json.loads(result.stdout)["chips"][0]
    except (ValueError, KeyError, IndexError):
        return f"{'plan':>18}: exit {result.returncode}, {result.stderr.strip()[:200]}"
    light = planned["light"].get("series", {})
    probed = device.get("light_set", {})
    differ = sorted(k for k in set(light) | set(probed) if light.get(k) != probed.get(k))
    return (f"{'plan ' + chip:>18}: light {len(light)} series, rich "
            f"{len(planned['rich'].get('series', {}))}; differs from the probe on {differ}")


def Catalogue(device):
    """metric_catalogue in short (probe_<name>.json has it whole): how many base names CUPTI
    listed submetrics for, and those it did not, with or without the availability image."""
    listed = device.get("metric_catalogue")
    if listed is None:
        return None
    ok = [item["metric"] for item in listed if "submetrics" in item]
    bare = [item["metric"] for item in listed
            if "submetrics" in item.get("without_availability_image", {})]
    failed = [item["metric"] for item in listed
              if "submetrics" not in item and item["metric"] not in bare]
    return f"{len(ok)} listed, {len(bare)} only without the image {bare}, not listed {failed}"


class Sampling:
    """The helper in `sample` mode, its records collected on a thread."""

    def __init__(self, helper, out, name):
        self.records = []
        self.log = open(os.path.join(out, f"sample_{name}.jsonl"), "w")
        self.proc = subprocess.Popen([helper, "sample", "--period-ms", "1000"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            try:
                self.records.append((time.time(), json.loads(line)))
            except ValueError:
                pass

    def means(self, since, until, series):
        values = [r["values"][series] for t, r in self.records
                  if since <= t <= until and r.get("kind") == "counters" and series in r["values"]]
        return sum(values) / len(values) if values else None

    def statuses(self):
        return [r for _, r in self.records if r.get("kind") == "status"]

    def cpu_seconds(self):
        """CPU the helper has used so far (user + system), or None once it has ended."""
        if self.proc.poll() is not None:
            return None
        stat = open(f"/proc/{self.proc.pid}/stat").read().split(")")[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")

    def cost(self, wall, since_cpu=0.0):
        """Percent of a core over `wall` seconds, counting the CPU used after `since_cpu`."""
        used = self.cpu_seconds()
        if used is None:
            return None, None  # the helper ended: its records above say why
        status = open(f"/proc/{self.proc.pid}/status").read()
        # VmHWM, and what the memory now is: RssAnon the helper's own (heap, CUPTI's buffers),
        # RssFile mapped libraries (libcuda, libcupti, nvperf) shared with other users.
        fields = {l.split(":")[0]: l.split()[1] for l in status.splitlines()
                  if l.split(":")[0] in ("VmHWM", "RssAnon", "RssFile")}
        return 100.0 * (used - since_cpu) / wall, fields

    def stop(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)
        self.thread.join(timeout=5)
        self.log.close()


def matmul(seconds):
    result = subprocess.run([sys.executable, "-c", MATMUL, str(seconds)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        print(f"matmul failed ({result.returncode}): {result.stderr.strip()[-300:]}")
        return None
    return float(result.stdout.strip())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("helper")
    parser.add_argument("out")
    parser.add_argument("--phase-seconds", type=float, default=20)
    parser.add_argument("--user", default="65534")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    phase = args.phase_seconds

    print("-- probe")
    print(probe(args.helper, [], args.out, "root"))
    user = ["setpriv", f"--reuid={args.user}", "--regid=65534", "--clear-groups"]
    print(probe(args.helper, user + ["--inh-caps=-all", "--bounding-set=-all"], args.out,
                "user"))
    print(probe(args.helper, user + ["--inh-caps=+perfmon", "--ambient-caps=+perfmon"],
                args.out, "user_perfmon"))

    print(plan_beside_probe(args.helper, args.out))

    print("-- Light set: idle, then a bf16 matmul")
    sampling = Sampling(args.helper, args.out, "light")
    started = time.time()
    # Start-up (loading libcupti and NVIDIA's perf libraries, resolving the set) is paid once;
    # the budget (0.5 % of a core per GPU at 1 Hz) is about the steady state after it.
    time.sleep(min(5.0, phase / 2))
    settled, settled_cpu = time.time(), sampling.cpu_seconds()
    time.sleep(max(0.0, phase - (settled - started)))
    idle_end = time.time()
    tflops = matmul(phase)
    busy_end = time.time()
    for series in ("gpu.sm_active", "gpu.tensor_active", "gpu.dram_active", "gpu.sm_inst_executed"):
        print(f"{series:>22}: idle {sampling.means(started + 2, idle_end, series)} "
              f"busy {sampling.means(idle_end + 3, busy_end, series)}")
    print(f"matmul {tflops} TFLOP/s while sampled")
    cpu, hwm = (None, None) if settled_cpu is None else sampling.cost(busy_end - settled,
                                                                       settled_cpu)
    if cpu is None:
        print(f"the helper exited ({sampling.proc.returncode}): no cost to report")
    else:
        print(f"helper start-up: {settled_cpu:.2f} s of CPU in its first "
              f"{settled - started:.0f} s")
        print(f"helper cost: {cpu:.3f} % of a core after start-up, KiB {hwm} over "
              f"{busy_end - settled:.0f} s")

    print("-- escalation: Rich set for 10 s")
    uuid = next((r["uuid"] for r in sampling.statuses() if r.get("pm_sampling") == "ok"), None)
    if uuid:
        try:
            sampling.proc.stdin.write(f"escalate {uuid} 10\n")
            sampling.proc.stdin.flush()
        except BrokenPipeError:
            print("the helper exited before escalation")
        matmul(12)
        rich = [r for _, r in sampling.records if r.get("kind") == "counters" and r["set"] == "rich"]
        print(f"rich records: {len(rich)}; series {sorted(rich[-1]['values']) if rich else None}")

    print("-- arbitration: a job's ncu range profiler while the helper samples")
    ncu = (shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)
           or "/usr/local/cuda/bin/ncu")
    if os.path.exists(ncu):
        before = len(sampling.statuses())
        # The first 10 kernels only (ncu replays each profiled kernel), clocks left alone.
        result = subprocess.run([ncu, "--metrics", "sm__cycles_active.avg", "--launch-count",
                                 "10", "--clock-control", "none", "--target-processes", "all",
                                 sys.executable, "-c", MATMUL, "3"], capture_output=True,
                                text=True, timeout=180)
        with open(os.path.join(args.out, "ncu.txt"), "w") as f:
            f.write(result.stdout + result.stderr)
        time.sleep(12)
        print(f"ncu exit {result.returncode} (must be 0); helper statuses since: "
              f"{[(s.get('pm_sampling'), s.get('reason')) for s in sampling.statuses()[before:]]}")
    else:
        print("ncu not found: arbitration not checked")
    sampling.stop()

    print("-- matmul throughput, helper off vs on, A/B/A/B")
    results = []
    for state in ("off", "on", "off", "on"):
        run = Sampling(args.helper, args.out, f"ab_{len(results)}") if state == "on" else None
        results.append((state, matmul(phase)))
        if run:
            run.stop()
    off = [t for s, t in results if s == "off" and t]
    on = [t for s, t in results if s == "on" and t]
    for state, value in results:
        print(f"{state:>4}: {value} TFLOP/s")
    if off and on:
        print(f"slowdown with the helper: {100 * (1 - (sum(on) / len(on)) / (sum(off) / len(off))):.3f} %")


if __name__ == "__main__":
    main()
