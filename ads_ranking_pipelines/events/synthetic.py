"""Synthetic sponsored-quest impressions with a known click model.

"Which sponsored quest will this user engage with": a fixed *world* per seed (users with
segments and biases, ads that belong to campaigns that belong to advertisers, quest
categories, placements, devices, countries) and, per day, impressions sampled from it with
the seed mixed with the date ordinal. Same ``(day, spec)`` gives a byte-identical table.

The click model is known exactly::

    logit = b0 + user_bias[u] + ad_bias[a] + campaign[c] + advertiser[v]
            + affinity[segment[u], category[a]] + placement[p] + device[d] + country[u]
            + hour[h] + w . f(dense) + drift(day)
    p     = sigmoid(logit);   clicked ~ Bernoulli(p)

so :func:`oracle_metrics` gives the best AUC / logloss any model could reach on a day.

Dense features (heavy tailed; some enter the logit, some are proxies of latent effects,
some are pure noise):

=========  ===========================================  =================================
column     meaning                                      role
=========  ===========================================  =================================
dense_0    user sessions in the last 7 days (count)     in the logit (log1p)
dense_1    ad historical CTR estimate (noisy, per ad)   proxy of the ad's latent quality
dense_2    slot position (1 = top)                      in the logit (negative)
dense_3    price / bid of the impression (log-normal)   in the logit (weak, log)
dense_4    hours since the user's last session          in the logit (negative, log1p)
dense_5    Pareto noise                                 noise
dense_6    Gaussian noise                               noise
dense_7    user clicks on this quest category, 30 days  proxy of segment x category affinity
=========  ===========================================  =================================
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ads_ranking_pipelines.config.source import (
    SYNTHETIC_DENSE,
    SYNTHETIC_LABEL,
    SYNTHETIC_SPARSE,
    SyntheticSpec,
)

NUM_SEGMENTS = 24
NUM_CATEGORIES = 48
NUM_PLACEMENTS = 12
DEVICES = ("android", "ios", "web", "console", "smart_tv")
COUNTRIES = (
    "US", "BR", "IN", "DE", "GB", "FR", "JP", "KR", "MX", "ID", "PH", "TR", "CA", "ES", "IT",
    "PL", "AU", "NL", "SE", "AR", "CO", "TH", "VN", "UA", "CL", "PE", "MY", "SA", "EG", "ZA",
)
USER_ZIPF = 0.8          # popularity exponent of users (impressions per user)
AD_ZIPF = 0.95           # popularity exponent of ads
BASE_LOGIT = -4.0        # tuned so the default day's CTR is about 5 %
# weights of f(dense) in the logit, in column order (0 = not in the logit)
DENSE_WEIGHTS = np.array([0.30, 0.0, -0.12, 0.10, -0.22, 0.0, 0.0, 0.0])

IMPRESSION_ID = "impression_id"
EVENT_TS = "event_ts"
_ID_STRIDE = 100_000_000  # impression_id = date ordinal * stride + row (rows_per_day <= 5e7)


@dataclass(frozen=True)
class _World:
    """Everything fixed per seed. Arrays are indexed by entity id."""

    user_cdf: np.ndarray
    user_bias: np.ndarray
    user_segment: np.ndarray
    user_activity: np.ndarray      # expected sessions per day
    user_country: np.ndarray
    user_device: np.ndarray
    ad_cdf: np.ndarray
    ad_bias: np.ndarray
    ad_campaign: np.ndarray
    ad_category: np.ndarray
    ad_price: np.ndarray
    ad_hist_ctr: np.ndarray
    campaign_effect: np.ndarray
    campaign_advertiser: np.ndarray
    advertiser_effect: np.ndarray
    affinity: np.ndarray           # [segment, category]
    category_drift: np.ndarray
    placement_cdf: np.ndarray
    placement_effect: np.ndarray
    placement_position: np.ndarray
    device_effect: np.ndarray
    country_effect: np.ndarray
    hour_cdf: np.ndarray
    hour_effect: np.ndarray


def _zipf_cdf(rng: np.random.Generator, n: int, exponent: float) -> tuple[np.ndarray, np.ndarray]:
    """A Zipf-like popularity over ``n`` entities in random id order: (cdf, weights)."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    weights = weights[rng.permutation(n)]
    weights /= weights.sum()
    cdf = np.cumsum(weights)
    cdf[-1] = 1.0
    return cdf, weights


