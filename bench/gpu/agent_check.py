#!/usr/bin/env python3
"""libexpanse-agent.so injected for real into PyTorch jobs on a GPU machine (scripts/gpu-check).

Each job is a fresh Python process with CUDA_INJECTION64_PATH set as TaskProlog sets it (and a
private control directory laid out as on a node), or without it for the "off" phases:

  1. A short training-like loop with NVTX ranges: the aggregates must name real kernels (top 5
     printed), count copies and synchronisations, and carry the NVTX range "step".
  2. Phase B: a trigger is written while the job runs; the trace segment must parse as JSON in
     Chrome's trace event format (what Perfetto's JSON importer reads): every complete event
     with numeric ts/dur, integer pid/tid, a name; metadata naming every track.
  3. Overhead, A/B/A/B (off, on, off, on): a kernel-heavy loop (bf16 8192^3 matmuls) and a
     launch-bound loop (many tiny kernels), steady-state throughput per phase; then the same
     launch-bound loop with a Phase B trigger covering the whole "on" phase.
     Budgets (issue 20): <= 1 % kernel-heavy, <= 2 % launch-bound, <= 5 % with Phase B.
  4. Facts for arbitration with the job's own profiler: a training loop that runs
     torch.profiler (Kineto, CUPTI's Activity API in the same process) over 20 steps in its
     middle, with and without the agent. Reported, not judged: whether the job's trace has its
     CUDA kernels either way (a job's profiler must never fail because of Expanse), and whether
     the agent's aggregates still name kernels after the profiler stopped (does Kineto's
     registration or its disabling of the same kinds cut the agent off?).

Usage: agent_check.py AGENT_LIBRARY OUT_DIR [--phase-seconds 20]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

JOB = r"""
import os, sys, time, torch
mode, seconds = sys.argv[1], float(sys.argv[2])
torch.cuda.init()
def kernel_heavy():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    def step():
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        return 10
    return step
def launch_bound():
    x = torch.zeros(256, device="cuda")
    def step():
        for _ in range(1000):
            x.add_(1.0)
        torch.cuda.synchronize()
        return 1000
    return step
def training():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def step():
        torch.cuda.nvtx.range_push("step")
        x = torch.randn(512, 1024).cuda()  # a host-to-device copy each step
        loss = model(x).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        return 1
    return step
if mode == "profiled":
    # Training steps for seconds/2, then torch.profiler over 20 steps, then seconds/2 more.
    import json as _json
    from torch.profiler import profile, ProfilerActivity
    step = training()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds / 2:
        count += step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            step()
    trace = os.environ["AGENT_CHECK_TRACE"]
    prof.export_chrome_trace(trace)
    events = _json.load(open(trace)).get("traceEvents", [])
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    after = time.time()
    while time.perf_counter() - start < seconds:
        count += step()
    print(_json.dumps({"per_second": count / (time.perf_counter() - start),
                       "profiler_kernels": kernels, "profiler_end_s": after}))
    sys.exit(0)
step = {"kernel_heavy": kernel_heavy, "launch_bound": launch_bound, "training": training}[mode]()
for _ in range(5):
    step()  # warm-up: cuBLAS handles, allocator, first-launch costs
count, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    count += step()
# Which libcupti copies the process holds (the job's framework may load its own: two copies in
# one process is a fact arbitration must know).
cupti = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l})
import json as _json
print(_json.dumps({"per_second": count / (time.perf_counter() - start), "cupti": cupti}))
"""


LAST = {}  # the last job's own report (its libcupti mappings)


def control_dir(root):
    os.makedirs(os.path.join(root, "capture"), exist_ok=True)
    os.makedirs(os.path.join(root, "phase-b"), exist_ok=True)
    os.chmod(os.path.join(root, "capture"), 0o1733)
    return root


def run_job(agent, control, mode, seconds, job_id, inject=True, window_ms=2000, extra_env=None):
    env = dict(os.environ)
    env.update(extra_env or {})
    env.update({"SLURM_JOB_ID": str(job_id), "SLURM_PROCID": "0",
                "EXPANSE_CONTROL_DIR": control, "EXPANSE_CAPTURE_WINDOW_MS": str(window_ms)})
    if inject:
        env["CUDA_INJECTION64_PATH"] = agent
    else:
        env.pop("CUDA_INJECTION64_PATH", None)
    done = subprocess.run([sys.executable, "-c", JOB, mode, str(seconds)], env=env,
                          capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} job failed ({done.returncode}): {done.stderr[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    LAST.update(result)
    return result["per_second"]


def job_profiler_beside_agent(agent, control, report):
    """Step 4: the job's own torch.profiler with and without the agent (facts, no verdict)."""
    out = {}
    own = [p for p in LAST.get("cupti", []) if os.path.dirname(p) != os.path.dirname(agent)]
    variants = [(False, None), (True, None)] + ([(True, own[0])] if own else [])
    for inject, cupti in variants:
        job = 9400 + int(inject) + (1 if cupti else 0)
        trace = os.path.join(control, f"kineto-{job}.json")
        env = dict(os.environ)
        env.update({"SLURM_JOB_ID": str(job), "SLURM_PROCID": "0", "EXPANSE_CONTROL_DIR": control,
                    "EXPANSE_CAPTURE_WINDOW_MS": "1000", "AGENT_CHECK_TRACE": trace})
        if inject:
            env["CUDA_INJECTION64_PATH"] = agent
        else:
            env.pop("CUDA_INJECTION64_PATH", None)
        if cupti:  # the agent on the framework's own libcupti instead of the one beside it
            env["EXPANSE_AGENT_CUPTI"] = cupti
        done = subprocess.run([sys.executable, "-c", JOB, "profiled", "12"], env=env,
                              capture_output=True, text=True, timeout=200)
        name = ("with_agent_on_job_cupti" if cupti else "with_agent") if inject else "without_agent"
        if done.returncode != 0:
            out[name] = {"error": done.stderr[-800:]}
            print(f"  {name}: the job FAILED ({done.returncode}): {done.stderr[-300:]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        entry = {"profiler_kernels": result["profiler_kernels"]}
        if inject:
            # Aggregate windows that ended after the job's profiler stopped, and their kernels.
            later = 0
            for path in glob.glob(os.path.join(control, "capture", f"agg-{job}-*.json")):
                doc = json.load(open(path))
                if doc.get("window_end_ms", 0) / 1000.0 > result["profiler_end_s"]:
                    later += sum(k.get("count", 0) for k in doc.get("kernels", {}).get("top", []))
            entry["agent_kernels_after_profiler"] = later
            logs = "".join(open(p).read()
                           for p in glob.glob(os.path.join(control, "capture", f"agent-{job}-*")))
            entry["agent_log"] = logs[-600:]
        out[name] = entry
        print(f"  {name}: the job's profiler recorded {entry['profiler_kernels']} kernels"
              + (f"; the agent's kernels after it stopped: {entry['agent_kernels_after_profiler']}"
                 if inject else ""))
    report["job_profiler"] = out


def trigger(control, job_id, seconds):
    now_ms = int(time.time() * 1000)
    path = os.path.join(control, "phase-b", str(job_id))
    with open(path + ".tmp", "w") as f:
        json.dump({"id": f"check-{job_id}-{now_ms}", "until_ms": now_ms + int(seconds * 1000),
                   "reason": "gpu_idle", "gpus": []}, f)
    os.chmod(path + ".tmp", 0o644)
    os.rename(path + ".tmp", path)


def check_aggregates(control, job_id, report):
    files = sorted(glob.glob(os.path.join(control, "capture", f"agg-{job_id}-*.json")))
    if not files:
        logs = "".join(open(p).read() for p in glob.glob(os.path.join(control, "capture", "agent-*")))
        raise RuntimeError(f"no aggregates; agent log: {logs[-800:]}")
    kernels, copies, syncs, steps = {}, 0, 0, 0
    for path in files:
        doc = json.load(open(path))
        for k in doc["kernels"]["top"]:
            kernels[k["name"]] = kernels.get(k["name"], 0) + k["gpu_ns"]
        copies += sum(c["count"] for c in doc["memcpy"].values())
        syncs += sum(s["count"] for s in doc["sync"].values())
        steps += sum(r["count"] for r in doc["nvtx"]["ranges"] if r["name"] == "step")
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:5]
    observed = [json.load(open(p)).get("observed_ms") for p in files]
    report["aggregates"] = {"files": len(files), "top_kernels": top, "copies": copies,
                            "syncs": syncs, "nvtx_steps": steps, "observed_ms": observed}
    print(f"  observed_ms per window: {observed}")
    print(f"  {len(files)} aggregate files; copies {copies}, syncs {syncs}, NVTX 'step' {steps}")
    for name, ns in top:
        print(f"    {ns / 1e6:10.1f} ms  {name[:110]}")
    assert top and all(name and name != "(unnamed)" for name, _ in top), "unnamed kernels"
    assert copies > 0 and syncs > 0, "no copies or synchronisations counted"


