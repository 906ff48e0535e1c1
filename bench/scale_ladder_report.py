#!/usr/bin/env python3
"""The scale ladder's report (bench/scale_ladder.sh), from the files a rung kept
(WORK/results/roundK/rungN): what the plan chose, what the run measured, and
every bound the ladder checks.

  scale_ladder_report.py RUNG_DIR RUNG
      prints the rung's table (markdown) and writes RUNG_DIR/summary.json
  scale_ladder_report.py --table ROUND_DIR
      prints the table of every rung in ROUND_DIR (one run of the ladder)
  scale_ladder_report.py --overlap RUNG_DIR RUNG "ORDER"
      prints the table of run A with the optimizer lane and without
      (scale_ladder.sh --overlap-ab: RUNG_DIR/A-on, RUNG_DIR/A-off, run in ORDER)
  scale_ladder_report.py --json [--rungs 3,1,2] ROUND_DIR...
      writes $RESULTS_DIR/scale_ladder.json (default bench/results) through
      bench/results_file.py: one table a rung, in --rungs order (default: every
      rungN folder of the first ROUND_DIR, by number); each ROUND_DIR is one run
      (round) of the ladder and must hold every rung listed. A cell gives round
      1's figures and, after them, each later round's that moved. The file
      describes these rungs only: a note names them unless they are 1, 2 and 3.
      Reads the rungs' raw files (never their summary.json) and writes nothing
      under ROUND_DIR.

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
ALL_RUNGS = [1, 2, 3]
COVERAGE = "This file covers rung"  # how the note naming a partial run's rungs begins


def load_jsonl(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def resolved(path):
    """cache.*_budget (bytes) and train.micro_batch, global_batch, steps, eval_sequences and
    model.seq_len from job.resolved.yaml; None where a key is not an integer there."""
    text = Path(path).read_text()
    out = {}
    for key in ("device_budget", "host_budget", "nvme_budget", "micro_batch", "global_batch", "steps",
                "eval_sequences", "seq_len"):
        m = re.search(rf"^\s+{key}:\s*(\d+)\b", text, re.M)
        out[key] = int(m.group(1)) if m else None
    return out


def log_transfers(logs, what):
    """[(step, GB, s, GB/s)] of each 'checkpoint: step N ...' or 'resumed at step N ...' line of rank 0."""
    found = []
    for f in sorted(Path(logs).glob("rank-0.out")):
        for line in f.read_text().splitlines():
            m = re.search(rf"{what} (\d+)\b.*\(([\d.]+) GB in ([\d.]+) s, ([\d.]+) GB/s\)", line)
            if m:
                found.append((int(m.group(1)), *(float(x) for x in m.groups()[1:])))
    return found


def nvme_file(logs):
    """The NVMe tier's file as rank 0's worker states it ('24.8 GiB'); None without one."""
    for f in sorted(Path(logs).glob("rank-0.out")):
        m = re.search(r"\bfile ([\d.]+ [KMGT]?i?B)\b", f.read_text())
        if m:
            return m.group(1)
    return None


def times(path):
    t = {}
    for line in Path(path).read_text().splitlines():
        k, _, v = line.partition("=")
        t[k] = float(v)
    return t


def summarise(res, rung):
    """The figures of one rung's results folder (the files bench/scale_ladder.sh keeps) as a dict;
    reads only, writes nothing."""
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
    job = resolved(a / "job.resolved.yaml")
    warm = report["measured"].get("warmup_steps", 1)
    steady = [m for m in metrics if m["step"] >= warm]
    pr = [m["per_rank"] for m in metrics]
    peak_rss = [max(p["peak_rss_bytes"][r] for p in pr) for r in range(ranks)]
    setup_rss = [max(p["setup_peak_rss_bytes"][r] for p in pr) for r in range(ranks)]
    nvme_read = [statistics.median(m["per_rank"]["bytes_nvme_read"][r] for m in steady) for r in range(ranks)]
    placed = local["per_rank"]["nvme_bytes"]
    overlap = [m["overlap_efficiency"] for m in steady]
    t = times(res / "times.env")
    disk = machine["probes"]["disk"]
    b_run = json.loads((res / "B" / "run.json").read_text()) if (res / "B" / "run.json").exists() else {}

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
    shards = [l.split() for l in (res / "init.ls").read_text().splitlines() if l.endswith(".safetensors")]
    init_shards = {l[-1]: int(l[4]) for l in shards}
    params = plan["model"]["params"]
    return {
        "rung": rung,
        "params": params,
        "ranks": ranks,
        "micro_batch": job["micro_batch"],
        "global_batch": job["global_batch"],
        "seq_len": job["seq_len"],
        "steps": job["steps"],
        "eval_sequences": job["eval_sequences"],
        "device_simulated": local.get("gpu") == "simulated",
        "probes_cached": bool(machine["probes"].get("cached")),
        "states_bytes": states,
        "ram_bytes": ram,
        "states_over_ram": states / ram,
        "budgets_per_rank": {"device": job["device_budget"] or 0, "host": job["host_budget"] or 0,
                             "nvme": job["nvme_budget"]},
        "placed_per_rank": {k: local["per_rank"][k] for k in ("gpu_bytes", "cpu_bytes", "nvme_bytes")},
        "nvme_file": nvme_file(a / "logs"),
        "nvme_peak_bytes": report["measured"].get("peak_bytes", {}).get("nvme", 0),
        "peak_rss_per_rank": peak_rss,
        "setup_peak_rss_per_rank": setup_rss,
        "host_overhead_per_rank": local["per_rank"].get("host_overhead_bytes"),
        "allocations_after_warmup": sum(m["allocations_after_warmup"] for m in metrics),
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
        "checkpoint": log_transfers(res / "B" / "logs", "checkpoint: step"),
        "resume": log_transfers(res / "B2" / "logs", "resumed at step"),
        "b_steps_done": b_run.get("steps_done"),
        "init_shards": init_shards,
        "init_bytes_per_param": sum(init_shards.values()) / params,
        "losses": sorted(la.items()),
        "loss_first": metrics[0]["loss"],
        "loss_last": metrics[-1]["loss"],
        "resume_bitwise": resume_bitwise,
        "resume_steps": sorted(lb2),
        "b_exit": t.get("b_exit"),
        "eval_loss_run": eval_a[-1] if eval_a else None,
        "eval_loss_export": eval_export,
        "eval_loss_init": eval_init,
        "export_bitwise": bool(eval_a) and eval_export == eval_a[-1],
    }


def verdicts(s):
    """[(check, holds, the figure it judged)] of one rung's summary."""
    v = []
    if s["host_overhead_per_rank"] is not None:
        bound = s["budgets_per_rank"]["host"] + s["host_overhead_per_rank"]
        v.append(("peak RSS <= host budget + overhead", max(s["peak_rss_per_rank"]) <= bound,
                  mib(max(s["peak_rss_per_rank"]))))
        v.append(("loading peak RSS <= host budget + overhead", max(s["setup_peak_rss_per_rank"]) <= bound,
                  mib(max(s["setup_peak_rss_per_rank"]))))
    v.append(("no allocation after warm-up", s["allocations_after_warmup"] == 0, f"{s['allocations_after_warmup']:.0f}"))
    if s["nvme_placed_per_rank"]:
        v.append(("NVMe read <= 1.05x placed", s["nvme_read_over_placed"] <= 1.05, f"{s['nvme_read_over_placed']:.3f}x"))
    v.append(("overlap >= 0.85", s["overlap_min"] >= 0.85, f"min {s['overlap_min']:.3f}"))
    err = s["prediction_error"]
    v.append(("step within 15 % of the prediction", err is not None and abs(err) <= 0.15,
              "no prediction" if err is None else f"{100 * err:+.1f} %"))
    v.append(("resume bit for bit", s["resume_bitwise"], "differ"))
    v.append(("export bit for bit", s["export_bitwise"], "differ"))
    init, run = s.get("eval_loss_init", math.nan), s["eval_loss_run"]
    v.append(("validation loss falls from the initial weights'", run is not None and run < init,
              f"{init:.4f} -> {run if run is not None else math.nan:.4f}"))
    return v


