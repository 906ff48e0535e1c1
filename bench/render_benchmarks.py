#!/usr/bin/env python3
"""Writes docs/benchmarks.md from the current results in bench/results/*.json.

  render_benchmarks.py            rewrite docs/benchmarks.md
  render_benchmarks.py --check    exit 1 if docs/benchmarks.md differs from what this would write
  render_benchmarks.py --output F write to F instead

A results file holds one benchmark's latest measurement. A benchmark with a
script (bench/<name>.sh: arch_cost, cache, clip_cost, launch_prediction,
multinode_prediction, recovery, scale_ladder, sim_vs_worker, train, train_vs_base,
zero_infinity_sim) has it written by that script from the run's own numbers, through
bench/results_file.py (RESULTS_DIR=DIR writes elsewhere, for a smoke run);
the others are edited by hand. Its keys:
  title, order (position in the doc), commands (list), machine, date, commit
  (the build measured, or the commit that recorded the figures), rounds (how
  many runs/rounds and which figure a cell gives), about (paragraphs: what is
  measured, what a ratio means), tables, notes (known limits; optional).
A table is {caption?, columns, rows} with cells as strings, or one of two
tables built from the benchmark's own JSON output:
  {"nvme_runs": [...]}  each item what `tencache-bench nvme --json` prints
                        (plus "run"): a cell is the median (min-max over the
                        rounds_* lists, where present)
  {"adamw_runs": [...]} each item what `tencache-bench adamw --json` prints
                        (plus "variant" and "run")
so a rerun's JSON can be pasted in as it is. A malformed file is named with the
key at fault, exit 2.
"""
import argparse
import difflib
import json
import pathlib
import statistics
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"

HEADER = """# Benchmarks

The current result of every benchmark: its command, the machine and build it ran
on, and the spread over its rounds. This file is generated from
`bench/results/<benchmark>.json`, which a benchmark's script (`bench/*.sh`)
writes from its run (the rest are edited by hand): rerun the script, then
`bench/render_benchmarks.py` (CTest's `docs_benchmarks_current` fails while the
two differ). Earlier measurements are in git history. The machines are small
cloud VMs (2 vCPUs, no GPU unless said) whose disks and memory bandwidth drift
by tens of percent between rounds: rerun a command on your machine before
quoting a figure.
"""

REQUIRED = {"title": str, "order": int, "commands": list, "machine": str, "date": str,
            "commit": str, "rounds": str, "about": list, "tables": list}


class BadResults(Exception):
    pass


def load(path):
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BadResults(f"{path}: not JSON: {e}")
    if not isinstance(data, dict):
        raise BadResults(f"{path}: expected a JSON object at the top")
    for key, kind in REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise BadResults(f"{path}: key '{key}' missing or not a {kind.__name__}")
    for i, table in enumerate(data["tables"]):
        where = f"{path}: tables[{i}]"
        if not isinstance(table, dict):
            raise BadResults(f"{where}: expected an object")
        if "nvme_runs" in table or "adamw_runs" in table:
            continue
        columns, rows = table.get("columns"), table.get("rows")
        if not isinstance(columns, list) or not isinstance(rows, list):
            raise BadResults(f"{where}: expected 'columns' and 'rows' lists (or 'nvme_runs' / 'adamw_runs')")
        for j, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(columns):
                raise BadResults(f"{where}.rows[{j}]: expected {len(columns)} cells, got {row!r}")
    return data


def markdown_table(columns, rows):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


NVME_CONTENDERS = [  # label, key of the median (write; "write"->"read" for reads), key of the rounds
    ("NvmeTier, checksums on (the cache's setting)", "write_gbps", "rounds_write_gbps"),
    ("NvmeTier, checksums off", "write_gbps_no_checksum", "rounds_write_gbps_no_checksum"),
    ("NvmeTier, checksums on, 4 KiB pages", "write_gbps_4k_pages", "rounds_write_gbps_4k_pages"),
    ("fio io_uring", "fio_write_gbps", "rounds_fio_write_gbps"),
    ("DeepSpeed libaio (4 KiB pages, as users run it)", "deepspeed_write_gbps", "rounds_deepspeed_write_gbps"),
    ("DeepSpeed libaio given huge pages", "deepspeed_huge_pages_write_gbps",
     "rounds_deepspeed_huge_pages_write_gbps"),
]
NVME_RATIOS = [
    ("**checksums on / fio**", "write_ratio"),
    ("**checksums on / DeepSpeed**", "write_ratio_deepspeed"),
    ("checksums on / DeepSpeed given huge pages", "write_ratio_deepspeed_huge_pages"),
]


