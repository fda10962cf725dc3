"""Build cattn: one Cython extension (cattn._ext) compiled with csrc/*.c.

* OpenMP is detected by a test compile (with the same compile and link flags
  as the extension). With gcc or clang on Linux a build that cannot find it
  FAILS with a message saying what to install; set CATTN_NO_OPENMP=1 to build
  single-threaded on purpose. Other compilers / platforms fall back to a
  single-threaded build with a visible warning.
* csrc/ (drivers) and csrc/kernels/ref/ (portable kernels) are built for
  the baseline target; each ISA folder csrc/kernels/<isa>/ gets that ISA's
  flags alone (ISA_FLAGS; x86-64 only), and cpu.c picks the kernels at run
  time.
* No host-tuned or fast-math flags (the project's design rule; docs/kernels.md): IEEE semantics, portable code.

Environment variables read at build time:

  CATTN_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer build
                     (-fsanitize=address,undefined, no recovery from UB, -O1 -g,
                     frame pointers, -fno-wrapv so signed overflow is reported),
                     on compile AND link, OpenMP kept. The extension then needs
                     the ASan runtime preloaded into the (uninstrumented) Python:
                     tools/sanitize.sh builds it and runs the tests that way.
  CATTN_NO_OPENMP=1  build without OpenMP (single-threaded), on purpose.
  CATTN_PORTABLE_ONLY=1  the portable kernels alone (what a non-x86 build
                     compiles; testable on x86: CI builds it so).

-fsanitize flags put in CFLAGS / LDFLAGS by hand are passed to the OpenMP probe's
link step too, so such a build keeps OpenMP as well.
"""
import glob
import os
import platform
import shutil
import sys
import tempfile

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
IS_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
PORTABLE_ONLY = os.environ.get("CATTN_PORTABLE_ONLY", "") not in ("", "0")
# per ISA folder: the compiler flags it needs, then flags dropped after a
# probe when the compiler lacks them
_TUNE = ["-mno-avx256-split-unaligned-load", "-mno-avx256-split-unaligned-store",
         "-ffp-contract=fast"]
ISA_FLAGS = {
    "avx2": (["-mavx2", "-mfma"], _TUNE),
    # F, BW, VL, DQ: what cpu.c requires for the path (its VNNI function is
    # marked with a target attribute and runs only where the CPU has VNNI)
    "avx512": (["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma"], _TUNE),
}


def _sources(*parts):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", *parts)))


CSRC = _sources("*.c") + _sources("kernels", "ref", "*.c")
ISA_SRC = {} if PORTABLE_ONLY or not IS_X86 else {
    isa: _sources("kernels", isa, "*.c") for isa in ISA_FLAGS}
HEADERS = _sources("*.h") + _sources("kernels", "*.h") + _sources("kernels", "*", "*.h")

OMP_TEST = r"""
#include <omp.h>
int main(void) { int n = 0;
#pragma omp parallel reduction(+:n)
  n += 1;
  return n > 0 ? 0 : 1; }
"""


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "false", "off")


SANITIZE = _env_flag("CATTN_SANITIZE")
NO_OPENMP = _env_flag("CATTN_NO_OPENMP")

SAN_CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fno-wrapv",
              "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
SAN_LDFLAGS = ["-fsanitize=address,undefined"]

OMP_MISSING = """
cattn: OpenMP was not found: {why}
  compiler: {cc} ({family})
  cattn's kernels are parallelised with OpenMP; a silent single-threaded build
  would be much slower than intended, so the build stops here. Either
  - install OpenMP support for this compiler:
      gcc:   the libgomp runtime ships with gcc (Debian/Ubuntu: apt-get install gcc
             libgomp1; Fedora: dnf install gcc libgomp; Alpine: apk add gcc libgomp)
      clang: the LLVM OpenMP runtime (Debian/Ubuntu: apt-get install libomp-dev;
             Fedora: dnf install libomp-devel)
  - or build single-threaded on purpose:  CATTN_NO_OPENMP=1 pip install .
"""


