"""The CPU description (csrc/cpu_x86.c decodes CPUID; csrc/cpuinfo.c) and
the block sizes derived from it.

The CPUID decoding runs on recorded leaves of three CPUs (tests/fixtures/
cpuid/, see its README.txt): this machine's Zen 3 EPYC under KVM, an AMD
EPYC 9654 (Zen 4, AVX-512) and an Intel Xeon w7-2475X (Sapphire Rapids,
AVX-512, leaf 4). Each fixture's "expected" facts come from independent
sources (lscpu/sysfs, the dump's own decoded text, the vendor's specs),
never from a parser. Then this machine, against /proc/cpuinfo and sysfs.
"""
import glob
import json
import os

import pytest

import cattn

FIXTURES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fixtures", "cpuid", "*.json")))
ISA = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni")


def _load(path):
    with open(path) as f:
        d = json.load(f)
    leaves = {}
    for key, regs in d["leaves"].items():
        leaf, sub = key.split(".")
        leaves[(int(leaf, 16), int(sub))] = tuple(int(r, 16) for r in regs)
    return d, leaves, int(d["xcr0"], 16)


@pytest.fixture(params=FIXTURES, ids=lambda p: os.path.basename(p)[:-5])
def fixture(request):
    return _load(request.param)


def test_three_cpus_are_recorded():
    names = [os.path.basename(p) for p in FIXTURES]
    assert len(names) == 3 and any("zen3" in n for n in names) \
        and any("zen4" in n for n in names) and any("sapphire" in n for n in names)


def test_decoding_matches_the_recorded_cpu(fixture):
    d, leaves, xcr0 = fixture
    exp = d["expected"]
    cpu, _ = cattn._ext.parse_cpuid(leaves, xcr0)
    assert (cpu["vendor"], cpu["family"], cpu["model"]) == (exp["vendor"], exp["family"], exp["model"])
    assert cpu["brand"] == d["name"].strip()
    for flag in ISA:
        assert cpu["isa"][flag] == exp[flag], flag
    for level in ("l1d", "l2", "l3"):
        c = cpu[level]
        assert c["bytes"] == exp[f"{level}_bytes"], level
        assert c["ways"] == exp[f"{level}_ways"], level
        assert c["line"] == exp["line_bytes"], level
    assert cpu["l2"]["shared_by"] == exp["l2_shared_by"]
    assert cpu["l3"]["shared_by"] == exp["l3_shared_by"]
    want_source = "cpuid leaf 4" if exp["vendor"] == "GenuineIntel" else "cpuid leaf 0x8000001D"
    assert cpu["cache_source"] == want_source


