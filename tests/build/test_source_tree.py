"""An unbuilt source tree on sys.path: `import cattn` says what to do, and
`python -m pytest tests` started in the repository root (which puts the root
first on sys.path) still tests the installed cattn (tests/conftest.py).

Both run in a child interpreter over a copy of the package without its
compiled extension, laid out as a repository (cattn/, tests/conftest.py)."""
import os
import shutil
import subprocess
import sys

import pytest

import cattn

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))    # tests/
# where the cattn under test lives (site-packages, or a source tree built in place)
INSTALLED = os.path.dirname(os.path.dirname(os.path.abspath(cattn.__file__)))


def _unbuilt_repo(tmp_path):
    """tmp_path/repo: cattn/ without _ext.*, tests/conftest.py and the
    support package it imports (tests/cattn_testing/)."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.dirname(os.path.abspath(cattn.__file__)), repo / "cattn",
                    ignore=shutil.ignore_patterns("__pycache__", "_ext.*.so", "_ext.*.pyd",
                                                  "_ext.so", "_ext.pyd", "_ext.c"))
    assert not any(p.name.startswith("_ext.") and p.suffix in (".so", ".pyd")
                   for p in (repo / "cattn").iterdir())
    (repo / "tests").mkdir()
    shutil.copy(os.path.join(TESTS, "conftest.py"), repo / "tests" / "conftest.py")
    shutil.copytree(os.path.join(TESTS, "cattn_testing"), repo / "tests" / "cattn_testing",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def _run(args, cwd, **extra_env):
    env = dict(os.environ)
    # the cattn under test stays importable, but after the working directory
    env["PYTHONPATH"] = os.pathsep.join([INSTALLED] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("PYTEST_ADDOPTS", None)        # e.g. a --junitxml path of the outer run
    env.update(extra_env)
    return subprocess.run([sys.executable] + args, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_import_from_unbuilt_source_tree_says_what_to_do(tmp_path):
    repo = _unbuilt_repo(tmp_path)
    # -c: the working directory comes first
    r = _run(["-c", "import cattn; print(cattn._ext.__file__)"], cwd=repo)
    if r.returncode == 0 and not r.stdout.strip().startswith(str(repo)):
        pytest.skip("an editable install's import hook finds the built extension from the "
                    f"unbuilt copy ({r.stdout.strip()}); CI's regular install checks this")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), r.stderr
    assert "unbuilt source tree" in last and "pip install ." in last, last
    assert "build_ext --inplace" in last, last
    assert "partially initialized" not in last, last


def test_python_m_pytest_from_the_source_root_uses_the_installed_cattn(tmp_path):
    repo = _unbuilt_repo(tmp_path)
    (repo / "tests" / "test_which.py").write_text(
        "import os, cattn\n"
        f"REPO = {str(repo)!r}\n"
        "def test_which():\n"
        "    assert not os.path.abspath(cattn.__file__).startswith(REPO + os.sep)\n"
        "    assert cattn.matmul([[1.0, 2.0]], [[3.0], [4.0]])[0, 0] == 11.0\n")
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=repo)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "1 passed" in r.stdout, r.stdout
