"""Writes one benchmark's results file (bench/results/<name>.json) from a run's own numbers.

A benchmark script's Python part (run from the repository root) does

  sys.path.insert(0, "bench"); import results_file as rf
  rf.write("arch_cost", commands=[...], rounds="...", tables=[...], notes=[...])

The results file already there (RESULTS_DIR's, else bench/results') supplies the
title, order, about and notes that the call does not give; commands, rounds and
tables are the call's; machine (this machine, from /proc and nvidia-smi), date
(today) and commit ("build of <HEAD>", "(dirty)" when tracked files outside
bench/results and docs/benchmarks.md differ from it) are measured here unless
given. The file is checked as bench/render_benchmarks.py reads it, then
written with indent 1 and a trailing newline. RESULTS_DIR (environment;
default bench/results) is the folder written.
"""
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "bench"))
import render_benchmarks  # noqa: E402  (its load() is the file's format)

NO_GPU = "no GPU (device tier simulated in host memory)"


def results_dir():
    return pathlib.Path(os.environ.get("RESULTS_DIR") or DEFAULT_DIR)


def existing(name):
    """The results file now in RESULTS_DIR (else bench/results) as a dict; {} when there is none."""
    for d in (results_dir(), DEFAULT_DIR):
        path = d / f"{name}.json"
        if path.exists():
            return json.loads(path.read_text())
    return {}


def _run(args):
    try:
        return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine():
    """"2 vCPUs (AMD EPYC), 23.5 GiB RAM, no GPU (...)": /proc/cpuinfo, MemTotal, nvidia-smi's GPUs."""
    cpus, model, virtual = 0, "", False
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "processor":
                cpus += 1
            elif key == "model name" and not model:
                model = value.strip()
            elif key == "flags" and " hypervisor" in value:
                virtual = True
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    gpu = NO_GPU
    if shutil.which("nvidia-smi"):
        names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        if names:
            lines = names.splitlines()
            gpu = ", ".join(f"{lines.count(n)}x {n}" for n in dict.fromkeys(lines))
    cpu = f"{cpus} {'vCPUs' if virtual else 'CPUs'}" + (f" ({model})" if model else "")
    return f"{cpu}, {mem_kib / 2**20:.1f} GiB RAM, {gpu}"


def commit():
    head = _run(["git", "rev-parse", "--short", "HEAD"])
    if not head:
        return "build of an unknown commit"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                  ":(exclude)bench/results", ":(exclude)docs/benchmarks.md"])
    return f"build of {head}" + (" (dirty)" if dirty else "")


def write(name, *, commands, rounds, tables, **fields):
    """Writes RESULTS_DIR/<name>.json; `fields` (title, order, about, notes, machine, date, commit)
    replace the kept or measured ones (notes=[] drops the notes). Returns the path written."""
    old = existing(name)
    data = {"title": old.get("title"), "order": old.get("order"), "commands": commands, "machine": None,
            "date": None, "commit": None, "rounds": rounds, "about": old.get("about"), "tables": tables,
            "notes": old.get("notes")}
    unknown = set(fields) - set(data)
    if unknown:
        raise TypeError(f"results_file.write: unknown fields {sorted(unknown)}")
    data.update(fields)
    data["machine"] = data["machine"] or machine()
    data["date"] = data["date"] or datetime.date.today().isoformat()
    data["commit"] = data["commit"] or commit()
    if not data["notes"]:
        del data["notes"]
    out = results_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    tmp = out / f".{name}.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    try:
        render_benchmarks.load(tmp)  # the renderer's checks: every key there, every row as wide as its columns
    except render_benchmarks.BadResults as e:
        tmp.unlink()
        sys.exit(f"results_file: {name}: {e}")
    tmp.replace(path)
    print(f"wrote {path}", file=sys.stderr)
    return path


# Cells.
def span(values, fmt="{:.1f}", unit=""):
    """'min-max unit' of `values`; one number when they are all equal."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return (lo if lo == hi else f"{lo}-{hi}") + unit


def plural(n, word):
    """'1 round', '3 rounds'."""
    return f"{n} {word}" + ("" if n == 1 else "s")

