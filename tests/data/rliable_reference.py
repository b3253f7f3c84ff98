"""Writes rliable_reference.json: rliable 1.2.0's outputs on fixed inputs, for tests/test_compare.py.

rliable is not a dependency (its repository was archived in 2025; its PyPI sdist pulls arch, statsmodels and
seaborn). The values were computed once with it, in a throwaway environment:

    uv venv /tmp/rliable && VIRTUAL_ENV=/tmp/rliable uv pip install rliable==1.2.0 "statsmodels<0.15" "pandas<3"
    /tmp/rliable/bin/python tests/data/rliable_reference.py

(rliable 1.2.0, arch 7.2.0, statsmodels 0.14, numpy 2.4, scipy 1.17: arch 7.2 fails to import with
statsmodels 0.15.)
"""

import json
from pathlib import Path

import numpy as np
import rliable
from rliable import library as rly
from rliable import metrics

rng = np.random.default_rng(7)
cases = {
    "three-vs-three": (rng.normal(300, 50, 3), rng.normal(250, 50, 3)),
    "five-vs-five-with-ties": (np.array([500.0, 500, 480, 120, 500]), np.array([500.0, 300, 310, 500, 90])),
    "ten-vs-six": (rng.normal(420, 40, 10), rng.normal(400, 80, 6)),
    "some-fail": (np.where(rng.random(20) < 0.2, 20.0, 450.0) + rng.normal(0, 10, 20), rng.normal(380, 30, 20)),
}
REPS = 20_000
out = {"rliable": getattr(rliable, "__version__", "1.2.0"), "reps": REPS, "cases": []}
for name, (x, y) in cases.items():
    taus = np.linspace(min(x.min(), y.min()) - 1, max(x.max(), y.max()) + 1, 11)
    poi, poi_ci = rly.get_interval_estimates(
        {"xy": [x[:, None], y[:, None]]},
        metrics.probability_of_improvement,
        reps=REPS,
        random_state=np.random.RandomState(0),
    )
    profiles, profile_cis = rly.create_performance_profile({"x": x[:, None]}, taus, reps=REPS)
    out["cases"].append(
        {
            "name": name,
            "x": x.tolist(),
            "y": y.tolist(),
            "taus": taus.tolist(),
            "probability_of_improvement": float(poi["xy"]),
            "probability_of_improvement_interval": np.asarray(poi_ci["xy"]).ravel().tolist(),
            "performance_profile": np.asarray(profiles["x"]).tolist(),
            "performance_profile_interval": np.asarray(profile_cis["x"]).tolist(),
            "iqm": float(metrics.aggregate_iqm(x[:, None])),
            "median": float(metrics.aggregate_median(x[:, None])),
            "mean": float(metrics.aggregate_mean(x[:, None])),
        }
    )
Path(__file__).with_name("rliable_reference.json").write_text(json.dumps(out, indent=1) + "\n")
