#!/usr/bin/env python3
"""One rung of bench/scale_ladder.sh, from the files it kept (WORK/results/rungN):
what the plan chose, what the run measured, and every bound the ladder checks.

  scale_ladder_report.py RESULTS_DIR RUNG   -> the rung's table (markdown) and RESULTS_DIR/summary.json
  scale_ladder_report.py --table WORK/results -> every rung's summary side by side

Bounds (docs/benchmarks.md, "Scale ladder"): peak RSS of each rank <= its host
budget + the fixed overhead the plan states; no allocation after warm-up; NVMe
bytes read a step <= 1.05x the bytes the plan placed on NVMe; overlap
efficiency >= 0.85; measured step within 15 % of the prediction; the resumed
losses and the exported weights' validation loss equal the uninterrupted run's
bit for bit; the validation loss after the last step is below the initial
weights' (the same held-out windows)."""
import json
import math
import re
import statistics
import sys
from pathlib import Path

GB = 1e9
GIB = 2**30


def load_jsonl(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def resolved_budgets(path):
    """cache.*_budget and train.micro_batch from job.resolved.yaml, in bytes."""
    text = Path(path).read_text()
    out = {}
    for key in ("device_budget", "host_budget", "nvme_budget"):
        m = re.search(rf"^\s+{key}:\s*(\d+)", text, re.M)
        out[key] = int(m.group(1)) if m else None
    m = re.search(r"^\s+micro_batch:\s*(\d+)", text, re.M)
    out["micro_batch"] = int(m.group(1)) if m else None
    return out


def log_throughput(logs, what):
    """(GB, s, GB/s) of each 'checkpoint: ...' or 'resumed at ...' line of rank 0."""
    found = []
    for f in sorted(Path(logs).glob("rank-0.out")):
        for line in f.read_text().splitlines():
            if what in line:
                m = re.search(r"\(([\d.]+) GB in ([\d.]+) s, ([\d.]+) GB/s\)", line)
                if m:
                    found.append(tuple(float(x) for x in m.groups()))
    return found


def times(path):
    t = {}
    for line in Path(path).read_text().splitlines():
        k, _, v = line.partition("=")
        t[k] = float(v)
    return t


def mib(b):
    return f"{b / 2**20:,.0f} MiB"


def gib(b):
    return f"{b / GIB:.2f} GiB"


def summarise(res, rung):
    res = Path(res)
    a = res / "A"
    plan = json.loads((a / "plan.json").read_text())
    machine = json.loads((a / "machine.json").read_text())
    report = json.loads((a / "report.json").read_text())
    local = plan["local"]
    metrics = load_jsonl(a / "metrics.jsonl")
    ranks = local["ranks"]
    ram = machine["facts"]["ram_bytes"]
    states = local["per_rank"]["state_bytes"] * ranks
    budgets = resolved_budgets(a / "job.resolved.yaml")
    warm = report["measured"].get("warmup_steps", 1)
    steady = [m for m in metrics if m["step"] >= warm]
    pr = [m["per_rank"] for m in metrics]
    peak_rss = [max(p["peak_rss_bytes"][r] for p in pr) for r in range(ranks)]
    setup_rss = [max(p["setup_peak_rss_bytes"][r] for p in pr) for r in range(ranks)]
    nvme_read = [statistics.median(m["per_rank"]["bytes_nvme_read"][r] for m in steady) for r in range(ranks)]
    placed = local["per_rank"]["nvme_bytes"]
    overlap = [m["overlap_efficiency"] for m in steady]
    allocs = sum(m["allocations_after_warmup"] for m in metrics)
    t = times(res / "times.env")
    ckpt = log_throughput(res / "B" / "logs", "checkpoint: step")
    resume = log_throughput(res / "B2" / "logs", "resumed at step")
    disk = machine["probes"]["disk"]

    def losses(run):
        return {m["step"]: m["loss"] for m in load_jsonl(res / run / "metrics.jsonl")}

    la, lb, lb2 = losses("A"), losses("B"), losses("B2")
    resumed = {**lb, **lb2}
    resume_bitwise = bool(lb2) and all(la.get(s) == v for s, v in resumed.items()) and set(resumed) == set(la)
    eval_a = [m["eval_loss"] for m in metrics if "eval_loss" in m]
    def evaluated(log):  # tencache-worker --evaluate's validation loss
        ev = re.search(r"eval loss (\S+)", (res / log).read_text()) if (res / log).exists() else None
        return float(ev.group(1)) if ev else math.nan

    eval_export, eval_init = evaluated("evaluate.log"), evaluated("evaluate_init.log")
    export_bitwise = bool(eval_a) and eval_export == eval_a[-1]
    init_files = [l.split()[-1] for l in (res / "init.ls").read_text().splitlines() if l.endswith(".safetensors")]
    init_sizes = [int(l.split()[4]) for l in (res / "init.ls").read_text().splitlines() if l.endswith(".safetensors")]
    overhead = local["per_rank"].get("host_overhead_bytes")
    host = budgets["host_budget"] or 0
    device = budgets["device_budget"] or 0
    s = {
        "rung": rung,
        "params": plan["model"]["params"],
        "ranks": ranks,
        "micro_batch": budgets["micro_batch"],
        "states_bytes": states,
        "ram_bytes": ram,
        "states_over_ram": states / ram,
        "budgets_per_rank": {"device": device, "host": host, "nvme": budgets["nvme_budget"]},
        "placed_per_rank": {k: local["per_rank"][k] for k in ("gpu_bytes", "cpu_bytes", "nvme_bytes")},
        "peak_rss_per_rank": peak_rss,
        "setup_peak_rss_per_rank": setup_rss,
        "host_overhead_per_rank": overhead,
        "allocations_after_warmup": allocs,
        "step_time_s": report["measured"]["step_time_s"],
        "predicted_step_time_s": report["predicted"]["step_time_s"],
        "prediction_error": report.get("prediction_error"),
        "lanes_s": steady[-1]["lane_busy_s"] if steady else {},
        "predicted_lanes_s": report["predicted"]["lanes_s"],
        "overlap_median": statistics.median(overlap) if overlap else math.nan,
        "overlap_min": min(overlap) if overlap else math.nan,
        "nvme_read_per_rank": nvme_read,
        "nvme_placed_per_rank": placed,
        "nvme_read_over_placed": max(nvme_read) / placed if placed else 0.0,
        "disk_gbps": {"read": disk["read_gbps"], "write": disk["write_gbps"]},
        "times_s": t,
        "checkpoint": ckpt,
        "resume": resume,
        "init_shards": dict(zip(init_files, init_sizes)),
        "loss_first": metrics[0]["loss"],
        "loss_last": metrics[-1]["loss"],
        "resume_bitwise": resume_bitwise,
        "resume_steps": sorted(lb2),
        "b_exit": t.get("b_exit"),
        "eval_loss_run": eval_a[-1] if eval_a else None,
        "eval_loss_export": eval_export,
        "eval_loss_init": eval_init,
        "export_bitwise": export_bitwise,
    }
    (res / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    return s


def verdicts(s):
    v = []
    if s["host_overhead_per_rank"] is not None:
        bound = s["budgets_per_rank"]["host"] + s["host_overhead_per_rank"]
        v.append(("peak RSS <= host budget + overhead", max(s["peak_rss_per_rank"]) <= bound))
        v.append(("loading peak RSS <= host budget + overhead", max(s["setup_peak_rss_per_rank"]) <= bound))
    v.append(("no allocation after warm-up", s["allocations_after_warmup"] == 0))
    if s["nvme_placed_per_rank"]:
        v.append(("NVMe read <= 1.05x placed", s["nvme_read_over_placed"] <= 1.05))
    v.append(("overlap >= 0.85", s["overlap_min"] >= 0.85))
    err = s["prediction_error"]
    v.append(("step within 15 % of prediction", err is not None and abs(err) <= 0.15))
    v.append(("resume bit for bit", s["resume_bitwise"]))
    v.append(("export bit for bit", s["export_bitwise"]))
    v.append(("validation loss falls from the initial weights'", s["eval_loss_run"] is not None
              and s["eval_loss_run"] < s.get("eval_loss_init", math.nan)))
    return v


def render(s):
    b = s["budgets_per_rank"]
    t = s["times_s"]
    ck = s["checkpoint"][0] if s["checkpoint"] else None
    rs = s["resume"][0] if s["resume"] else None
    lines = [
        f"| rung {s['rung']} | |",
        "|---|---|",
        f"| parameters | {s['params'] / 1e6:,.0f} M, {s['ranks']} rank(s), micro-batch {s['micro_batch']} |",
        f"| training states vs RAM | {s['states_bytes'] / GB:.1f} GB vs {s['ram_bytes'] / GB:.1f} GB ({s['states_over_ram']:.2f}x) |",
        f"| budgets per rank (device simulated / host / NVMe) | {mib(b['device'])} / {mib(b['host'])} / "
        f"{mib(b['nvme']) if b['nvme'] is not None else 'auto'} |",
        f"| placed per rank (device / host / NVMe) | {mib(s['placed_per_rank']['gpu_bytes'])} / "
        f"{mib(s['placed_per_rank']['cpu_bytes'])} / {mib(s['placed_per_rank']['nvme_bytes'])} |",
        f"| peak RSS per rank, training (loading) | {', '.join(mib(x) for x in s['peak_rss_per_rank'])} "
        f"({', '.join(mib(x) for x in s['setup_peak_rss_per_rank'])})"
        + (f"; host budget + overhead {mib(b['host'] + s['host_overhead_per_rank'])}" if s["host_overhead_per_rank"] is not None else "")
        + " |",
        f"| step time measured / predicted | {s['step_time_s']:.2f} s / {s['predicted_step_time_s']:.2f} s "
        f"({100 * (s['prediction_error'] or 0):+.1f} %) |",
        f"| lanes measured (last step) | " + ", ".join(f"{k} {v:.2f}" for k, v in s["lanes_s"].items()) + " s |",
        f"| lanes predicted | " + ", ".join(f"{k} {v:.2f}" for k, v in s["predicted_lanes_s"].items()) + " s |",
        f"| overlap efficiency (median, min) | {s['overlap_median']:.3f}, {s['overlap_min']:.3f} |",
        f"| NVMe read a step per rank / placed | {', '.join(mib(x) for x in s['nvme_read_per_rank'])} / "
        f"{mib(s['nvme_placed_per_rank'])} ({s['nvme_read_over_placed']:.3f}x) |",
        f"| allocations after warm-up | {s['allocations_after_warmup']:.0f} |",
        f"| init (write-init, {len(s['init_shards'])} shards) | {t.get('init_s', 0):.0f} s; "
        + ", ".join(f"{n} {v / GB:.2f} GB" for n, v in s["init_shards"].items()) + " |",
        f"| run A / export / evaluate | {t.get('a_s', 0):.0f} s / {t.get('export_s', 0):.0f} s / {t.get('evaluate_s', 0):.0f} s |",
        f"| checkpoint (B) | " + (f"{ck[0]:.2f} GB in {ck[1]:.1f} s, {ck[2]:.2f} GB/s" if ck else "none") +
        f"; disk probe write {s['disk_gbps']['write']:.2f} GB/s |",
        f"| SIGTERM to exit (B) | {t.get('b_stop_s', 0):.1f} s, exit {s['b_exit']:.0f} |",
        f"| resume (B2) | " + (f"{rs[0]:.2f} GB in {rs[1]:.1f} s, {rs[2]:.2f} GB/s" if rs else "none") +
        f"; disk probe read {s['disk_gbps']['read']:.2f} GB/s |",
        f"| training loss first -> last | {s['loss_first']:.4f} -> {s['loss_last']:.4f} |",
        f"| validation loss, initial weights -> run A's last step | {s.get('eval_loss_init', math.nan):.4f} -> "
        f"{s['eval_loss_run'] if s['eval_loss_run'] is not None else math.nan:.4f} |",
        f"| resumed losses = uninterrupted | {'bit for bit' if s['resume_bitwise'] else 'DIFFER'} (steps {s['resume_steps']}) |",
        f"| exported weights' eval loss = run's | {'bit for bit' if s['export_bitwise'] else 'DIFFER'} "
        f"({s['eval_loss_export']!r} vs {s['eval_loss_run']!r}) |",
    ]
    for name, ok in verdicts(s):
        lines.append(f"| check: {name} | {'yes' if ok else '**no**'} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) == 3 and argv[1] == "--table":
        for d in sorted(Path(argv[2]).glob("rung*/summary.json")):
            print(render(json.loads(d.read_text())))
            print()
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    print(render(summarise(argv[1], int(argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
