"""The plain sentences under each run in RESULTS.md: what a run's figures say, generated from
its JSON lines by ``interpret(records)`` (``run_all --record``). Read the numbers too."""

from __future__ import annotations

import re
from typing import Any

from benchmarks._common import fmt_spread


def k_fmt(x: Any) -> str:
    if isinstance(x, dict):              # a spread: its median
        x = x.get("median")
    if not isinstance(x, (int, float)):
        return "?"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def interpret(records: dict[str, dict[str, Any]]) -> list[str]:
    """A few plain sentences about a run's figures (generated; read the numbers too)."""
    out: list[str] = []
    p1, p2, p3, p4, p5 = (records.get(n) for n in ("P1", "P2", "P3", "P4", "P5"))
    if p1 and p1.get("ratio") is not None:
        out.append(_p1_sentence(p1))
    if p2 and p2.get("ratio") is not None:
        r = p2["ratio"]
        out.append(f"P2: 2 workers give {r:.2f}x the samples/s of 1 worker ({r / 2:.0%} scaling efficiency "
                   f"with twice the cores)" + ("; 2 workers are slower than 1" if r < 1 else "")
                   + ": with 2 ranks every step adds an embedding all-to-all, a DDP all-reduce and the "
                   "'every rank has a batch' all-reduce over gloo, while the 1-worker run has no partner "
                   "to wait for; on 2 cores the Ray and OS processes also share the CPUs with the workers.")
    if p3 and p3.get("ratio") is not None:
        out.append(_p3_sentence(p3))
    if p4 and p4.get("ratio") is not None:
        b = p4.get("breakdown", {})
        alone = b.get("cluster_alone", {})
        out.append(f"P4: of a {p4['total_s']:.0f} s daily run, {p4['in_job_compute_s']:.0f} s is compute the jobs "
                   f"report and {p4['overhead_s']:.0f} s ({p4['ratio']:.0%}) is overhead: cluster start "
                   f"{b.get('cluster_start_s')} s (alone: provision {alone.get('provision_s')} s, teardown "
                   f"{alone.get('teardown_s')} s; a head + a node per worker: provision "
                   f"{alone.get('node_per_worker', {}).get('provision_s')} s), teardown in the run {b.get('teardown_s')} s, and per Ray job the "
                   "submit, job-driver start (interpreter, imports, ray.init) and exit/poll/drain; see breakdown.steps.")
        if p4.get("strict_overhead_s") is not None:
            out.append(f"P4 strict (the training job's read, Ray Train start and export as overhead too): "
                       f"{p4['strict_overhead_s']:.0f} s ({p4['strict_ratio']:.0%}); window read "
                       f"{b.get('training_read_s')} s, training job outside its epochs {b.get('training_not_epochs_s')} s.")
        fl = p4.get("floor", {})
        if fl.get("floor_s") is not None:
            parts = ", ".join(f"{k[:-2].replace('_', ' ')} {v}" for k, v in fl["parts"].items())
            out.append(f"P4 floor of this design (a cluster per run, one Ray job driver per run), measured here: "
                       f"{fl['floor_s']} s ({parts}) against the {fl['goal_s']:g} s goal.")
        if (pc := p4.get("process_cpu") or {}).get("total_cpu_s") is not None:
            out.append(_p4_cpu_sentence(pc))
        if (w := p4.get("warm") or {}).get("overhead_s") is not None:
            out.append(f"P4w: on an existing cluster (started beforehand in {w['cluster_start_s']} s, not paid by the "
                       f"run) the first run's overhead was {w['first_run_on_cluster_overhead_s']} s and the second's "
                       f"{w['overhead_s']} s (goal <= {w['goal_s']:g} s: {'met' if w.get('goal_met') else 'not met'}).")
        elif w.get("error"):
            out.append(f"P4w failed: {one_line(w['error'])}.")
    q1 = records.get("Q1")
    if q1 and q1.get("ratio") is not None:
        for name, r in q1.get("results", {}).items():
            lo, hi = r.get("auc_diff_vs_baseline_ci_low"), r.get("auc_diff_vs_baseline_ci_high")
            verdict = ("beats XGBoost beyond the noise" if lo is not None and lo > 0 else
                       "is below XGBoost beyond the noise" if hi is not None and hi < 0 else
                       "is level with XGBoost within the noise")
            out.append(f"Q1 {name}: network AUC {r['auc']:.4f} vs XGBoost {r['baseline_auc']:.4f}, lift "
                       f"{r['auc'] - r['baseline_auc']:+.4f} (paired 95% interval [{lo:+.4f}, {hi:+.4f}]): the network "
                       f"{verdict} on {int(r.get('rows') or 0)} held-out rows"
                       + (f"; correctly specified model {r['specified_auc']:.4f}, oracle {r['oracle_auc']:.4f}"
                          if r.get("specified_auc") is not None else "") + ".")
    if p5 and p5.get("ratio") is not None:
        b, s1 = p5.get("backfill", {}), p5.get("singles", {})
        out.append(f"P5: a {p5['config']['days']}-day backfill in one run spent {p5['backfill_overhead_per_day_s']} s per day "
                   f"beyond in-job compute ({b.get('clusters')} cluster start(s), {b.get('ray_jobs', '?')} Ray jobs); "
                   f"{s1.get('runs')} single-day runs spent {p5['singles_overhead_per_day_s']} s per day "
                   f"({s1.get('clusters')} cluster starts, {s1.get('ray_jobs', '?')} Ray jobs): ratio {p5['ratio']:.2f}; "
                   f"goal <= {p5['goal_s_per_day']} s per day {'met' if p5.get('goal_met') else 'not met'}.")
        if (t := p5.get("p5t") or {}).get("ratio") is not None:
            out.append(f"P5t: the backfill's training job took {t['train_wall_s']} s for {t['in_loop_s']} s of epochs "
                       f"(train + validation + checkpoint): {t['ratio']} (days after the first "
                       f"{t.get('days_after_first')}; goal <= {t['goal']}: {'met' if t['ratio'] <= t['goal'] else 'not met'}); "
                       f"single-day runs: {', '.join(str(x) for x in p5.get('p5t_singles') or [])}.")
    p6, s1 = records.get("P6"), records.get("S1")
    if p6 and p6.get("ratio") is not None:
        out.append(f"P6: during a daily run the machine used {p6['peak_above_idle_gib']} GiB above its idle figure at the "
                   f"peak (goal <= {p6['goal_gib']} GiB: {'met' if p6.get('goal_met') else 'not met'}); the run's own "
                   f"processes (CLI, Dagster, every Ray process) peaked at {p6['processes_peak_pss_gib']} GiB PSS "
                   f"({p6['processes_peak_rss_gib']} GiB RSS, shared pages counted per process).")
    if s1 and s1.get("ratio") is not None:
        pts = ", ".join(f"{int(p['rows_per_day']) // 1000}k: {p['ours']['wall_s']:.0f} vs {p['bare']['wall_s']:.0f} s"
                        for p in s1.get("points", []))
        out.append(f"S1: each extra million rows per day costs our daily run {s1['ours_slope_s_per_m']} s and the bare "
                   f"pipeline (same training, evaluation code and scoring in one process) {s1['bare_slope_s_per_m']} s "
                   f"(ratio {s1['ratio']:.2f}, goal <= 1.15: {'met' if s1.get('goal_met') else 'not met'}; bare "
                   f"training alone {s1.get('bare_train_slope_s_per_m')} s per M); fixed parts {s1.get('ours_intercept_s')} "
                   f"vs {s1.get('bare_intercept_s')} s. Wall times ours vs bare: {pts}.")
        steps = s1.get("step_slopes_s_per_m") or {}
        if steps:
            out.append("S1 by step, s per M rows/day ours vs bare (gap): " + "; ".join(
                f"{k} {v['ours']} vs {v['bare']} ({v['gap']:+})" for k, v in steps.items()) + ".")
    failed = [n for n, r in records.items() if r.get("ratio") is None]
    if failed:
        out.append("Failed: " + "; ".join(f"{n}: {one_line(records[n].get('error'))}" for n in failed) + ".")
    return out