def nvme_cell(run, median_key, rounds_key):
    rounds = run.get(rounds_key) or []
    if rounds:
        return f"{statistics.median(rounds):.3f} ({min(rounds):.3f}-{max(rounds):.3f})"
    median = run.get(median_key)
    return "" if median is None else f"{median:.3f}"


def nvme_table(runs):
    columns = ["GB/s, median (min-max) of the rounds"]
    for run in runs:
        columns += [f"run {run['run']} write", f"run {run['run']} read"]
    rows = []
    for label, median_key, rounds_key in NVME_CONTENDERS:
        row = [label]
        for run in runs:
            row.append(nvme_cell(run, median_key, rounds_key))
            row.append(nvme_cell(run, median_key.replace("write", "read"), rounds_key.replace("write", "read")))
        rows.append(row)
    for label, key in NVME_RATIOS:
        row = [label]
        for run in runs:
            for k in (key, key.replace("write", "read")):
                row.append("" if run.get(k) is None else f"**{run[k]:.2f}**" if label.startswith("**")
                           else f"{run[k]:.2f}")
        rows.append(row)
    return markdown_table(columns, rows)


def adamw_table(runs):
    columns = ["variant", "run", "AdamW GB/s (median)", "copy GB/s", "torch GB/s", "AdamW / copy median (min-max)"]
    rows = []
    for run in runs:
        torch = run.get("torch_gbps")
        ratio = run["adamw_over_copy"]
        rows.append([run["variant"], str(run["run"]), f"{run['adamw_gbps']['median']:.2f}",
                     f"{run['copy_gbps']['median']:.2f}", f"{torch['median']:.2f}" if torch else "",
                     f"**{ratio['median']:.3f}** ({ratio['min']:.3f}-{ratio['max']:.3f})"])
    return markdown_table(columns, rows)


def render_table(table):
    if "nvme_runs" in table:
        body = nvme_table(table["nvme_runs"])
    elif "adamw_runs" in table:
        body = adamw_table(table["adamw_runs"])
    else:
        body = markdown_table(table["columns"], table["rows"])
    caption = table.get("caption")
    return (caption + "\n\n" + body) if caption else body


def wrap(text, indent=""):
    return textwrap.fill(text, width=100, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def render_benchmark(b):
    parts = [f"## {b['title']}"]
    parts += [wrap(p) for p in b["about"]]
    parts.append("```\n" + "\n".join(b["commands"]) + "\n```")
    parts.append(wrap(f"**Measured** {b['date']}, {b['commit']}. **Machine:** {b['machine']}. "
                      f"**Rounds:** {b['rounds']}"))
    parts += [render_table(t) for t in b["tables"]]
    if b.get("notes"):
        parts.append("\n".join(wrap(f"- {n}", "  ") for n in b["notes"]))
    return "\n\n".join(p for p in parts if p)


def render(results_dir):
    benches = [load(p) for p in sorted(results_dir.glob("*.json"))]
    benches.sort(key=lambda b: b["order"])
    return HEADER + "".join("\n" + render_benchmark(b) + "\n" for b in benches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with docs/benchmarks.md instead of writing it")
    ap.add_argument("--output", type=pathlib.Path, default=DOC, help="the file to write or check")
    ap.add_argument("--results", type=pathlib.Path, default=RESULTS, help="the folder of results files")
    args = ap.parse_args()
    try:
        text = render(args.results)
    except BadResults as e:
        print(f"render_benchmarks.py: {e}", file=sys.stderr)
        return 2
    if not args.check:
        args.output.write_text(text)
        return 0
    current = args.output.read_text() if args.output.exists() else ""
    if current == text:
        return 0
    diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(args.output), "rendered", lineterm="")
    print("\n".join(list(diff)[:60]), file=sys.stderr)
    print(f"render_benchmarks.py: {args.output} differs from bench/results/*.json; "
          "run bench/render_benchmarks.py and commit the result", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