def check_segment(control, job_id, report):
    files = sorted(glob.glob(os.path.join(control, "capture", f"seg-{job_id}-*.json")))
    if not files:
        raise RuntimeError("no trace segment after the trigger")
    doc = json.load(open(files[0]))
    events = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"], e
        assert (e["pid"], e["tid"]) in named, f"unnamed track {e}"
    other = doc["otherData"]
    report["segment"] = {"file": os.path.basename(files[0]), "bytes": os.path.getsize(files[0]),
                         "events": len(complete), "dropped": other["dropped_events"],
                         "window_ms": other["window_end_ms"] - other["window_start_ms"],
                         "observed_ms": other.get("observed_ms")}
    print(f"  segment {report['segment']}")
    assert complete, "an empty segment"
    # PC sampling (docs/capture-agent.md): sampled where the node lets the job's process,
    # else restricted or unavailable with CUPTI's reason; both are findings, neither fails.
    pc = other.get("pc_sampling", {"state": "absent"})
    report["pc_sampling"] = {k: pc.get(k) for k in
                             ("state", "reason", "total_samples", "dropped_samples",
                              "hardware_buffer_full", "unkept_samples")}
    report["pc_sampling"]["top"] = [
        {"name": f["name"][:80], "samples": f["samples"],
         "stall": max(f["stall_reasons"].items(), key=lambda kv: kv[1])[0]}
        for f in pc.get("functions", [])[:5]]
    print(f"  pc_sampling {report['pc_sampling']}")
    if pc.get("state") == "sampled":
        assert pc["functions"] and all(f["name"] for f in pc["functions"]), "unnamed PCs"


def ab(agent, control, mode, seconds, job_base, phase_b=False, extra_env=None, label=None):
    results = []
    for i, on in enumerate([False, True, False, True]):
        job = job_base + i
        if on and phase_b:
            trigger(control, job, seconds + 60)
        results.append(run_job(agent, control, mode, seconds, job, inject=on,
                               extra_env=extra_env))
    off = (results[0] + results[2]) / 2
    on = (results[1] + results[3]) / 2
    slowdown = 100.0 * (off - on) / off
    label = label or mode + (" + Phase B" if phase_b else "")
    print(f"  {label:>24}: off {results[0]:.1f} / {results[2]:.1f}, on {results[1]:.1f} / "
          f"{results[3]:.1f} per s; slowdown {slowdown:+.2f} %")
    return {"phases": results, "slowdown_percent": slowdown}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("agent")
    parser.add_argument("out")
    parser.add_argument("--phase-seconds", type=float, default=20)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = {}
    work = tempfile.mkdtemp(prefix="agent-check-")
    control = control_dir(os.path.join(work, "control"))
    try:
        print("  1. aggregates of a training loop")
        run_job(args.agent, control, "training", 8, 9001)
        report["job_cupti_mappings"] = LAST.get("cupti")
        print(f"  libcupti mapped in the job: {LAST.get('cupti')}")
        check_aggregates(control, 9001, report)
        print("  2. Phase B trace segment")
        trigger(control, 9002, 60)
        run_job(args.agent, control, "training", 15, 9002)
        check_segment(control, 9002, report)
    except Exception as e:  # report and go on to the overhead
        report["error"] = str(e)
        print(f"  FAILED: {e}")
    # AGENT_CHECK_PARTS chooses what runs after steps 1-2 (a short lease may skip some).
    parts = os.environ.get("AGENT_CHECK_PARTS",
                           "kernel_heavy launch_bound launch_bound_phase_b job_profiler").split()
    print("  3. overhead, A/B/A/B")
    if "kernel_heavy" in parts:
        report["kernel_heavy"] = ab(args.agent, control, "kernel_heavy", args.phase_seconds, 9100)
    if "launch_bound" in parts:
        report["launch_bound"] = ab(args.agent, control, "launch_bound", args.phase_seconds, 9200)
    if "launch_bound_phase_b" in parts:
        report["launch_bound_phase_b"] = ab(args.agent, control, "launch_bound",
                                            args.phase_seconds, 9300, phase_b=True)
    # Bursts of 1 % of the time, CUPTI detached between them (the agent's default with a
    # budget) and, for the A/B of the detach itself, kept attached.
    burst = {"EXPANSE_CAPTURE_BUDGET_PERMILLE": "10", "EXPANSE_CAPTURE_TRACE_BUDGET_PERMILLE": "40"}
    if "launch_bound_burst" in parts:
        report["launch_bound_burst"] = ab(args.agent, control, "launch_bound", args.phase_seconds,
                                          9400, extra_env=burst, label="bursts, detached")
    if "launch_bound_burst_attached" in parts:
        report["launch_bound_burst_attached"] = ab(
            args.agent, control, "launch_bound", args.phase_seconds, 9500,
            extra_env=dict(burst, EXPANSE_CAPTURE_DETACH="0"), label="bursts, attached")
    if "job_profiler" in parts:
        print("  4. the job's own torch.profiler beside the agent")
        try:
            job_profiler_beside_agent(args.agent, control, report)
        except Exception as e:
            report["job_profiler_error"] = str(e)
            print(f"  FAILED: {e}")
    json.dump(report, open(os.path.join(args.out, "agent_check.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