def _draw(rng: np.random.Generator, cdf: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1).astype(np.int64)


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@functools.lru_cache(maxsize=4)
def _world(seed: int, num_users: int, num_ads: int) -> _World:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED]))
    num_campaigns = max(2, num_ads // 10)
    num_advertisers = max(1, num_campaigns // 5)

    # users: popular users are also the active ones (plus noise)
    user_cdf, user_w = _zipf_cdf(rng, num_users, USER_ZIPF)
    log_pop = np.log(user_w * num_users)
    user_activity = np.exp(0.35 * log_pop + rng.normal(0.0, 0.6, num_users))
    segment_p = rng.dirichlet(np.full(NUM_SEGMENTS, 2.0))
    user_segment = rng.choice(NUM_SEGMENTS, size=num_users, p=segment_p).astype(np.int64)
    country_cdf, _ = _zipf_cdf(rng, len(COUNTRIES), 1.1)
    user_country = _draw(rng, country_cdf, num_users)
    user_device = rng.choice(len(DEVICES), size=num_users, p=[0.45, 0.25, 0.18, 0.08, 0.04]).astype(np.int64)
    user_bias = rng.normal(0.0, 0.5, num_users)

    # advertisers -> campaigns -> ads
    advertiser_effect = rng.normal(0.0, 0.3, num_advertisers)
    adv_cdf, _ = _zipf_cdf(rng, num_advertisers, 0.9)
    campaign_advertiser = _draw(rng, adv_cdf, num_campaigns)
    campaign_effect = rng.normal(0.0, 0.35, num_campaigns)
    cat_cdf, _ = _zipf_cdf(rng, NUM_CATEGORIES, 0.7)
    campaign_category = _draw(rng, cat_cdf, num_campaigns)
    camp_cdf, _ = _zipf_cdf(rng, num_campaigns, 0.7)
    ad_campaign = _draw(rng, camp_cdf, num_ads)
    ad_category = campaign_category[ad_campaign]
    ad_bias = rng.normal(0.0, 0.45, num_ads)
    advertiser_scale = np.exp(rng.normal(0.0, 0.7, num_advertisers))
    ad_price = advertiser_scale[campaign_advertiser[ad_campaign]] * np.exp(rng.normal(0.0, 0.5, num_ads))
    ad_cdf, ad_w = _zipf_cdf(rng, num_ads, AD_ZIPF)
    # historical CTR: clicks / impressions from a past with as many impressions as popularity
    hist_impr = rng.poisson(ad_w * 5e6) + 1
    ad_quality = _sigmoid(BASE_LOGIT + 0.6 + ad_bias + campaign_effect[ad_campaign]
                          + advertiser_effect[campaign_advertiser[ad_campaign]])
    ad_hist_ctr = rng.binomial(hist_impr, ad_quality) / hist_impr

    affinity = rng.normal(0.0, 0.75, (NUM_SEGMENTS, NUM_CATEGORIES))
    category_drift = rng.normal(0.0, 0.2, NUM_CATEGORIES)
    placement_cdf, _ = _zipf_cdf(rng, NUM_PLACEMENTS, 1.0)
    placement_effect = rng.normal(0.0, 0.35, NUM_PLACEMENTS)
    placement_position = rng.uniform(0.2, 5.0, NUM_PLACEMENTS)
    device_effect = rng.normal(0.0, 0.2, len(DEVICES))
    country_effect = rng.normal(0.0, 0.15, len(COUNTRIES))
    hours = np.arange(24)
    hour_w = 1.0 + 0.7 * np.sin(2 * np.pi * (hours - 9) / 24)
    hour_cdf = np.cumsum(hour_w / hour_w.sum())
    hour_cdf[-1] = 1.0
    hour_effect = 0.15 * np.cos(2 * np.pi * (hours - 21) / 24)

    return _World(
        user_cdf=user_cdf, user_bias=user_bias, user_segment=user_segment,
        user_activity=user_activity, user_country=user_country, user_device=user_device,
        ad_cdf=ad_cdf, ad_bias=ad_bias, ad_campaign=ad_campaign, ad_category=ad_category,
        ad_price=ad_price, ad_hist_ctr=ad_hist_ctr, campaign_effect=campaign_effect,
        campaign_advertiser=campaign_advertiser, advertiser_effect=advertiser_effect,
        affinity=affinity, category_drift=category_drift, placement_cdf=placement_cdf,
        placement_effect=placement_effect, placement_position=placement_position,
        device_effect=device_effect, country_effect=country_effect, hour_cdf=hour_cdf,
        hour_effect=hour_effect,
    )


@dataclass(frozen=True)
class SyntheticDay:
    """One generated day: the event rows and, aligned with them, the true click probabilities."""

    day: dt.date
    table: pa.Table
    click_prob: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        return self.table.column(SYNTHETIC_LABEL).to_numpy()


def _day_rng(seed: int, day: dt.date) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, day.toordinal(), 0xDA7]))


