import importlib.machinery
import os
import sys

import numpy as np
import pytest

# `python -m pytest` puts the working directory first on sys.path: started in
# the repository root, the unbuilt source package would shadow the installed
# cattn. Drop the root from sys.path when its cattn/ has no compiled extension
# (a source tree built in place is still used).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _unbuilt_source_package(root):
    pkg = os.path.join(root, "cattn")
    return os.path.isdir(pkg) and not any(
        os.path.exists(os.path.join(pkg, "_ext" + s)) for s in importlib.machinery.EXTENSION_SUFFIXES)


if _unbuilt_source_package(_ROOT):
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

import cattn  # noqa: E402
import cattn._threads  # noqa: E402
from cattn_testing.paths import EXPECT_PATH_VARIABLE, PATHS  # noqa: E402


def pytest_report_header(config):
    """Which kernel paths this run covers, and which it cannot (the CPU or
    the build lacks them): tests/test_kernel_paths.py re-runs the op tests
    on every other path this CPU runs."""
    cpu = cattn._ext.cpu_info()
    runs = [p for p in PATHS if PATHS[p].available()]
    lacks = [p for p in PATHS if not PATHS[p].available()]
    return [f"cattn: {cpu['brand'] or cpu['vendor']} (family {cpu['family']}, model "
            f"{cpu['model']}); kernel path of this session: {cattn._ext.kernel_path()}; "
            f"paths this CPU runs: {', '.join(runs)}; skipped, the CPU or build lacks them: "
            f"{', '.join(lacks) or 'none'}"]


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
