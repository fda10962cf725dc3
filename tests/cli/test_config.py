"""show_config() and the command line (`cattn info`, `cattn bench`)."""
import io

import numpy as np
import pytest

import cattn
from cattn.cli import bench as _bench
from cattn.cli import main
from cattn_testing.paths import run_python


def _config_text():
    buf = io.StringIO()
    cattn.show_config(file=buf)
    return buf.getvalue()


def test_show_config_prints_the_build():
    text = _config_text()
    assert f"version: {cattn.__version__}" in text
    assert "compiler: " in text and ("gcc" in text or "clang" in text)
    assert "openmp: " in text
    assert f"kernel_path: {cattn._ext.kernel_path()}" in text
    # the int8 micro-kernel: the path's, VNNI's only where the CPU has VNNI
    k8 = cattn._ext.int8_kernel()
    assert f"int8_kernel: {k8}" in text
    assert k8.startswith({"avx512": "avx512", "avx2": "avx2", "portable": "portable"}[
        cattn._ext.kernel_path()])
    assert ("vnni" in k8) <= cattn._ext.cpu_info()["isa"]["avx512_vnni"]
    # block sizes as derived from this CPU's caches (cpuinfo.c), KC fixed at 256
    b = cattn._ext.gemm_blocks()
    assert f"f32 MC,KC,NC={b['f32']['MC']},256,{b['f32']['NC']}" in text
    assert f"f64 MC,KC,NC={b['f64']['MC']},256,{b['f64']['NC']}" in text
    cpu = cattn._ext.cpu_info()
    assert f"cpu: {cpu['brand'] or cpu['vendor']}" in text and "cpu_caches: L1D" in text
    assert f"threads: {cattn.get_num_threads()}" in text


def test_show_config_reports_current_threads():
    with cattn.num_threads(3):
        assert "threads: 3" in _config_text()


def test_show_config_defaults_to_stdout(capsys):
    cattn.show_config()
    assert "kernel_path" in capsys.readouterr().out


def test_cli_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"version: {cattn.__version__}" in out and "block_sizes" in out


def test_python_dash_m_cattn_info():
    out = run_python("import runpy, sys; sys.argv = ['cattn', 'info']; "
                     "runpy.run_module('cattn', run_name='__main__')")
    assert "kernel_path" in out


def test_cli_bench_tiny(capsys):
    assert main(["bench", "--quick", "--tiny", "--threads", "1", "--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "cattn/numpy" in out and "matmul 8x8 @ 8x8" in out and "1 thread" in out
    assert "MISMATCH" not in out


def test_cli_bench_float64_tiny(capsys):
    assert main(["bench", "--tiny", "--dtype", "float64", "--no-torch"]) == 0
    assert "float64" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["bench", "--threads", "0"], ["bench", "--dtype", "int8"],
                                  ["nope"]])
def test_cli_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_bench_registry_runs_a_new_row():
    """another op can add rows: a suite registering one case shows up"""
    @_bench.suite
    def extra(sizes):
        x = np.ones(4, sizes.dtype)
        _bench.register("extra sum", 4, lambda: x * 2, lambda: x + x)
    try:
        rows = _bench.run(1, tiny=True, warmup=0.0, runs=1, min_run=0.0, use_torch=False)
    finally:
        _bench.SUITES.remove(extra)
    row = [r for r in rows if r["name"] == "extra sum"][0]
    assert row["agree"] and row["torch"] is None and row["cattn"] > 0


def test_bench_flags_a_disagreeing_row(capsys):
    @_bench.suite
    def wrong(sizes):
        _bench.register("wrong", 1, lambda: np.ones(3), lambda: np.zeros(3))
    try:
        rows = _bench.run(1, tiny=True, warmup=0.0, runs=1, min_run=0.0, use_torch=False)
    finally:
        _bench.SUITES.remove(wrong)
    _bench.format_table(rows)
    assert "MISMATCH" in capsys.readouterr().out


def test_cli_bench_tiny_with_torch():
    """torch column filled when torch is installed (own process: torch brings
    its own OpenMP runtime, kept out of the other tests)."""
    pytest.importorskip("torch")
    out = run_python("import sys; from cattn.cli import main; "
                     "sys.exit(main(['bench', '--tiny', '--threads', '2']))")
    row = [ln for ln in out.splitlines() if ln.startswith("matmul 8x8")][0]
    assert row.split()[6] != "-"    # name is 4 words: cattn numpy torch after it