class BuildExt(build_ext):
    def _compiles(self, code, cflags, ldflags=(), link=True):
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write(code)
            objs = self.compiler.compile([src], output_dir=tmp, extra_postargs=list(cflags))
            if link:
                self.compiler.link_executable(objs, os.path.join(tmp, "probe"),
                                              extra_postargs=list(ldflags))
            return True
        except Exception:
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _compiler_family(self):
        """'clang', 'gcc' or None (anything else), by what the compiler defines."""
        if self._compiles("#ifndef __clang__\n#error \"cattn probe: not clang\"\n#endif\nint x;\n", [], link=False):
            return "clang"
        if self._compiles("#ifndef __GNUC__\n#error \"cattn probe: not gcc\"\n#endif\nint x;\n", [], link=False):
            return "gcc"
        return None

    def build_extensions(self):
        # -ffp-contract=off: the ISA-independent C (drivers, epilogues, the
        # portable kernels) rounds every * and + on its own on every CPU, as
        # the references do; the ISA folders set their own contraction
        cflags = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function", "-ffp-contract=off"]
        ldflags = []
        if SANITIZE:
            # after the -O3 above and Python's own CFLAGS (-fwrapv would hide
            # signed overflow from UBSan): the last flag on the command line wins
            cflags += SAN_CFLAGS
            ldflags += SAN_LDFLAGS
            sys.stderr.write("cattn: CATTN_SANITIZE=1: building with "
                             + " ".join(SAN_CFLAGS) + "\n")
        # -fsanitize given by hand in CFLAGS/LDFLAGS: distutils compiles the probe
        # with CFLAGS but links executables without LDFLAGS; link it like the module
        env_san = [f for f in (os.environ.get("CFLAGS", "") + " " + os.environ.get("LDFLAGS", "")).split()
                   if f.startswith("-fsanitize") and not f.startswith("-fsanitize-recover")]
        probe_ld = ldflags + [f for f in env_san if f not in ldflags]
        cc = (getattr(self.compiler, "compiler_so", None) or [self.compiler.compiler_type])[0]
        if NO_OPENMP:
            sys.stderr.write("cattn: CATTN_NO_OPENMP=1: building single-threaded (no OpenMP), "
                             "on purpose.\n")
        elif self._compiles(OMP_TEST, cflags + ["-fopenmp"], probe_ld + ["-fopenmp"]):
            cflags.append("-fopenmp")
            ldflags.append("-fopenmp")
        else:
            family = self._compiler_family()
            if sys.platform.startswith("linux") and family in ("gcc", "clang"):
                why = ("a test program with -fopenmp did not compile and link "
                       "(omp.h or the OpenMP runtime library is missing)")
                raise SystemExit(OMP_MISSING.format(why=why, cc=cc, family=family))
            bar = "=" * 78
            sys.stderr.write(f"{bar}\nWARNING: cattn: no OpenMP found for compiler {cc!r} "
                             f"on {sys.platform}; building SINGLE-THREADED.\n"
                             f"Install OpenMP for this compiler for a parallel build, or set "
                             f"CATTN_NO_OPENMP=1 to silence this warning.\n{bar}\n")
        probe_ld = ldflags + [f for f in env_san if f not in ldflags]
        self.isa_flags = {}
        for isa in ISA_SRC:
            need, rest = ISA_FLAGS[isa]
            self.isa_flags[isa] = need + [
                f for f in rest if self._compiles("int main(void){return 0;}", cflags + [f], probe_ld)]
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        # pip builds in the source tree and build_ext skips an extension whose
        # sources are older than the last build: a sanitizer (or no-OpenMP)
        # build after a normal one would silently keep the old module. Rebuild
        # whenever the flags differ from the last build's.
        flags = repr((cflags, ldflags, self.isa_flags, PORTABLE_ONLY))
        stamp = os.path.join(self.build_temp, "cattn-build-flags.txt")
        try:
            with open(stamp) as f:
                same = f.read() == flags
        except OSError:
            same = False
        if not same:
            self.force = True
        super().build_extensions()
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp, "w") as f:
            f.write(flags)

    def build_extension(self, ext):
        # each ISA folder compiled with its own flags; its files stay
        # dependencies, so editing one relinks the module
        for isa, files in ISA_SRC.items():
            ext.depends = list(ext.depends or []) + files
            objs = self.compiler.compile(
                files, output_dir=self.build_temp, include_dirs=ext.include_dirs,
                macros=ext.define_macros, depends=ext.depends,
                extra_postargs=ext.extra_compile_args + self.isa_flags[isa])
            ext.extra_objects = list(ext.extra_objects or []) + objs
        super().build_extension(ext)


ext = Extension(
    "cattn._ext",
    sources=["cattn/_ext.pyx"] + CSRC,
    include_dirs=["csrc", numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    + ([("CATTN_PORTABLE_ONLY", "1")] if PORTABLE_ONLY else []),
    depends=HEADERS + glob.glob("cattn/*.pxi"),
)

setup(
    ext_modules=cythonize([ext], language_level=3,
                          compiler_directives={"boundscheck": False, "wraparound": False}),
    cmdclass={"build_ext": BuildExt},
)