def generate_day(day: dt.date, spec: SyntheticSpec | None = None) -> SyntheticDay:
    """Generate ``spec.rows_per_day`` impressions of ``day`` (deterministic per day and spec).

    Columns: ``impression_id`` (int64, unique across days), ``event_ts`` (UTC timestamp,
    sorted), ``clicked`` (int64 0/1), ``dense_0..dense_7``, and the sparse columns
    ``user_id, ad_id, campaign_id, advertiser_id, quest_category, placement, hour_of_day``
    (int64) plus ``device_type, country`` (strings).
    """
    spec = spec or SyntheticSpec()
    if not isinstance(day, dt.date) or isinstance(day, dt.datetime):
        raise TypeError(f"day must be a datetime.date, got {day!r}")
    w = _world(spec.seed, spec.num_users, spec.num_ads)
    rng = _day_rng(spec.seed, day)
    n = spec.rows_per_day

    # when: a diurnal hour profile, microseconds uniform within the hour; rows sorted by time
    hour = _draw(rng, w.hour_cdf, n)
    micros = hour * 3_600_000_000 + rng.integers(0, 3_600_000_000, n)
    order = np.argsort(micros, kind="stable")
    hour, micros = hour[order], micros[order]

    user = _draw(rng, w.user_cdf, n)
    ad = _draw(rng, w.ad_cdf, n)
    campaign = w.ad_campaign[ad]
    advertiser = w.campaign_advertiser[campaign]
    category = w.ad_category[ad]
    segment = w.user_segment[user]
    country = w.user_country[user]
    device = np.where(rng.random(n) < 0.85, w.user_device[user], rng.integers(0, len(DEVICES), n))
    placement = _draw(rng, w.placement_cdf, n)

    activity = w.user_activity[user]
    sessions_7d = rng.poisson(activity * 7.0)
    position = 1 + rng.poisson(w.placement_position[placement])
    price = w.ad_price[ad] * np.exp(rng.normal(0.0, 0.3, n))
    recency_h = rng.exponential(24.0 / np.maximum(activity, 0.05))
    noise_pareto = rng.pareto(1.5, n)
    noise_normal = rng.normal(0.0, 1.0, n)
    cat_clicks_30d = rng.poisson(0.4 * activity * np.exp(w.affinity[segment, category]))

    dense_f = np.stack([
        np.log1p(sessions_7d), np.zeros(n), position - 1.0, np.log(price),
        np.log1p(recency_h), np.zeros(n), np.zeros(n), np.zeros(n),
    ], axis=1)
    phase = 2 * np.pi * day.weekday() / 7
    logit = (
        BASE_LOGIT
        + w.user_bias[user] + w.ad_bias[ad] + w.campaign_effect[campaign]
        + w.advertiser_effect[advertiser] + w.affinity[segment, category]
        + w.placement_effect[placement] + w.device_effect[device] + w.country_effect[country]
        + w.hour_effect[hour] + dense_f @ DENSE_WEIGHTS
        + 0.10 * np.sin(phase) + w.category_drift[category] * np.cos(phase)
    )
    prob = _sigmoid(logit)
    clicked = (rng.random(n) < prob).astype(np.int64)

    midnight_us = (day.toordinal() - dt.date(1970, 1, 1).toordinal()) * 86_400 * 1_000_000
    ts = midnight_us + micros
    columns = {
        IMPRESSION_ID: pa.array(day.toordinal() * _ID_STRIDE + np.arange(n, dtype=np.int64)),
        EVENT_TS: pa.array(ts, type=pa.timestamp("us", tz="UTC")),
        SYNTHETIC_LABEL: pa.array(clicked),
        "dense_0": pa.array(sessions_7d.astype(np.int64)),
        "dense_1": pa.array(w.ad_hist_ctr[ad]),
        "dense_2": pa.array(position.astype(np.int64)),
        "dense_3": pa.array(np.round(price, 4)),
        "dense_4": pa.array(np.round(recency_h, 3)),
        "dense_5": pa.array(noise_pareto),
        "dense_6": pa.array(noise_normal),
        "dense_7": pa.array(cat_clicks_30d.astype(np.int64)),
        "user_id": pa.array(user),
        "ad_id": pa.array(ad),
        "campaign_id": pa.array(campaign),
        "advertiser_id": pa.array(advertiser),
        "quest_category": pa.array(category),
        "placement": pa.array(placement),
        "device_type": pa.array(np.asarray(DEVICES, dtype=object)[device], type=pa.string()),
        "country": pa.array(np.asarray(COUNTRIES, dtype=object)[country], type=pa.string()),
        "hour_of_day": pa.array(hour),
    }
    assert tuple(c for c in columns if c.startswith("dense_")) == SYNTHETIC_DENSE
    assert all(c in columns for c in SYNTHETIC_SPARSE)
    return SyntheticDay(day=day, table=pa.table(columns), click_prob=prob)


