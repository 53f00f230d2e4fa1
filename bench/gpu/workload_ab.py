#!/usr/bin/env python3
"""Slowdown of a GPU workload with the Expanse sampler running at 1 Hz, measured A/B/A/B.

A bf16 matrix-product loop (PyTorch) runs in phases of equal length; in the "on" phases
`expanse-daemon sample` runs beside it for the whole phase. Prints each phase's throughput,
the on/off ratio, and the sampler's own report (CPU, RSS). While the first "on" phase runs,
`expanse-daemon gpus --json` is captured too, so the report shows NVML's view of a busy GPU
(its processes, memory and per-process utilisation).

Usage: workload_ab.py DAEMON_BINARY OUT_DIR [--phase-seconds 20] [--backend nvml]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def matmul_phase(torch, seconds, n=8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        count += 10
    elapsed = time.perf_counter() - start
    return 2.0 * n * n * n * count / elapsed / 1e12


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("daemon")
    parser.add_argument("out")
    parser.add_argument("--phase-seconds", type=float, default=20)
    parser.add_argument("--backend", default="nvml")
    args = parser.parse_args()
    import torch  # imported late so --help works without it

    os.makedirs(args.out, exist_ok=True)
    phases = ["off", "on", "off", "on"]
    results = []
    captured_busy = False
    for index, phase in enumerate(phases):
        sampler = None
        if phase == "on":
            duration = f"{int(args.phase_seconds) + 2}s"
            sampler = subprocess.Popen(
                [args.daemon, "sample", "--backend", args.backend, "--duration", duration],
                stdout=subprocess.PIPE, text=True)
        if phase == "on" and not captured_busy:
            # A busy snapshot a few seconds into the phase, from a second process.
            snapshot = subprocess.Popen(
                ["sh", "-c", f"sleep 4; exec {args.daemon} gpus --json --backend {args.backend}"],
                stdout=open(os.path.join(args.out, "gpus_busy.json"), "w"))
            captured_busy = True
        tflops = matmul_phase(torch, args.phase_seconds)
        report = None
        if sampler is not None:
            out, _ = sampler.communicate(timeout=60)
            report = json.loads(out)
        results.append({"phase": index + 1, "sampler": phase, "tflops": tflops,
                        "sampler_report": report})
        print(f"phase {index + 1} sampler {phase:>3}: {tflops:8.1f} TFLOP/s", flush=True)
    snapshot.wait(timeout=60)

    off = [r["tflops"] for r in results if r["sampler"] == "off"]
    on = [r["tflops"] for r in results if r["sampler"] == "on"]
    ratio = (sum(on) / len(on)) / (sum(off) / len(off))
    summary = {"phases": results, "mean_off_tflops": sum(off) / len(off),
               "mean_on_tflops": sum(on) / len(on), "on_over_off": ratio,
               "slowdown_percent": (1 - ratio) * 100}
    with open(os.path.join(args.out, "workload_ab.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"mean off {summary['mean_off_tflops']:.1f}  mean on {summary['mean_on_tflops']:.1f}  "
          f"on/off {ratio:.4f}  slowdown {summary['slowdown_percent']:.2f} %")
    for r in results:
        if r["sampler_report"]:
            rep = r["sampler_report"]
            print(f"sampler during phase {r['phase']}: {rep['cpu_percent_of_core']:.3f} % of a core, "
                  f"max RSS {rep['max_rss_kib']} KiB ({rep.get('memory_kib')}), {rep['samples']} samples, state {rep['state']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