# Cells.
def mib(b):
    return f"{b / 2**20:,.0f} MiB"


def each(values, fmt=mib):
    return ", ".join(fmt(x) for x in values)


def lanes(d):
    """'compute 44.29, h2d 2.85, NVMe read 4.68 s': the lanes that were busy (>= 0.005 s)."""
    names = {"nvme": "NVMe", "nvme_read": "NVMe read", "nvme_write": "NVMe write"}
    busy = [f"{names.get(k, k)} {v:.2f}" for k, v in d.items() if round(v, 2) > 0]
    return (", ".join(busy) + " s") if busy else "none busy"


def steps_span(steps):
    """'4-7' for a run of consecutive steps, else '4, 6'."""
    if steps and steps == list(range(steps[0], steps[-1] + 1)) and len(steps) > 1:
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(str(x) for x in steps) or "none"


def transfer(t):
    return f"step {t[0]}: {t[1]:.2f} GB in {t[2]:.1f} s, {t[3]:.2f} GB/s"


def rows(s):
    """[(label, [part, ...])]: the rung's figures as table rows, each cell in parts that
    combine() compares between rounds. Rows a rung has nothing for (no NVMe) are left out."""
    b, p, t = s["budgets_per_rank"], s["placed_per_rank"], s["times_s"]
    dev = "device simulated" if s["device_simulated"] else "device"
    out = [
        ("parameters", [f"{s['params'] / 1e6:,.0f} M, {s['ranks']} rank{'s' * (s['ranks'] != 1)}, micro-batch "
                        f"{s['micro_batch']} ({s['global_batch']} sequences of {s['seq_len']} tokens a step)"]),
        ("training states vs RAM", [f"{s['states_bytes'] / GB:.1f} GB vs {s['ram_bytes'] / GB:.1f} GB "
                                    f"({s['states_over_ram']:.2f}x)"]),
        (f"budgets per rank ({dev} / host / NVMe)",
         [f"{mib(b['device'])} / {mib(b['host'])} / {mib(b['nvme']) if b['nvme'] is not None else 'auto'}"]),
        ("placed per rank (device / host / NVMe)",
         [f"{mib(p['gpu_bytes'])} / {mib(p['cpu_bytes'])} / {mib(p['nvme_bytes'])}"]),
    ]
    if s["nvme_file"]:
        out.append(("NVMe file / its extents in use at the peak",
                    [f"{s['nvme_file']} / {s['nvme_peak_bytes'] / GIB:.3g} GiB"]))
    rss = [f"{each(s['peak_rss_per_rank'])} ({each(s['setup_peak_rss_per_rank'])})"]
    if s["host_overhead_per_rank"] is not None:
        rss.append(f"host budget + overhead {mib(b['host'] + s['host_overhead_per_rank'])}")
    out += [
        ("peak RSS per rank, training (loading)", rss),
        ("step time measured / predicted", [f"{s['step_time_s']:.2f} s / {s['predicted_step_time_s']:.2f} s "
                                            f"({100 * (s['prediction_error'] or 0):+.1f} %)"]),
        ("lanes measured (last step)", [lanes(s["lanes_s"])]),
        ("lanes predicted", [lanes(s["predicted_lanes_s"])]),
        ("overlap efficiency (median, min)", [f"{s['overlap_median']:.3f}, {s['overlap_min']:.3f}"]),
    ]
    if s["nvme_placed_per_rank"]:
        out.append(("NVMe read a step per rank / placed", [f"{each(s['nvme_read_per_rank'])} / "
                    f"{mib(s['nvme_placed_per_rank'])} ({s['nvme_read_over_placed']:.3f}x)"]))
    dtype = {2: "bf16", 4: "fp32"}.get(round(s["init_bytes_per_param"]), f"{s['init_bytes_per_param']:.1f} bytes a parameter")
    out += [
        ("allocations after warm-up", [f"{s['allocations_after_warmup']:.0f}"]),
        (f"init (write-init, {len(s['init_shards'])} shards)",
         [f"{t.get('init_s', 0):.0f} s", f"{each(s['init_shards'].values(), lambda v: f'{v / GB:.2f}')} GB ({dtype})"]),
        ("run A / export / evaluate", [f"{t.get('a_s', 0):.0f} s / {t.get('export_s', 0):.0f} s / "
                                       f"{t.get('evaluate_s', 0):.0f} s"]),
        ("checkpoints (B)", ([transfer(c) for c in s["checkpoint"]] or ["none"])
         + [f"disk probe write {s['disk_gbps']['write']:.2f} GB/s"]),
        ("SIGTERM to exit (B)", [f"{t.get('b_stop_s', 0):.1f} s, exit {s['b_exit']:.0f}"]
         + ([f"stopped after step {s['b_steps_done']}"] if s["b_steps_done"] is not None else [])),
        ("resume (B2)", ([transfer(r) for r in s["resume"]] or ["none"])
         + [f"disk probe read {s['disk_gbps']['read']:.2f} GB/s"]),
        ("training loss first -> last", [f"{s['loss_first']:.4f} -> {s['loss_last']:.4f}"]),
        ("validation loss, initial weights -> run A's last step",
         [f"{s.get('eval_loss_init', math.nan):.4f} -> "
          f"{s['eval_loss_run'] if s['eval_loss_run'] is not None else math.nan:.4f} "
          f"({s['eval_sequences']} held-out windows)"]),
        ("resumed losses = uninterrupted", [f"{'bit for bit' if s['resume_bitwise'] else '**differ**'} "
                                            f"(steps {steps_span(s['resume_steps'])})"]),
        ("exported weights' eval loss = run's", [f"bit for bit ({s['eval_loss_run']!r})" if s["export_bitwise"] else
                                                 f"**differ** ({s['eval_loss_export']!r} vs {s['eval_loss_run']!r})"]),
    ]
    failed = [f"{name} (**{figure}**)" for name, ok, figure in verdicts(s) if not ok]
    out.append(("checks", [f"every bound but {'; '.join(failed)}" if failed else
                           "every bound holds: " + "; ".join(name for name, _, _ in verdicts(s))]))
    return out


