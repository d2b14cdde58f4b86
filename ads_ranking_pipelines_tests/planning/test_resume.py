"""The resume key and the decision to take over an earlier attempt (``planning/resume.py``)."""

from __future__ import annotations

from ads_ranking_pipelines.planning.resume import components, decide, resume_key, why_fresh

DAYS = ["2026-03-10", "2026-03-11"]


def _parts(lr=0.01, code="abc", data="f1"):
    return components("m", DAYS, {"learning_rate": lr, "epochs": 2}, code, data)


def test_the_key_names_the_work_not_the_run():
    assert resume_key(_parts()) == resume_key(_parts())
    assert len({resume_key(p) for p in (_parts(), _parts(lr=0.02), _parts(code="abd"), _parts(data="f2"),
                                       components("other", DAYS, {"learning_rate": 0.01, "epochs": 2}, "abc", "f1"),
                                       components("m", DAYS[:1], {"learning_rate": 0.01, "epochs": 2}, "abc", "f1"))}) == 6


def test_the_same_work_resumes_and_any_change_starts_fresh_naming_it():
    fresh = {d: f"{d.replace('-', '')}-run2" for d in DAYS}
    earlier = {"key": resume_key(_parts()), "components": _parts(), "run_id": "run1",
               "versions": {d: f"{d.replace('-', '')}-run1" for d in DAYS}}
    same = decide(earlier, _parts(), DAYS, fresh, "run2")
    assert same.resumed_from == "run1" and same.versions == earlier["versions"]
    for parts, why in ((_parts(lr=0.02), "config changed (learning_rate: 0.01 -> 0.02)"),
                       (_parts(code="new"), "code version changed (abc -> new)"),
                       (_parts(data="f2"), "data window changed (fingerprint f1 -> f2)")):
        d = decide(earlier, parts, DAYS, fresh, "run2")
        assert (d.resumed_from, d.versions, d.reason) == (None, fresh, why)
    assert decide(None, _parts(), DAYS, fresh, "run2").reason == "no earlier attempt of this model and range"
    assert decide(earlier, _parts(), DAYS, fresh, "run2", allowed=False).versions == fresh
    assert why_fresh(earlier, _parts(lr=0.02, code="x")).count(";") == 1       # both changes named
