import os

import numpy as np
import pytest

import cattn
import cattn._threads
from cattn_testing.paths import EXPECT_PATH_VARIABLE


def pytest_sessionstart(session):
    """A re-run on another kernel path (cattn_testing.paths.run_pytest) names
    the path it forces: fail the run at once if cattn did not select it."""
    want = os.environ.get(EXPECT_PATH_VARIABLE)
    if want and cattn._ext.kernel_path() != want:
        raise pytest.UsageError(f"{EXPECT_PATH_VARIABLE}={want}, but cattn runs on the "
                                f"{cattn._ext.kernel_path()} kernel path")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _restore_thread_setting():
    """set_num_threads is process-wide and has no public reset: restore the
    default after every test so tests stay independent."""
    saved = cattn._threads._global
    yield
    cattn._threads._global = saved


# hypothesis profiles ("default": bounded, "long": HYPOTHESIS_PROFILE=long),
# registered once for every test module that uses hypothesis (tests/ is on
# sys.path: pytest's "prepend" import mode, as for the test modules)
try:
    import hypothesis  # noqa: F401
except ImportError:
    pass
else:
    import cattn_testing.profiles  # noqa: F401