def render(s):
    """The rung's markdown table: its rows, the checks one a line."""
    lines = [f"| rung {s['rung']} | |", "|---|---|"]
    lines += [f"| {label} | {'; '.join(parts)} |" for label, parts in rows(s) if label != "checks"]
    lines += [f"| check: {name} | {'yes' if ok else '**no** (' + figure + ')'} |" for name, ok, figure in verdicts(s)]
    return "\n".join(lines)


def combine(per_round):
    """One cell from each round's parts: round 1's parts, then for each later round whose parts
    differ 'run K: ' and the parts that moved (by position); a missing row is 'none'."""
    first = per_round[0] or ["none"]
    cell = "; ".join(first)
    for k, parts in enumerate(per_round[1:], start=2):
        parts = parts or ["none"]
        moved = [x for i, x in enumerate(parts) if i >= len(first) or x != first[i]]
        if moved:
            cell += f"; run {k}: " + "; ".join(moved)
    return cell


def rung_table(summaries):
    """{columns, rows} of one rung from its summary in each round."""
    by_round = [dict(rows(s)) for s in summaries]
    labels = list(by_round[0])
    for r in by_round[1:]:
        labels += [label for label in r if label not in labels]
    out = [[label, combine([r.get(label) for r in by_round])] for label in labels]
    if len(summaries) > 1:  # before the checks row, the last
        differ = [str(k) for k, s in enumerate(summaries[1:], start=2) if s["losses"] != summaries[0]["losses"]]
        out.insert(len(out) - 1, ["training losses, every run = run 1's", "bit for bit, every step" if not differ
                                  else f"**differ** in run {', '.join(differ)}"])
    return {"columns": [f"rung {summaries[0]['rung']}", ""], "rows": out}


