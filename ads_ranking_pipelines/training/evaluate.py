"""Evaluate a model version on its held-out day, beside an XGBoost baseline and the champion."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.baseline import train_and_evaluate_baseline
from ads_ranking_pipelines.training.export import is_model_version, load_predictor
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.metrics import evaluate
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec


def evaluate_version(spec: EvalJobSpec, reporter: Reporter) -> dict[str, Any]:
    from ads_ranking_pipelines.events.layout import read_days

    t0 = time.perf_counter()
    feature_spec = FeatureSpec.from_source(spec.source, spec.params.hash_buckets)
    eval_table = read_days(spec.source, [spec.eval_day])
    inputs = transform(eval_table, feature_spec)
    labels = inputs["label"]

    predictor = load_predictor(spec.model_uri)
    probs = predictor.predict(inputs["dense"], inputs["sparse"])
    out: dict[str, Any] = {"eval_day": spec.eval_day.isoformat(), **evaluate(labels, probs)}
    reporter.log(f"model on {spec.eval_day}: auc={out['auc']:.4f} logloss={out['logloss']:.4f} "
                 f"ne={out['normalized_entropy']:.4f} calibration={out['calibration']:.3f} "
                 f"({int(out['rows'])} rows)")
    reporter.metrics("evaluation", {k: v for k, v in out.items() if isinstance(v, float)})

    train_table = read_days(spec.source, list(spec.train_days))
    baseline = train_and_evaluate_baseline(train_table, eval_table, spec.source, spec.params.hash_buckets,
                                           seed=spec.params.seed)
    out.update(baseline)
    reporter.log(f"xgboost baseline: auc={baseline['baseline_auc']:.4f} "
                 f"logloss={baseline['baseline_logloss']:.4f}")

    out.update(_champion_metrics(spec, inputs, labels, reporter))
    out.update(_oracle_metrics(spec))
    out["eval_seconds"] = round(time.perf_counter() - t0, 2)
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
    c_inputs = (inputs if champion.feature_spec.hash_buckets == spec.params.hash_buckets
                else None)
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
