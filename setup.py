"""Build cattn: one Cython extension (cattn._ext) compiled with csrc/*.c.

* OpenMP is detected by a test compile; without it the build succeeds,
  single-threaded, with a warning.
* Files named *_avx2.c alone get -mavx2 -mfma (x86-64 only); the rest is
  built for the baseline target, and cpu.c picks the kernels at run time.
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
CSRC = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "*.c")))
HEADERS = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "*.h")))
IS_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")

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
        self.avx2_flags = []
        if IS_X86:
            self.avx2_flags = ["-mavx2", "-mfma"]
            for f in ("-mno-avx256-split-unaligned-load", "-mno-avx256-split-unaligned-store"):
                if self._compiles("int main(void){return 0;}", [f]):
                    self.avx2_flags.append(f)
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        super().build_extensions()

    def build_extension(self, ext):
        special = [s for s in ext.sources if s.endswith("_avx2.c")]
        if special and self.avx2_flags:
            ext.sources = [s for s in ext.sources if s not in special]
            # still a dependency: editing only an *_avx2.c file must relink
            ext.depends = list(ext.depends or []) + special
            objs = self.compiler.compile(
                special, output_dir=self.build_temp, include_dirs=ext.include_dirs,
                macros=ext.define_macros, depends=ext.depends,
                extra_postargs=ext.extra_compile_args + self.avx2_flags)
            ext.extra_objects = list(ext.extra_objects or []) + objs
        super().build_extension(ext)


ext = Extension(
    "cattn._ext",
    sources=["cattn/_ext.pyx"] + CSRC,
    include_dirs=["csrc", numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    depends=HEADERS + glob.glob("cattn/*.pxi"),
)

setup(
    ext_modules=cythonize([ext], language_level=3,
                          compiler_directives={"boundscheck": False, "wraparound": False}),
    cmdclass={"build_ext": BuildExt},
)