def write_json(round_dirs, rungs):
    """Writes the ladder's results file from the rounds' rung folders; exits 2 naming a
    rung folder that a round lacks."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import results_file as rf

    summaries = {}
    for r in rungs:
        for d in round_dirs:
            if not (Path(d) / f"rung{r}" / "A" / "report.json").exists():
                print(f"scale_ladder_report: {d}/rung{r}: no finished rung (A/report.json) there", file=sys.stderr)
                sys.exit(2)
        summaries[r] = [summarise(Path(d) / f"rung{r}", r) for d in round_dirs]
    n = len(round_dirs)
    first = [s[0] for s in summaries.values()]
    steps = sorted({s["steps"] for ss in summaries.values() for s in ss})
    cached = [str(r) for r, ss in summaries.items() if any(s["probes_cached"] for s in ss)]  # run A's probes
    rounds = (f"{rf.plural(n, 'run')} of every phase of each rung, {'/'.join(map(str, steps))} steps a run, "
              + ("run A of each probing the machine afresh" if not cached else
                 f"run A of rung {', '.join(cached)} on probes cached by an earlier run")
              + "; a cell gives the first run's figures"
              + ("; where a later run's moved, they follow as \"run K: ...\"" if n > 1 else "")
              + ". The predictions are the resource model's from each run's own probes, as its report.json gives "
                "them (`tencache-launch report DIR` rebuilds them from the run folder's `machine.json`).")
    notes = [x for x in (rf.existing("scale_ladder").get("notes") or []) if not x.startswith(COVERAGE)]
    if sorted(rungs) != ALL_RUNGS:
        notes.insert(0, f"{COVERAGE}{'s' * (len(rungs) > 1)} {', '.join(map(str, rungs))} only "
                        f"(`--rungs {','.join(map(str, rungs))}`): the ladder's other rungs did not run; the "
                        "paragraphs above and the notes below may describe them.")
    command = (f"bench/scale_ladder.sh --rungs {','.join(map(str, rungs))} --steps {first[0]['steps']}"
               + (f" --rounds {n}" if n > 1 else "") + "   # results in "
               + ", ".join(f"{Path(d).resolve()}/rungN/" for d in round_dirs))
    rf.write("scale_ladder", commands=[command], rounds=rounds,
             tables=[rung_table(summaries[r]) for r in rungs], notes=notes)


def rung_numbers(round_dir):
    """The numbers of the rungN folders in round_dir that hold a finished run A, in order."""
    found = [p for p in Path(round_dir).glob("rung*") if p.name[4:].isdigit() and (p / "A" / "report.json").exists()]
    return sorted(int(p.name[4:]) for p in found)


def overlap_ab(res, rung, order):
    """Run A with the optimizer lane (RES/A-on) and without (RES/A-off) as a markdown table: each
    run's steps after its report's warm-up, their median (range)."""
    def run(mode):
        d = Path(res) / f"A-{mode}"
        report = json.loads((d / "report.json").read_text())
        warm = report["measured"].get("warmup_steps", 1)
        metrics = load_jsonl(d / "metrics.jsonl")
        steady = [m for m in metrics if m["step"] >= warm]
        def spread(key, scale=1.0):
            v = [m[key] * scale for m in steady]
            return statistics.median(v), min(v), max(v)
        return {"steps": len(steady), "step": spread("step_time_s"), "wait": spread("optimizer_wait_s"),
                "nvme": statistics.median(m["bytes_nvme_read"] for m in steady) / GIB,
                "yields": sum(m.get("lane_yields", 0) for m in metrics),
                "fallbacks": sum(m.get("lane_fallbacks", 0) for m in metrics)}
    on, off = run("on"), run("off")
    def cell(v):
        return f"{v[0]:.2f} s ({v[1]:.2f} .. {v[2]:.2f})"
    lines = [f"rung {rung}, runs in the order {order}: the median (range) of {on['steps']} / {off['steps']} steps "
             "after warm-up",
             "| optimizer_overlap | step | optimizer time | NVMe read a step | lane yields / fallbacks |",
             "|---|---|---|---|---|"]
    for name, r in (("on", on), ("off", off)):
        lines.append(f"| {name} | {cell(r['step'])} | {cell(r['wait'])} | {r['nvme']:.2f} GiB | "
                     f"{r['yields']} / {r['fallbacks']} |")
    lines.append(f"off / on: {off['step'][0] / on['step'][0]:.3f}x step time; optimizer time "
                 f"{on['wait'][0]:.2f} s against {off['wait'][0]:.2f} s")
    return "\n".join(lines)


def main(argv):
    args = argv[1:]
    if len(args) == 4 and args[0] == "--overlap":
        print(overlap_ab(args[1], args[2], args[3]))
        return 0
    if len(args) == 2 and args[0] == "--table":
        for r in rung_numbers(args[1]):
            print(render(summarise(Path(args[1]) / f"rung{r}", r)))
            print()
        return 0
    if args and args[0] == "--json":
        args = args[1:]
        rungs = None
        if len(args) >= 2 and args[0] == "--rungs":
            rungs, args = args[1], args[2:]
            if not re.fullmatch(r"[123](,[123])*", rungs):
                print(f"scale_ladder_report: --rungs '{rungs}': expected a list of 1, 2 and 3", file=sys.stderr)
                return 2
            rungs = list(dict.fromkeys(int(x) for x in rungs.split(",")))
        if not args:
            print(__doc__, file=sys.stderr)
            return 2
        if rungs is None:
            rungs = rung_numbers(args[0])
        if not rungs:
            print(f"scale_ladder_report: no rungN folder in {args[0]}", file=sys.stderr)
            return 2
        write_json(args, rungs)
        return 0
    if len(args) != 2 or not args[1].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    s = summarise(args[0], int(args[1]))
    (Path(args[0]) / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    print(render(s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