def generate_table(day: dt.date, spec: SyntheticSpec | None = None) -> pa.Table:
    """The event rows of :func:`generate_day` alone."""
    return generate_day(day, spec).table


def oracle_metrics(day: dt.date, spec: SyntheticSpec | None = None) -> dict[str, float]:
    """Metrics of the true click probabilities against the sampled labels of ``day``.

    This is the ceiling for any model: ``oracle_auc``, ``oracle_logloss``,
    ``oracle_normalized_entropy``, ``oracle_calibration``, plus ``rows`` and ``ctr``.
    """
    from ads_ranking_pipelines.metrics import evaluate

    g = generate_day(day, spec)
    m = evaluate(g.labels, g.click_prob)
    out = {f"oracle_{k}": v for k, v in m.items() if k not in ("rows", "ctr")}
    out["rows"], out["ctr"] = m["rows"], m["ctr"]
    return out


def oracle_auc(day: dt.date, spec: SyntheticSpec | None = None) -> float:
    """ROC AUC of the true probabilities on ``day``'s sampled labels: the best any model can do."""
    return oracle_metrics(day, spec)["oracle_auc"]


def oracle_logloss(day: dt.date, spec: SyntheticSpec | None = None) -> float:
    """Logloss of the true probabilities on ``day``'s sampled labels."""
    return oracle_metrics(day, spec)["oracle_logloss"]


def specified_design(table: pa.Table) -> tuple[np.ndarray, list[np.ndarray]]:
    """The true click model's form in observed columns: ``(dense [n, 6], categoricals)``.

    A correctly specified model is linear in these (logistic link): one effect per user, ad,
    campaign, advertiser, placement, device, country, hour and category, one per
    (user, category) pair (the affinity acts through the user's hidden segment, which the pair
    nests), and the dense terms exactly as they enter the logit (``DENSE_WEIGHTS``). Two latent
    terms also have observed proxies, entered on their own scale: the ad's historical CTR
    (``dense_1``, as a logit: it estimates the ad's quality from far more impressions than a
    window holds) and the user's clicks on the category (``dense_7``, log1p: it grows with
    ``exp(affinity)``).
    """
    col = {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}
    dense = np.stack([
        np.log1p(col["dense_0"].astype(np.float64)),
        col["dense_2"].astype(np.float64) - 1.0,
        np.log(col["dense_3"].astype(np.float64)),
        np.log1p(col["dense_4"].astype(np.float64)),
        _logit(np.clip(col["dense_1"].astype(np.float64), 1e-4, 1 - 1e-4)),
        np.log1p(col["dense_7"].astype(np.float64)),
    ], axis=1)
    user = col["user_id"].astype(np.int64)
    category = col["quest_category"].astype(np.int64)
    cats = [user, col["ad_id"], col["campaign_id"], col["advertiser_id"], col["placement"],
            col["device_type"], col["country"], col["hour_of_day"], category,
            user * NUM_CATEGORIES + category]
    return dense, [np.asarray(c) for c in cats]