def _p1ab_sentence(p1: dict[str, Any]) -> str:
    """P1a (Ray's overhead on one core) and P1b (what the second worker buys, beside what a second
    core buys the bare loop), from P1's records since 2026-12-04."""
    r, b = p1["ratio"], p1["p1b"]
    return (f"P1a (Ray's overhead): with 1 worker our Ray Train path trains at {k_fmt(p1['ours_1w_samples_per_s'])} "
            f"samples/s, the bare loop with 1 thread at {k_fmt(p1['bare_1thread_samples_per_s'])}: {r:.0%} of it "
            f"(pairs {p1.get('ratio_min')}-{p1.get('ratio_max')}; goal >= {p1.get('goal', 0.95):.0%}: "
            f"{'met' if r >= p1.get('goal', 0.95) else 'not met'}). P1b (distribution): 2 workers give "
            f"{fmt_spread(b['ratio'])}x the samples/s of 1 worker, where a second thread gives the bare loop "
            f"{fmt_spread(b['machine_limit'])}x on this 2-core machine (its physical limit for this model); "
            f"2 workers vs the faster bare run: {fmt_spread(p1.get('ratio_2w_vs_bare'))}.")


def _p1_sentence(p1: dict[str, Any]) -> str:
    if p1.get("p1b"):
        text = _p1ab_sentence(p1)
        gaps = {k: v.get("gap_us_per_sample") for k, v in (p1.get("breakdown_p1a") or {}).items()
                if k not in ("epoch", "embedding_forward", "grad_allreduce") and v.get("gap_us_per_sample") is not None}
        if gaps:
            top = sorted(gaps.items(), key=lambda kv: -kv[1])[:4]
            text += " P1a gap per sample by phase: " + ", ".join(f"{k} {v:+.2f} us" for k, v in top) + "."
        return text
    r = p1["ratio"]
    text = (f"P1: over {p1.get('pairs', 1)} interleaved pairs our Ray Train path trains at "
            f"{k_fmt(p1['ours_samples_per_s'])} samples/s (median), the bare one-process loop (same model, rows, "
            f"fused optimizer) at {k_fmt(p1['bare_samples_per_s'])}: ours reaches {r:.0%} of it (pairs "
            f"{p1.get('ratio_min')}-{p1.get('ratio_max')}).")
    gaps = {k: v.get("gap_us_per_sample") for k, v in (p1.get("breakdown") or {}).items()
            if k not in ("epoch", "embedding_forward", "grad_allreduce") and v.get("gap_us_per_sample") is not None}
    total = (p1.get("breakdown") or {}).get("epoch", {}).get("gap_us_per_sample")
    if gaps and total:
        top = sorted(gaps.items(), key=lambda kv: -kv[1])[:4]
        text += (f" Per training sample ours spends {total:+.2f} us more; by phase: "
                 + ", ".join(f"{k} {v:+.2f} us" for k, v in top) + " (breakdown in the JSON line).")
    text += _p1_waiting(p1.get("breakdown") or {})
    floor = (p1.get("collective_floor") or {}).get("us_per_sample")
    bare_epoch = (p1.get("breakdown") or {}).get("epoch", {}).get("bare_us_per_sample")
    if floor is not None and bare_epoch:
        text += (f" The gloo collectives one step needs, timed alone with the step's sizes, cost {floor:.2f} us "
                 f"per sample; a ratio of 0.90 allows a gap of {bare_epoch / 0.9 - bare_epoch:.2f} us.")
    if p1.get("contended_pairs"):
        text += f" In {p1['contended_pairs']} pair(s) the bare loop was faster with 1 thread than 2: contended cores."
    return text


