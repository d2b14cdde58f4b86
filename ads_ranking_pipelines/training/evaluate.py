"""Evaluate a model version on its held-out day, beside an XGBoost baseline and the champion."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.baseline import train_and_evaluate_baseline
from ads_ranking_pipelines.training.export import is_model_version, load_predictor
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.linear import design, fit_and_score, logistic_regression_metrics
from ads_ranking_pipelines.metrics import bootstrap, evaluate
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec

BASELINE = "baseline_"


def evaluate_version(spec: EvalJobSpec, reporter: Reporter) -> dict[str, Any]:
    """Metrics of the version on ``spec.eval_day`` beside the references trained on the same window.

    References: the XGBoost baseline (``baseline_``), logistic regression (``lr_``), for the
    synthetic source the correctly specified model (``specified_``) and the oracle
    (``oracle_``), and the champion (``champion_``). AUC and logloss of the version and of each
    reference carry 95 % bootstrap intervals (``*_ci_low`` / ``*_ci_high``), and the version's AUC
    lift over the baseline a paired interval (``auc_diff_vs_baseline_ci_*``).
    """
    from ads_ranking_pipelines.events.layout import read_days

    t0 = time.perf_counter()
    feature_spec = FeatureSpec.from_source(spec.source, spec.params.hash_buckets)
    eval_table = read_days(spec.source, [spec.eval_day])
    inputs = transform(eval_table, feature_spec)
    labels = inputs["label"]

    predictor = load_predictor(spec.model_uri)
    probs = {"": predictor.predict(inputs["dense"], inputs["sparse"])}
    out: dict[str, Any] = {"eval_day": spec.eval_day.isoformat(), **evaluate(labels, probs[""])}
    reporter.log(f"model on {spec.eval_day}: auc={out['auc']:.4f} logloss={out['logloss']:.4f} "
                 f"ne={out['normalized_entropy']:.4f} calibration={out['calibration']:.3f} "
                 f"({int(out['rows'])} rows)")
    reporter.metrics("evaluation", {k: v for k, v in out.items() if isinstance(v, float)})

    train_table = read_days(spec.source, list(spec.train_days))
    baseline, probs[BASELINE] = train_and_evaluate_baseline(
        train_table, eval_table, spec.source, spec.params.hash_buckets, seed=spec.params.seed, with_probs=True)
    out.update(baseline)
    reporter.log(f"xgboost baseline: auc={baseline['baseline_auc']:.4f} "
                 f"logloss={baseline['baseline_logloss']:.4f}")
    out.update(_reference_models(spec, feature_spec, train_table, eval_table, inputs, probs, reporter))
    out.update(_champion_metrics(spec, inputs, labels, reporter))
    out.update(_oracle_metrics(spec))
    out.update(bootstrap(labels, probs, reference=BASELINE, seed=spec.params.seed))
    out["auc_diff_vs_baseline"] = out["auc"] - out["baseline_auc"]
    reporter.log(f"95% intervals ({int(out['rows'])} rows): auc [{out['auc_ci_low']:.4f}, {out['auc_ci_high']:.4f}], "
                 f"baseline [{out['baseline_auc_ci_low']:.4f}, {out['baseline_auc_ci_high']:.4f}], lift over "
                 f"baseline {out['auc_diff_vs_baseline']:+.4f} [{out['auc_diff_vs_baseline_ci_low']:+.4f}, "
                 f"{out['auc_diff_vs_baseline_ci_high']:+.4f}]")
    out["eval_seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _reference_models(spec: EvalJobSpec, feature_spec: FeatureSpec, train_table: Any, eval_table: Any,
                      inputs: dict[str, np.ndarray], probs: dict[str, np.ndarray],
                      reporter: Reporter) -> dict[str, Any]:
    """Logistic regression, and the correctly specified model where the click model is known."""
    out: dict[str, Any] = {}
    train_inputs = transform(train_table, feature_spec)
    lr, probs["lr_"] = logistic_regression_metrics(train_inputs, inputs)
    out.update(lr)
    reporter.log(f"logistic regression: auc={lr['lr_auc']:.4f} logloss={lr['lr_logloss']:.4f} (C={lr['lr_l2_c']})")
    if spec.source.kind == "synthetic":
        from ads_ranking_pipelines.events.synthetic import specified_design

        (d_tr, c_tr), (d_ev, c_ev) = specified_design(train_table), specified_design(eval_table)
        x_tr, x_ev = design(c_tr, c_ev, d_tr, d_ev)
        sm, probs["specified_"] = fit_and_score(x_tr, train_inputs["label"], x_ev, inputs["label"], "specified_")
        out.update(sm)
        reporter.log(f"correctly specified model: auc={sm['specified_auc']:.4f} "
                     f"logloss={sm['specified_logloss']:.4f}")
    return out


def _champion_metrics(spec: EvalJobSpec, inputs: dict[str, np.ndarray], labels: np.ndarray,
                      reporter: Reporter) -> dict[str, Any]:
    if not spec.champion_uri or not is_model_version(spec.champion_uri):
        reporter.log("no champion model yet: nothing to compare against")
        return {}
    champion = load_predictor(spec.champion_uri)
    if champion.feature_spec != FeatureSpec.from_source(spec.source, champion.feature_spec.hash_buckets):
        reporter.log(f"champion {spec.champion_uri} uses other features; not comparable")
        return {}
    c_inputs = inputs if champion.feature_spec == FeatureSpec.from_source(spec.source, spec.params.hash_buckets) else None
    if c_inputs is None:
        from ads_ranking_pipelines.events.layout import read_days

        c_inputs = transform(read_days(spec.source, [spec.eval_day]), champion.feature_spec)
    m = evaluate(labels, champion.predict(c_inputs["dense"], c_inputs["sparse"]))
    version = champion.manifest.get("model_version", fs.normalize(spec.champion_uri).rsplit("/", 1)[-1])
    reporter.log(f"champion {version}: auc={m['auc']:.4f} logloss={m['logloss']:.4f}")
    return {"champion_version": version, **{f"champion_{k}": v for k, v in m.items()}}


def _oracle_metrics(spec: EvalJobSpec) -> dict[str, Any]:
    if spec.source.kind != "synthetic":
        return {}
    from ads_ranking_pipelines.events.synthetic import oracle_metrics

    m = oracle_metrics(spec.eval_day, spec.source.synthetic)
    return {k: v for k, v in m.items() if k.startswith("oracle_")}
