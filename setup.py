"""Build cattn: one Cython extension (cattn._ext) compiled with csrc/*.c.

* OpenMP is detected by a test compile; without it the build succeeds,
  single-threaded, with a warning.
* csrc/ (drivers) and csrc/kernels/ref/ (portable kernels) are built for
  the baseline target; each ISA folder csrc/kernels/<isa>/ gets that ISA's
  flags alone (ISA_FLAGS; x86-64 only), and cpu.c picks the kernels at run
  time. CATTN_PORTABLE_ONLY=1 builds the portable path alone (what a non-x86
  build compiles; testable on x86).
* No host-tuned or fast-math flags (see DESIGN.md): IEEE semantics, portable code.
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
# per ISA folder: its compiler flags (flags the compiler lacks are dropped
# after a probe, except the first, which the folder needs)
ISA_FLAGS = {
    "avx2": ["-mavx2", "-mfma", "-mno-avx256-split-unaligned-load",
             "-mno-avx256-split-unaligned-store"],
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


class BuildExt(build_ext):
    def _compiles(self, code, cflags, ldflags=()):
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write(code)
            objs = self.compiler.compile([src], output_dir=tmp, extra_postargs=list(cflags))
            self.compiler.link_executable(objs, os.path.join(tmp, "probe"),
                                          extra_postargs=list(ldflags))
            return True
        except Exception:
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def build_extensions(self):
        cflags = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]
        ldflags = []
        if self._compiles(OMP_TEST, ["-fopenmp"], ["-fopenmp"]):
            cflags.append("-fopenmp")
            ldflags.append("-fopenmp")
        else:
            sys.stderr.write("WARNING: cattn: no OpenMP found; building single-threaded.\n")
        self.isa_flags = {}
        for isa in ISA_SRC:
            first, *rest = ISA_FLAGS[isa]
            self.isa_flags[isa] = [first] + [
                f for f in rest if self._compiles("int main(void){return 0;}", [f])]
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        super().build_extensions()

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