def _kc_mc_nc(cpu, mr, nr, elt):
    """The documented model (csrc/cpuinfo.h), restated: KC from half of L1d
    (a multiple of 8, <= 256), MC from 9/32 of L2 (a multiple of MR, <= 480),
    NC from a quarter of one core's L3 share (a multiple of NR, 16 NR..8192)."""
    kc = min(256, max(64, cpu["l1d"]["bytes"] // 2 // (nr * elt) // 8 * 8))
    mc = min(480 // mr * mr, max(mr, cpu["l2"]["bytes"] * 9 // 32 // (kc * elt) // mr * mr))
    share = cpu["l3"]["bytes"] // max(1, cpu["l3"]["shared_by"])
    nc = min(8192 // nr * nr, max(16 * nr, share // 4 // (kc * elt) // nr * nr))
    return kc, mc, nc


def test_block_sizes_follow_the_caches(fixture):
    d, leaves, xcr0 = fixture
    cpu, blocks = cattn._ext.parse_cpuid(leaves, xcr0)
    for t, elt in (("f32", 4), ("f64", 8)):
        b = blocks[t]
        assert (b["KC"], b["MC"], b["NC"]) == _kc_mc_nc(cpu, b["MR"], b["NR"], elt), t
        # what the blocks are for: a B micro-panel within half of L1d, the
        # packed A block within L2, and KC the same on all three CPUs (the
        # order of the sums over K, and so every result, does not move)
        assert b["KC"] * b["NR"] * elt <= cpu["l1d"]["bytes"] // 2
        assert b["MC"] * b["KC"] * elt <= cpu["l2"]["bytes"] // 2
        assert b["KC"] == 256


def test_block_sizes_on_the_recorded_cpus():
    """The figures themselves, for the record (README's table)."""
    got = {}
    for path in FIXTURES:
        d, leaves, xcr0 = _load(path)
        _, b = cattn._ext.parse_cpuid(leaves, xcr0)
        got[os.path.basename(path).split("_")[0]] = tuple(b["f32"][k] for k in ("MC", "KC", "NC"))
    # Zen 3 (KVM, L3 shared by 2), Zen 4 (1 MiB L2, L3/16), SPR (2 MiB L2, L3/128)
    assert got == {"zen3": (144, 256, 4096), "zen4": (288, 256, 512), "sapphire": (480, 256, 256)}


def test_os_state_gates_the_instruction_sets():
    """AVX needs XCR0 bits 1-2 and AVX-512 bits 5-7 (the OS saves those
    registers): the same CPU under an OS that enables less has less."""
    path = next(p for p in FIXTURES if "zen4" in p)
    _, leaves, xcr0 = _load(path)
    no512, _ = cattn._ext.parse_cpuid(leaves, xcr0 & ~0xE0)
    assert no512["isa"]["avx2"] and not any(no512["isa"][f] for f in ISA if "512" in f)
    noavx, _ = cattn._ext.parse_cpuid(leaves, 0x3)
    assert not any(noavx["isa"].values())
    # OSXSAVE clear (CPUID.1:ECX bit 27): XCR0 cannot be read, nothing AVX
    l1 = list(leaves[(1, 0)])
    l1[2] &= ~(1 << 27)
    noxsave, _ = cattn._ext.parse_cpuid({**leaves, (1, 0): tuple(l1)}, xcr0)
    assert not any(noxsave["isa"].values())


def test_kernel_paths_on_the_recorded_cpus():
    """The paths cattn would choose among on each recorded CPU (best first):
    AVX-512 on Zen 4 and Sapphire Rapids, AVX2 on Zen 3; a path the CPU or
    its OS lacks is never among them."""
    built = cattn._ext.built_paths()
    got = {}
    for path in FIXTURES:
        _, leaves, xcr0 = _load(path)
        cpu, _ = cattn._ext.parse_cpuid(leaves, xcr0)
        name = next(n for n in ("zen3", "zen4", "sapphire") if n in path)
        got[name] = cpu["paths"]
        if name == "zen4":
            no512, _ = cattn._ext.parse_cpuid(leaves, xcr0 & ~0xE0)
            got["zen4 without ZMM state"] = no512["paths"]
    want = {"zen3": ("avx2", "portable"), "zen4": ("avx512", "avx2", "portable"),
            "sapphire": ("avx512", "avx2", "portable"),
            "zen4 without ZMM state": ("avx2", "portable")}
    assert got == {k: tuple(p for p in v if p in built) for k, v in want.items()}
    assert cattn._ext.cpu_info()["paths"] == cattn._ext.available_paths()


def test_cache_fallbacks():
    path = next(p for p in FIXTURES if "zen3" in p)
    _, leaves, xcr0 = _load(path)
    # no TOPOEXT (0x80000001 ECX bit 22): AMD's legacy leaves 0x80000005/6
    ext1 = list(leaves[(0x80000001, 0)])
    ext1[2] &= ~(1 << 22)
    legacy, blocks = cattn._ext.parse_cpuid({**leaves, (0x80000001, 0): tuple(ext1)}, xcr0)
    assert legacy["cache_source"] == "cpuid leaves 0x80000005/6"
    assert legacy["l1d"]["bytes"] == 32 << 10 and legacy["l1d"]["ways"] == 8
    assert legacy["l2"]["bytes"] == 512 << 10 and legacy["l2"]["ways"] == 8
    # (0x80000006 reports the whole package's L3 under this hypervisor)
    assert legacy["l3"]["bytes"] >= 32 << 20
    assert blocks["f32"]["KC"] == 256
    # no cache leaves at all: typical sizes, still KC = 256
    bare, blocks = cattn._ext.parse_cpuid({k: v for k, v in leaves.items() if k[0] < 2}, xcr0)
    assert bare["cache_source"].startswith("defaults")
    assert bare["l1d"]["bytes"] == 32 << 10 and blocks["f32"]["KC"] == 256
    # nothing at all: no vendor, no ISA, no crash
    empty, _ = cattn._ext.parse_cpuid({}, 0)
    assert empty["vendor"] == "" and not any(empty["isa"].values())


def _cpuinfo_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_this_cpu_matches_the_kernel():
    flags = _cpuinfo_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo flags (not Linux on x86)")
    isa = cattn._ext.cpu_info()["isa"]
    for flag in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                 "avx512_bf16"):
        assert isa[flag] == (flag in flags), flag


def test_this_cpus_caches_match_sysfs():
    base = "/sys/devices/system/cpu/cpu0/cache"
    if not os.path.isdir(base):
        pytest.skip("no sysfs cache description (not Linux)")
    cpu = cattn._ext.cpu_info()
    seen = 0
    for index in sorted(glob.glob(os.path.join(base, "index*"))):
        def read(name):
            with open(os.path.join(index, name)) as f:
                return f.read().strip()
        level, kind = int(read("level")), read("type")
        if kind == "Instruction" or level > 3:
            continue
        size = read("size")
        size = int(size[:-1]) << (10 if size.endswith("K") else 20) if size[-1] in "KM" else int(size)
        c = cpu["l1d" if level == 1 else f"l{level}"]
        assert c["bytes"] == size and c["ways"] == int(read("ways_of_associativity")), level
        seen += 1
    assert seen >= 2


def test_info_shows_the_cpu_and_blocks(capsys):
    cattn.show_config()
    out = capsys.readouterr().out
    cpu, b = cattn._ext.cpu_info(), cattn._ext.gemm_blocks()["f32"]
    assert "cpu_caches: L1D" in out and f"{cpu['family']}" in out
    assert f"f32 MC,KC,NC={b['MC']},{b['KC']},{b['NC']}" in out
    assert "kernel_paths: built" in out
