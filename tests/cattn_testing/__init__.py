"""Support package of cattn's tests (not installed; not part of cattn).

pytest puts tests/ on sys.path (rootdir conftest, "prepend" import mode),
from the repo root and from anywhere else, so test modules import it as
`cattn_testing` (a name no installed package uses). By concern:

  numerics    eps, result dtype, randn, assert_within / assert_close,
              threads_bitwise (what every checker shares)
  gemm        tolerances from error analysis; check_matmul, check_linear
  attention   attention tolerances; check_sdpa, check_weights
  rows        row-kernel tools: ulp_error, strided_variants
  paths       the kernel paths (PATHS), run_python, run_pytest (a fresh
              interpreter on a forced kernel path)
  strategies  hypothesis strategies: shapes, values, memory layouts
  properties  the property tests' checkers (NaN / inf inputs included)
  profiles    hypothesis profiles (default, ci, long), loaded by conftest.py
  minilm      the MiniLM model tests: require_model (module skips), corpus(n)

Every module imports cattn; strategies and profiles import hypothesis.
"""
