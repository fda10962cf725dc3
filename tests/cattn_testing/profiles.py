"""Hypothesis profiles for cattn's property tests (tests/test_properties_*.py),
imported once by tests/conftest.py.

  default  bounded and reproducible: a fixed number of examples per property,
           derandomized (the examples depend only on the test's code, never on
           a clock or a saved database), no deadline (2 shared cores make
           timings meaningless). The whole property suite stays within about
           a minute per kernel path.
  long     many examples, random seeds, failures printed with a reproduction
           blob: HYPOTHESIS_PROFILE=long pytest tests/test_properties_*.py
           (HYPOTHESIS_LONG_EXAMPLES=n overrides the number of examples).
  ci       alias of default (explicit name for CI scripts).

The profile named by HYPOTHESIS_PROFILE is loaded (default: "default").
A failing example found by any profile is kept as a plain regular test in
tests/test_regressions.py.
"""
import os

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
    # no "explain" phase: it re-runs failing examples many times (slow here)
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
)

settings.register_profile(
    "default",
    max_examples=int(os.environ.get("HYPOTHESIS_DEFAULT_EXAMPLES", "30")),
    derandomize=True,
    database=None,
    **_COMMON,
)
settings.register_profile("ci", parent=settings.get_profile("default"))
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("HYPOTHESIS_LONG_EXAMPLES", "1000")),
    derandomize=False,
    **_COMMON,
)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
