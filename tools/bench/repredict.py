#!/usr/bin/env python3
"""Re-predicts a tools/selection-check.sh run with the build at hand.

A change to the cost model or to how measured times correct it can be judged
without measuring again: for each run of each variant, comm-info loads that
run's own tuning file (COMM_TUNING_FILE, so the same links, compute and
measured points) with the variant's transport and variables (VARIANT.launch,
written by selection-check) and predicts every all-reduce algorithm at the
run's sizes from 4 KiB (PRED_FROM); each prediction is set against the time that run
measured. With the build that ran, it reproduces the run's own pred_us.

usage: tools/bench/repredict.py [--dir results/selection] [--build build] VARIANT...
"""
import argparse
import glob
import json
import os
import subprocess
import sys

from selection_report import PRED_FROM, PRED_TOL  # the report's own targets


def size_name(b):
    return str(b >> 20) + "M" if b >= 1 << 20 else str(b >> 10) + "K"


def predictions(build, transport, env, tuning_file, sizes):
    args = [os.path.join(build, "bin", "commrun"), "-n", "2", "--no-prefix", os.path.join(build, "bin", "comm-info"),
            "--transport", transport, "--max", "1K", "--json"]
    for s in sizes:
        args += ["--size", str(s)]
    out = subprocess.run(args, env=dict(env, COMM_TUNING_FILE=tuning_file), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"repredict: comm-info failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    pred = {}
    for c in json.loads(out.stdout)["candidates"]:
        for a in c["collectives"]["allreduce"]["candidates"]:
            pred[(a["algorithm"], c["bytes"])] = a["predicted_us"]
    return pred


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="results/selection")
    ap.add_argument("--build", default=os.environ.get("COMM_BUILD_DIR", "build"))
    ap.add_argument("variants", nargs="+")
    opts = ap.parse_args()
    for variant in opts.variants:
        launch = os.path.join(opts.dir, variant + ".launch")
        if not os.path.exists(launch):
            sys.exit(f"repredict: no {launch} (written by tools/selection-check.sh for each variant it ran)")
        transport, *assignments = open(launch).read().split()
        env = dict(os.environ)
        env.update(a.split("=", 1) for a in assignments)
        now = before = points = 0
        runs = sorted(glob.glob(os.path.join(opts.dir, glob.escape(variant) + "-[0-9]*.json")))
        for path in runs:
            run = path[:-len(".json")].rsplit("-", 1)[1]
            files = glob.glob(os.path.join(opts.dir, f"cache-{variant}-{run}", "comm", "tuning-*.json"))
            if len(files) > 1:  # gloo's cache also holds comm-gloo-compare's: the one the sweep's log names
                log = open(os.path.join(opts.dir, f"{variant}-{run}.log")).read()
                files = [f for f in files if os.path.basename(f) in log]
            if len(files) != 1:
                sys.exit(f"repredict: expected one tuning file for {variant} run {run}, found {len(files)}")
            records = [r for r in json.load(open(path))["records"] if r["coll"] == "allreduce"]
            sizes = sorted({r["bytes"] for r in records if r["bytes"] >= PRED_FROM})
            pred = predictions(opts.build, transport, env, files[0], sizes)
            measured = {(r["algo"], r["bytes"]): r for r in records}
            print(f"{variant}-{run:<14}" + "".join("%8s" % size_name(s) for s in sizes))
            for algo in sorted({a for a, _ in pred}):
                row = "%-20s" % algo
                for s in sizes:
                    r = measured.get((algo, s))
                    if not r or r["time_us"] <= 0 or (algo, s) not in pred:
                        row += "%8s" % "-"
                        continue
                    q = pred[(algo, s)] / r["time_us"]
                    points += 1
                    now += abs(q - 1) <= PRED_TOL
                    before += abs((r.get("pred_us") or 0) / r["time_us"] - 1) <= PRED_TOL
                    row += "%6.2f%s " % (q, "*" if abs(q - 1) > PRED_TOL else " ")
                print(row)
        print(f"# {variant}: within {PRED_TOL:.0%} at {now}/{points} points now, {before}/{points} as the runs predicted")


if __name__ == "__main__":
    main()
