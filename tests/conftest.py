import numpy as np
import pytest

import cattn
import cattn._threads


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
