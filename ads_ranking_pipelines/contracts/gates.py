"""The gates of a new model version and the champion chain: one pure decision, imported by both sides.

The evaluation job walks the chain over a run's days (day d+1 is compared with the champion
after day d's verdict); Dagster recomputes each day's step from the metrics the job returns
before it writes anything to the registry. Numbers in, verdicts out: no Dagster, Ray or torch.

Days run out of order (a day re-run after later days, a backfill of history): a champion whose
training window reaches the evaluated day has seen its labels, so it is not compared there; the
day's version is compared with the newest earlier champion that did not train on the day
(:func:`comparison_for`), and a version never replaces a champion trained on newer data
(:func:`gate_step`): re-running the past does not roll the served model back in time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CHECK_BASELINE = "not_worse_than_xgboost_baseline"
CHECK_CHAMPION = "not_worse_than_champion"
CHECK_CALIBRATION = "calibrated"
CHECKS = (CHECK_BASELINE, CHECK_CHAMPION, CHECK_CALIBRATION)


class GateConfig(BaseModel):
    """The thresholds of the gates (the run config of ``model_evaluation``, as a pure model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_auc_drop_vs_champion: float = 0.005
    max_auc_gap_vs_baseline: float = 0.02
    min_calibration: float = 0.7
    max_calibration: float = 1.4
    promote: bool = Field(True, description="a version whose gates all pass becomes champion")


class ChampionRef(BaseModel):
    """A model version as a champion: where it is and the last day of its training window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str
    uri: str
    trained_through: dt.date


def comparison_for(eval_day: dt.date, champion: ChampionRef | None,
                   earlier: Sequence[ChampionRef] = ()) -> ChampionRef | None:
    """The model a version evaluated on ``eval_day`` is compared with: the champion, unless its
    window reaches ``eval_day`` (it saw the day's labels); then the champion in ``earlier`` (past
    champions) with the newest window that ends before the day; None if there is none."""
    if champion is None or champion.trained_through < eval_day:
        return champion
    fair = [c for c in earlier if c.trained_through < eval_day]
    return max(fair, key=lambda c: c.trained_through, default=None)


@dataclasses.dataclass(frozen=True)
class Verdict:
    check: str
    day: str
    passed: bool
    text: str                      # the numbers, one line
    metadata: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class GateStep:
    """One day of the chain: the verdicts of ``version`` and the champion before and after."""

    day: str
    version: str
    verdicts: tuple[Verdict, ...]
    champion_before: str | None
    champion_after: str | None
    held_back: str = ""            # why a version whose gates passed was not promoted

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def promotes(self) -> bool:
        return self.champion_after != self.champion_before

    def to_dict(self) -> dict[str, Any]:
        return {"day": self.day, "version": self.version, "passed": self.passed, "promotes": self.promotes,
                "champion_before": self.champion_before, "champion_after": self.champion_after,
                "held_back": self.held_back, "verdicts": [dataclasses.asdict(v) for v in self.verdicts]}


def gate_verdicts(day: str, m: dict[str, Any], gates: GateConfig) -> list[Verdict]:
    """The three gates of one day's metrics ``m`` under ``gates``."""
    auc, base, cal = float(m["auc"]), float(m["baseline_auc"]), float(m["calibration"])
    gap = gates.max_auc_gap_vs_baseline
    out = [Verdict(CHECK_BASELINE, day, auc >= base - gap,
                   f"{day}: auc {auc:.4f} vs xgboost {base:.4f} (lift {auc - base:+.4f}, allowed -{gap})",
                   {"auc": auc, "baseline_auc": base, "lift": auc - base, "margin": gap})]
    if "champion_auc" in m:
        champ, drop = float(m["champion_auc"]), gates.max_auc_drop_vs_champion
        out.append(Verdict(CHECK_CHAMPION, day, auc >= champ - drop,
                           f"{day}: auc {auc:.4f} vs champion {m.get('champion_version')} {champ:.4f} "
                           f"(lift {auc - champ:+.4f}, allowed -{drop})",
                           {"auc": auc, "champion_auc": champ, "lift": auc - champ, "margin": drop,
                            "champion_version": str(m.get("champion_version"))}))
    else:
        out.append(Verdict(CHECK_CHAMPION, day, True, f"{day}: {m.get('no_champion_reason') or 'no comparable champion yet'}",
                           {"auc": auc, "champion_version": "none"}))
    lo, hi = gates.min_calibration, gates.max_calibration
    out.append(Verdict(CHECK_CALIBRATION, day, lo <= cal <= hi,
                       f"{day}: calibration {cal:.3f} (allowed {lo}..{hi})",
                       {"calibration": cal, "min": lo, "max": hi}))
    return out


def gate_step(day: str, version: str, trained_through: dt.date, m: dict[str, Any], gates: GateConfig,
              champion: ChampionRef | None) -> GateStep:
    """Day ``day`` of the chain: ``version`` (trained on days up to ``trained_through``), with its
    metrics ``m``, becomes the champion for the days after if its gates pass and its data is newer
    than ``champion``'s. A failed gate, or a champion trained on newer data, changes nothing."""
    verdicts = tuple(gate_verdicts(day, m, gates))
    passed = all(v.passed for v in verdicts)
    held_back = ""
    if passed and champion is not None and champion.version != version and champion.trained_through > trained_through:
        held_back = (f"{version} (trained through {trained_through}) is not promoted: champion {champion.version} "
                     f"was trained on newer data (through {champion.trained_through})")
    promoted = passed and gates.promote and not held_back and (champion is None or champion.version != version)
    before = champion.version if champion else None
    return GateStep(day, version, verdicts, before, version if promoted else before, held_back)