def _p4_cpu_sentence(pc: dict[str, Any]) -> str:
    """Where the run's CPU time went, by process group (``benchmarks._proc_cpu``)."""
    groups = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in pc.get("by_group_cpu_s", {}).items() if v >= 0.1)
    cpus = pc.get("cpus") or 1
    return (f"P4 CPU: during the {pc['wall_s']} s run its processes used {pc['total_cpu_s']} CPU-s of the "
            f"{round(pc['wall_s'] * cpus, 1)} its {cpus} cores had (at least: sampled); by group: {groups}.")


def _p1_waiting(breakdown: dict[str, Any]) -> str:
    """How much of its epoch our rank 0 computed, and in which phases it waited (CPU share < 1)."""
    epoch = breakdown.get("epoch") or {}
    share = epoch.get("ours_cpu_share")
    if share is None or not epoch.get("ours_us_per_sample"):
        return ""
    waits = {k: v["ours_us_per_sample"] * (1 - v["ours_cpu_share"]) for k, v in breakdown.items()
             if k in ("forward", "backward", "input_wait", "to_tensors", "optimizer")
             and v.get("ours_cpu_share") is not None and v.get("ours_us_per_sample")}
    top = sorted(waits.items(), key=lambda kv: -kv[1])[:3]
    text = (f" Our rank 0's process used the CPU for {share:.0%} of its epoch and waited the rest"
            f" (collectives, its peer rank)")
    if top:
        text += ": waiting per sample " + ", ".join(f"{k} {v:.2f} us" for k, v in top)
    bare = epoch.get("bare_cpu_share")
    return text + (f"; the bare process kept {bare:.2f} cores busy." if bare is not None else ".")


