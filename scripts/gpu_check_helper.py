# gpu-check's helper: probes python's torch/NCCL, summarises metrics, builds the
# JSON report. Standard library only (python3 on both machines).
import datetime, glob, importlib.util, json, os, random, re, shlex, socket, statistics, sys

WORK = os.environ.get("GC_WORK", ".")
OUT = os.environ.get("GC_OUT", ".")
STEPS_DIR = os.path.join(WORK, "steps")
CTX = os.path.join(WORK, "context.json")
H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s (configs/instances/gpus.yaml)


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:
        return default


def dump(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def probe(out=None):
    r = {"python": sys.version.split()[0], "python_executable": sys.executable}
    try:
        import torch
        r["torch"] = torch.__version__
        r["torch_cuda_version"] = torch.version.cuda
        r["torch_cmake_prefix_path"] = torch.utils.cmake_prefix_path
        r["torch_lib"] = os.path.join(os.path.dirname(torch.__file__), "lib")
        r["torch_cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
        r["cuda_available"] = bool(torch.cuda.is_available())
        if r["cuda_available"]:
            r["device_count"] = torch.cuda.device_count()
            r["device_name"] = torch.cuda.get_device_name(0)
            r["device_capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
            r["device_memory_bytes"] = torch.cuda.get_device_properties(0).total_memory
    except Exception as e:  # no torch here, or a broken one
        r["torch_error"] = "%s: %s" % (type(e).__name__, e)
    for key, mod, header, libglob in (("nccl", "nvidia.nccl", "nccl.h", "libnccl.so*"),
                                      ("cudnn", "nvidia.cudnn", "cudnn.h", "libcudnn.so*")):
        try:
            spec = importlib.util.find_spec(mod)
            for loc in list(spec.submodule_search_locations or []) if spec else []:
                inc = os.path.join(loc, "include")
                libs = sorted(glob.glob(os.path.join(loc, "lib", libglob)), key=len)
                if os.path.exists(os.path.join(inc, header)) and libs:
                    r[key + "_root"] = loc
                    r[key + "_include"] = inc
                    r[key + "_library"] = libs[0]
                    break
        except Exception as e:
            r[key + "_error"] = "%s: %s" % (type(e).__name__, e)
    try:
        import transformers
        r["transformers"] = transformers.__version__
    except Exception as e:
        r["transformers_error"] = "%s: %s" % (type(e).__name__, e)
    if out:
        dump(out, r)
    print(json.dumps(r, indent=2))


def get(path, key):
    d = load(path, {}) or {}
    for part in key.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    if d is not None:
        print(json.dumps(d) if isinstance(d, (dict, list, bool)) else d)


def ctx(key, value):
    c = load(CTX, {}) or {}
    try:
        c[key] = json.loads(value)
    except ValueError:
        c[key] = value
    dump(CTX, c)


def step(name, rc, seconds, command, figures_file="", note=""):
    n = len(glob.glob(os.path.join(STEPS_DIR, "*.json")))
    rc = int(rc)
    s = {"name": name, "command": command, "exit_code": rc, "timed_out": rc in (124, 137),
         "seconds": round(float(seconds), 1), "ok": rc == 0}
    figs = load(figures_file) if figures_file else None
    if isinstance(figs, dict) and "ok" in figs:
        s["ok"] = s["ok"] and bool(figs.pop("ok"))
    if figs is not None:
        s["figures"] = figs
    if note:
        s["note"] = note
    dump(os.path.join(STEPS_DIR, "%02d-%s.json" % (n, name)), s)


def summarize(path, first=2):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    counted = [r for r in rows if r.get("step", 0) >= first]

    def vals(k):
        return [r[k] for r in counted if isinstance(r.get(k), (int, float))]

    def med(k):
        v = vals(k)
        return statistics.median(v) if v else None

    def mean(k):
        v = vals(k)
        return sum(v) / len(v) if v else None

    out = {"steps_run": len(rows), "steps_counted": len(counted), "counted_from_step": first,
           "median_step_time_s": med("step_time_s"), "median_tokens_per_s": med("tokens_per_s"),
           "mean_device_hit_rate": mean("device_hit_rate"), "median_stall_s": med("stall_s"),
           "mean_bytes_h2d": mean("bytes_h2d"), "mean_bytes_d2h": mean("bytes_d2h"),
           "max_device_used_bytes": max(vals("device_used_bytes"), default=None),
           "max_host_used_bytes": max(vals("host_used_bytes"), default=None),
           "step_time_s": [round(r.get("step_time_s", 0), 4) for r in rows],
           "loss": [round(r.get("loss", 0), 4) for r in rows]}
    for k in ("compute_dtype", "job_dtype"):
        if rows and k in rows[-1]:
            out[k] = rows[-1][k]
    return out


def run_figures(metrics, log, figures_out):
    f = summarize(metrics)
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    m = re.search(r"model \S+ \((\d+) parameters;", text)
    if m:
        f["params"] = int(m.group(1))
    m = re.search(r"trace: wrote (\S+); replay: (\S*tencache-sim) (.*?)(?: \(device_hit_rate|$)", text, re.M)
    if m:
        f["trace"] = m.group(1)
        f["replay"] = m.group(2) + " " + m.group(3)
    m = re.search(r"tencache-worker: (model .*)", text)
    if m:
        f["describe"] = m.group(1)[:600]
    f["ok"] = f["steps_counted"] >= 1
    dump(figures_out, f)


def simargs(replay, steps):
    args = shlex.split(replay)[1:]  # drop the program
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--policy", "--steps"):
            skip = True
            continue
        if a == "--json" or a.startswith("--policy=") or a.startswith("--steps="):
            continue
        out.append(a)
    out += ["--policy", "tencache", "--steps", str(steps), "--json"]
    sys.stdout.write("\0".join(out) + "\0")


def runline(fig):
    f = load(fig, {}) or {}

    def num(k, fmt):
        return fmt % f[k] if isinstance(f.get(k), (int, float)) else "?"
    print("%s of %s steps counted: median step %s s, %s tokens/s, mean device hit rate %s" % (
        f.get("steps_counted", 0), f.get("steps_run", 0), num("median_step_time_s", "%.3f"),
        num("median_tokens_per_s", "%.0f"), num("mean_device_hit_rate", "%.4f")))


def sim_figures(sim_json, measured, figures_out):
    d = load(sim_json, {}) or {}
    res = (d.get("results") or [{}])[0]
    f = {"predicted_device_hit_rate": res.get("device_hit_rate"), "sim_step_time_s": res.get("step_time_s"),
         "sim_stall_s": res.get("stall_s"), "sim_bytes_h2d": res.get("bytes_h2d")}
    try:
        f["measured_device_hit_rate"] = float(measured)
    except ValueError:
        f["measured_device_hit_rate"] = None
    f["ok"] = f["predicted_device_hit_rate"] is not None
    dump(figures_out, f)


def json_figures(src, figures_out):
    """A program's stdout that must be one JSON object: embedded as is, under "output"."""
    text = open(src, errors="replace").read().strip() if os.path.exists(src) else ""
    try:
        obj = json.loads(text)
        ok = isinstance(obj, dict)
    except ValueError:
        obj, ok = None, False
    f = {"ok": ok, "output": obj}
    if not ok:
        f["unparsed_stdout"] = text[-2000:]
    dump(figures_out, f)


def ctest_figures(log, figures_out):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    f = {}
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    if m:
        f["passed_percent"], f["failed"], f["total"] = int(m.group(1)), int(m.group(2)), int(m.group(3))
    f["failed_tests"] = re.findall(r"^\s*\d+ - (\S+) \((?:Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run)",
                                   text, re.M)
    f["skipped"] = len(re.findall(r"\*\*\*Skipped|Skipped\s", text))
    if "No tests were found" in text:
        f["note"] = "no test carries the label gpu"
    if f.get("total") and f["skipped"] >= f["total"]:
        f["ok"] = False
        f["note"] = "every gpu test skipped on a machine with a GPU"
    dump(figures_out, f)


def corpus(path, size):
    """A few MB of text, the same bytes every time: words of the machine's
    license texts (or a built-in list) in seeded random sentences."""
    size = int(size)
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    words = []
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        try:
            if os.path.isfile(p) and os.path.getsize(p) < 200000:
                words += re.findall(r"[A-Za-z][a-z']+", open(p, errors="replace").read())
        except OSError:
            pass
    if len(words) < 1000:
        words = ("the of and to a in that is for it as was with be by on not he this are or his from at which "
                 "but have an they you were her she there been one all we their has would when if so no what "
                 "up out who them some could into time than only other new years then two more these may "
                 "first any my now such like our over man me even most made after also did many before must "
                 "through back where much your way well down should because each just those people how too "
                 "little state good very make world still own see men work long get here between both life "
                 "being under never day same another know while last might us great old year off come since "
                 "against go came right used take three").split()
    rnd = random.Random(11)
    parts, n = [], 0
    while n < size:
        s = " ".join(rnd.choice(words) for _ in range(rnd.randint(6, 18)))
        s = s[0].upper() + s[1:] + rnd.choice(".....?!") + ("\n" if rnd.random() < 0.2 else " ")
        parts.append(s)
        n += len(s)
    data = "".join(parts).encode()[:size]
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def final(status):
    steps = [load(p) for p in sorted(glob.glob(os.path.join(STEPS_DIR, "*.json")))]
    steps = [s for s in steps if s]
    by = {s["name"]: s for s in steps}
    c = load(CTX, {}) or {}
    env = load(os.path.join(WORK, "env.json"), {}) or {}

    def fig(name, key):
        return ((by.get(name) or {}).get("figures") or {}).get(key)

    targets = {}
    res_t, bud_t = fig("run-resident", "median_step_time_s"), fig("run-budget", "median_step_time_s")
    zi_t = fig("run-budget-zero-infinity", "median_step_time_s")
    if res_t and bud_t:
        r = bud_t / res_t
        targets["budget_vs_resident_step_time"] = {
            "value": round(r, 4), "target": "<= 1.15", "pass": r <= 1.15,
            "what": "median step time (steps >= 2), device budget a third of the bf16 parameter bytes, "
                    "over fully resident"}
    if zi_t and bud_t:
        targets["zero_infinity_vs_tencache_step_time"] = {
            "value": round(zi_t / bud_t, 4), "target": None, "pass": None,
            "what": "median step time, the same budget: cache.policy zero-infinity over tencache (reported)"}
    params = fig("run-resident", "params") or c.get("params")
    tps = fig("run-resident", "median_tokens_per_s")
    if params and tps:
        targets["resident_mfu"] = {
            "value": round(6 * params * tps / H200_BF16_PEAK, 4), "target": None, "pass": None,
            "what": "6 x %d parameters x median tokens/s / 989e12 (H200 dense bf16 peak; reported)" % params}
    pred, meas = fig("sim-hit-rate", "predicted_device_hit_rate"), fig("sim-hit-rate", "measured_device_hit_rate")
    if pred is not None and meas is not None:
        d = abs(pred - meas)
        targets["device_hit_rate_vs_tencache_sim"] = {
            "value": round(d, 4), "measured": round(meas, 4), "predicted": round(pred, 4), "target": "<= 0.01",
            "pass": d <= 0.01,
            "what": "|measured mean device_hit_rate (budget run, steps >= 2) - tencache-sim's prediction|"}
    copy = fig("gpu-copy", "output") or {}
    floor = copy.get("target") if isinstance(copy.get("target"), (int, float)) else 0.95
    for k in ("h2d_ratio", "d2h_ratio"):
        v = copy.get(k)
        if isinstance(v, (int, float)):
            targets["gpu_copy_" + k] = {
                "value": round(v, 4), "target": ">= %g" % floor, "pass": v >= floor,
                "what": "tencache-bench gpu-copy: the worst size's GB/s through the device tier over plain "
                        "cudaMemcpyAsync from pinned memory (its own target)"}

    hf = c.get("transformers_logits") or {}
    if isinstance(hf, dict) and "pass" in hf:
        worst = max([o.get("max_abs_diff", float("inf")) for o in hf.get("runs", {}).values()] or [float("inf")])
        targets["transformers_logits"] = {
            "value": worst, "target": "<= 1e-4", "pass": bool(hf["pass"]),
            "what": "max |our logits - transformers' logits| over tiny GPT-2, OPT, Llama, Falcon and BLOOM "
                    "exported by us (fp32, CPU); any missing or unexpected tensor fails it"}
    sources = {"budget_vs_resident_step_time": ("run-resident", "run-budget"),
               "zero_infinity_vs_tencache_step_time": ("run-budget", "run-budget-zero-infinity"),
               "resident_mfu": ("run-resident",), "device_hit_rate_vs_tencache_sim": ("run-budget", "sim-hit-rate")}
    for k, names in sources.items():
        bad = [n for n in names if n in by and not by[n].get("ok")]
        if k in targets and bad:
            targets[k]["from_failed_steps"] = bad  # figures from what those steps wrote before failing
    failed = [s["name"] for s in steps if not s.get("ok")]
    missed = [k for k, t in targets.items() if t.get("pass") is False]
    if status == "done":
        status = "failed" if failed else "targets-missed" if missed else "ok"
    code = {"ok": 0, "failed": 1, "build-failed": 1, "no-gpu": 3, "targets-missed": 4}.get(status, 1)
    report = {
        "status": status, "exit_code": code if status != "running" else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "seconds": int(datetime.datetime.now().timestamp()) - int(os.environ.get("GC_START", "0")),
        "failed_steps": failed, "missed_targets": missed,
        "gpu": c.get("gpu"),
        "versions": {k: env.get(k) for k in ("python", "torch", "torch_cuda_version", "transformers")
                     if env.get(k) is not None},
        "torch": c.get("torch"), "cuda_available": env.get("cuda_available", False),
        "toolchain": c.get("toolchain"), "deps": c.get("deps"), "build": c.get("build"),
        "mpi": c.get("mpi"), "params": params, "targets": targets, "steps": steps,
        "transformers_logits": c.get("transformers_logits"),
        "notes": c.get("notes", []),
    }
    dump(os.path.join(OUT, "gpu-check.json"), report)
    print(code)


def hf_logits(out_json, *runs):
    """Each run NAME=WEIGHTS_DIR:LOGITS_FILE: transformers loads the weights we
    exported (no missing or unexpected tensor), runs the tokens we ran, and its
    fp32 logits are compared with ours."""
    r = {"target": "max |ours - transformers'| <= 1e-4 (fp32, CPU), every architecture", "runs": {}}
    try:
        import torch
        import transformers
        from safetensors.torch import load_file
    except Exception as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
        dump(out_json, r)
        return
    torch.manual_seed(0)
    for run in runs:
        name, rest = run.split("=", 1)
        weights, logits = rest.split(":", 1)
        one = {}
        try:
            ours = load_file(logits)
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                weights, torch_dtype=torch.float32, output_loading_info=True)
            model.eval()
            one["missing"] = list(info.get("missing_keys", []))
            one["unexpected"] = list(info.get("unexpected_keys", []))
            one["mismatched"] = [str(m) for m in info.get("mismatched_keys", [])]
            tokens = ours["tokens"].round().long()[None]
            with torch.no_grad():
                theirs = model(tokens).logits[0].float()
            diff = (theirs - ours["logits"]).abs().max().item()
            one.update({"architecture": type(model).__name__, "positions": int(tokens.shape[1]),
                        "max_abs_diff": diff, "max_abs_logit": ours["logits"].abs().max().item()})
            one["pass"] = diff <= 1e-4 and not (one["missing"] or one["unexpected"] or one["mismatched"])
        except Exception as e:
            one["error"] = "%s: %s" % (type(e).__name__, e)
            one["pass"] = False
        r["runs"][name] = one
    r["pass"] = bool(r["runs"]) and all(o.get("pass") for o in r["runs"].values())
    dump(out_json, r)


def summary():
    r = load(os.path.join(OUT, "gpu-check.json"), {}) or {}
    print("status %s (exit %s) after %s s; failed steps: %s" % (
        r.get("status"), r.get("exit_code"), r.get("seconds"), ", ".join(r.get("failed_steps") or []) or "none"))
    for s in r.get("steps", []):
        print("  step %-26s exit %-4s %7.1f s%s" % (s["name"], s["exit_code"], s["seconds"],
                                                    "" if s.get("ok") else "  FAILED"))
    for k, t in (r.get("targets") or {}).items():
        verdict = {True: "pass", False: "MISSED", None: "reported"}[t.get("pass")]
        print("  %-38s %-10s %s (%s)" % (k, t.get("value"), t.get("target") or "", verdict))
    for n in r.get("notes") or []:
        print("  note: " + n)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"probe": probe, "get": get, "ctx": ctx, "step": step, "run-figures": run_figures, "simargs": simargs,
     "sim-figures": sim_figures, "json-figures": json_figures, "ctest-figures": ctest_figures,
     "corpus": corpus, "final": final, "summary": summary, "runline": runline,
     "hf-logits": hf_logits}[cmd](*args)
