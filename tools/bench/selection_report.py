#!/usr/bin/env python3
"""Reads tools/selection-check.sh's results and prints, per transport and
size: the best fixed algorithm, what auto picked, pick/best (target <= 1.10),
every algorithm's pred_us/measured at >= 4 KiB (target within +-25 %), and for
gloo every algorithm against Gloo's own allreduce (target <= 2x). Where a
sweep ran several times, each point is the median of the runs' medians.
Per transport it also prints how well a sweep repeats itself: the auto row
against the row of the algorithm auto ran, in the same run, are two
measurements of one thing; where they differ by more than 10 %, a pick/best
over 1.10 can be the measurement's, not the selector's. And it lists the
predictions off by more than 25 % the same way in every run (at least two):
the cost model's misses, which more runs would not average away."""
import glob
import json
import os
import statistics
import sys

PICK_TARGET, PRED_TOL, GLOO_TARGET, PRED_FROM = 1.10, 0.25, 2.0, 4096


def load(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*-[0-9]*.json"))):
        variant = os.path.basename(path).rsplit("-", 1)[0]
        with open(path) as f:
            runs.setdefault(variant, []).append(json.load(f)["records"])
    return runs


def median_points(records_per_run):
    """(algo, bytes) -> median time over the runs, and the median over the
    runs of pred / measured in that run (a run's predictions come from its
    own calibration, so they are judged against its own times: a job in a
    slow spell of this VM calibrates and measures slowly alike); bytes ->
    the runs' auto picks (every run calibrates afresh, so picks may differ)
    and the median over the runs of pick time / best time in that run; and,
    per run and size, the auto row's time over the time of the row of the
    algorithm auto ran (how well the sweep repeats itself); and (algo, bytes)
    -> every run's pred / measured, unmedianed (systematic_misses)."""
    times, preds, picks, pick_ratios = {}, {}, {}, {}
    repeats = []  # per run and size: the auto row's time / the time of the row of the algorithm it ran
    for records in records_per_run:
        run, ran = {}, {}
        for r in records:
            if r["coll"] != "allreduce":
                continue
            key = (r["algo"], r["bytes"])
            run[key] = r["time_us"]
            if r["algo"] == "auto" and r.get("ran"):
                ran[r["bytes"]] = r["ran"]
            times.setdefault(key, []).append(r["time_us"])
            if r.get("pred_us") is not None and r["pred_us"] > 0 and r["time_us"] > 0:
                preds.setdefault(key, []).append(r["pred_us"] / r["time_us"])
            picks.setdefault(r["bytes"], []).append(r["auto_pick"])
        for b in {b for (_, b) in run}:
            fixed = [t for (a, bb), t in run.items() if bb == b and a != "auto"]
            pick = picks[b][-1]
            if fixed and (pick, b) in run:
                pick_ratios.setdefault(b, []).append(run[(pick, b)] / min(fixed))
            if ("auto", b) in run and (ran.get(b), b) in run and run[(ran[b], b)] > 0:
                repeats.append(run[("auto", b)] / run[(ran[b], b)])
    med = lambda d: {k: statistics.median(v) for k, v in d.items()}
    return med(times), med(preds), picks, med(pick_ratios), repeats, preds


def systematic_misses(pred_runs, runs):
    """Of `pred_runs` ((algo, bytes) -> each run's pred / measured), the fixed
    algorithms' points at >= PRED_FROM outside +-PRED_TOL in all `runs` runs,
    on the same side, with their ratios; empty with fewer than two runs (one
    run cannot tell the model from the noise)."""
    return [((a, b), ratios) for (a, b), ratios in sorted(pred_runs.items(), key=lambda kv: (kv[0][1], kv[0][0]))
            if runs >= 2 and a != "auto" and b >= PRED_FROM and len(ratios) == runs
            and (min(ratios) > 1 + PRED_TOL or max(ratios) < 1 - PRED_TOL)]


def report_transport(variant, records_per_run):
    times, preds, picks, pick_ratios, repeats, pred_runs = median_points(records_per_run)
    sizes = sorted({b for (_, b) in times})
    algos = sorted({a for (a, _) in times if a != "auto"})
    print(f"\n## {variant} ({len(records_per_run)} run(s))")
    print(f"{'size':>10} {'best':>20} {'best_us':>10} {'auto picks':>20} {'pick/best':>9} {'auto/best':>9}"
          f"  pred/measured >= 4 KiB (worst)")
    print("# pick/best: per run, the picked algorithm's time over that run's best fixed one; the median over runs")
    ok_pick = ok_pred = n_pred = 0
    worst_pick = (0, 0)
    for b in sizes:
        fixed = {a: times[(a, b)] for a in algos if (a, b) in times}
        if not fixed:
            continue
        best = min(fixed, key=fixed.get)
        run_picks = picks.get(b, ["?"])
        pick = max(run_picks, key=run_picks.count)  # a tie goes to the earliest run's pick
        if len(set(run_picks)) > 1:
            pick += "*"  # the runs' calibrations picked differently: the most common pick
        ratio = pick_ratios.get(b, float("nan"))
        auto = times.get(("auto", b), float("nan")) / fixed[best]
        ok_pick += ratio <= PICK_TARGET
        worst_pick = max(worst_pick, (ratio, b))
        pred_note = ""
        if b >= PRED_FROM:
            errs = [(preds[(a, b)], a) for a in fixed if (a, b) in preds]
            for e, a in errs:
                n_pred += 1
                ok_pred += abs(e - 1) <= PRED_TOL
            if errs:
                w = max(errs, key=lambda e: abs(e[0] - 1))
                pred_note = f"  {sum(abs(e - 1) <= PRED_TOL for e, _ in errs)}/{len(errs)} ok, worst {w[1]} {w[0]:.2f}"
        flag = "" if ratio <= PICK_TARGET else "  <-- pick"
        print(f"{b:>10} {best:>20} {fixed[best]:>10.2f} {pick:>20} {ratio:>9.3f} {auto:>9.3f}{pred_note}{flag}")
    print(f"# {variant}: auto <= {PICK_TARGET}x best at {ok_pick}/{len(sizes)} sizes "
          f"(worst {worst_pick[0]:.3f} at {worst_pick[1]} B); pred within +-{PRED_TOL:.0%} at {ok_pred}/{n_pred} "
          f"points >= {PRED_FROM} B")
    if len(records_per_run) >= 2:
        misses = systematic_misses(pred_runs, len(records_per_run))
        listed = ", ".join(f"{a} at {b} B ({' '.join(f'{x:.2f}' for x in ratios)})" for (a, b), ratios in misses)
        print(f"# {variant}: pred off by more than {PRED_TOL:.0%} the same way in all {len(records_per_run)} runs "
              f"(the model's misses, not the noise's): {len(misses)}{': ' + listed if misses else ''}")
    if repeats:
        off = sorted(abs(x - 1) for x in repeats)
        print(f"# {variant}: the sweep repeats itself (auto against the algorithm it ran, same run) within "
              f"{PICK_TARGET - 1:.0%} at {sum(d <= PICK_TARGET - 1 for d in off)}/{len(off)} points, "
              f"median {off[len(off) // 2]:.1%} apart, worst {off[-1]:.1%}")
    return ok_pick == len(sizes), ok_pred == n_pred


def report_gloo_own(out):
    rows = {}
    paths = sorted(glob.glob(os.path.join(out, "gloo-own-*.txt")))
    header = None
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("# bytes"):
                    header = line[2:].split()
                elif line.strip() and not line.startswith("#"):
                    v = line.split()
                    rows.setdefault(int(v[0]), []).append([float(x) for x in v[1:]])
    if not rows or not header:
        return None
    names = header[2:-3]  # bytes, own_us, then <algo>_us ..., then three ratios
    print(f"\n## gloo against Gloo's own allreduce, side by side ({len(paths)} run(s); target <= {GLOO_TARGET}x)")
    print(f"{'size':>10} {'own_us':>10} {'worst':>20} {'worst/own':>9} {'native/own':>10} {'auto/own':>9}")
    ok = 0
    for b in sorted(rows):
        med = [statistics.median(col) for col in zip(*rows[b])]  # own_us, <algo>_us ..., ratios
        own, ours = med[0], dict(zip(names, med[1:1 + len(names)]))
        worst = max(ours, key=ours.get)
        r = ours[worst] / own
        ok += r <= GLOO_TARGET
        print(f"{b:>10} {own:>10.2f} {worst[:-3]:>20} {r:>9.3f} {ours.get('native_us', float('nan')) / own:>10.3f} "
              f"{ours.get('auto_us', float('nan')) / own:>9.3f}{'' if r <= GLOO_TARGET else '  <--'}")
    print(f"# gloo: every algorithm <= {GLOO_TARGET}x Gloo's own at {ok}/{len(rows)} sizes")
    return ok == len(rows)


def report_tcp_floor(out, runs):
    """Each TCP transport's best time per size against tcp-floor's bare
    loopback exchange (medians over the runs of its p10, median and p90)."""
    rows = {}
    paths = sorted(glob.glob(os.path.join(out, "tcp-floor-*.txt")))
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    v = line.split()
                    rows.setdefault(int(v[0]), []).append([float(x) for x in v[1:4]])
    tcp = [v for v in ("ucx_tcp", "ofi_tcp", "gloo") if v in runs]
    if not rows or not tcp:
        return
    best = {}
    for v in tcp:
        times = median_points(runs[v])[0]
        for (a, b), t in times.items():
            if a != "auto" and t < best.get((v, b), float("inf")):
                best[(v, b)] = t
    print(f"\n## TCP transports against the bare loopback exchange (tcp-floor, {len(paths)} run(s)): best / floor median")
    print(f"{'size':>10} {'p10_us':>9} {'p50_us':>9} {'p90_us':>9}" + "".join(f" {v:>9}" for v in tcp))
    for b in sorted(rows):
        p10, p50, p90 = (statistics.median(col) for col in zip(*rows[b]))
        ratios = "".join(f" {best[(v, b)] / p50:>9.2f}" if (v, b) in best else f" {'-':>9}" for v in tcp)
        print(f"{b:>10} {p10:>9.2f} {p50:>9.2f} {p90:>9.2f}{ratios}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "results/selection"
    runs = load(out)
    if not runs:
        sys.exit(f"selection_report: no comm-bench JSON in {out}")
    verdicts = {v: report_transport(v, r) for v, r in runs.items()}
    gloo = report_gloo_own(out)
    report_tcp_floor(out, runs)
    print("\n# verdict")
    cc = os.path.join(out, "tcp-cc.txt")
    if os.path.exists(cc):
        print("#   " + open(cc).read().strip().removeprefix("selection-check: "))
    for v, (pick, pred) in verdicts.items():
        print(f"#   {v:8} auto<=1.10x best: {'PASS' if pick else 'FAIL'}   pred +-25%: {'PASS' if pred else 'FAIL'}")
    if gloo is not None:
        print(f"#   gloo     <= 2x Gloo's own: {'PASS' if gloo else 'FAIL'}")


if __name__ == "__main__":
    main()