def _p3_sentence(p3: dict[str, Any]) -> str:
    r = p3["ratio"]
    b = p3.get("breakdown") or {}
    cold = b.get("ours_cold") or {}
    text = (f"P3: our Ray Data inference does {k_fmt(p3['ours_rows_per_s'])} rows/s end to end on a fresh Ray vs "
            f"{k_fmt(p3['bare_rows_per_s'])} for bare torch in one warm process: ratio {r:.2f} (pairs "
            f"{p3.get('ratio_min')}-{p3.get('ratio_max')}; warm Ray workers {fmt_spread(p3.get('ratio_warm'))}).")
    if cold:
        # since 2026-12-01 16:00 the scoring tasks read their own row groups: read_s is 0 and
        # the read is in map_s
        mapped = "read+transform+score" if not cold.get("read_s") else "transform+score"
        text += (f" Cold run, {cold.get('wall_s')} s wall on 2 CPUs: task seconds read {cold.get('read_s')}, convert "
                 f"{cold.get('convert_s')}, {mapped} {cold.get('map_s')}, write {cold.get('write_s')}, and "
                 f"{cold.get('scheduling_s')} CPU-s not in any task (worker start, scheduling, idle); bare: "
                 + ", ".join(f"{k} {v}" for k, v in (b.get("bare") or {}).items()) + " s.")
    floor = p3.get("cold_floor") or {}
    if floor.get("cold_ratio_ceiling") is not None:
        text += (f" A fresh scoring worker spends {floor['worker_imports']['cpu_s_min']} CPU-s importing Ray, Ray Data and "
                 f"torch before its first row; with the warm run's {floor['ours_warm_s']} s a cold run takes at "
                 f"least {floor['cold_floor_s']} s, a cold ratio of at most {floor['cold_ratio_ceiling']}.")
    return text


def one_line(text: Any, limit: int = 200) -> str:
    first = re.sub(r"\x1b\[[0-9;]*m", "", str(text)).strip().splitlines()
    line = first[0] if first else ""
    return line if len(line) <= limit else line[:limit] + "..."


