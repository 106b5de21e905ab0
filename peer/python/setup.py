"""pip install --no-build-isolation ./peer/python: the sgp package with the libsgp.so it was built with.

pyproject.toml names setuptools as the build backend; --no-build-isolation
has pip build with the setuptools and wheel already installed (Debian's
python3-setuptools and python3-wheel) instead of downloading them, so it
works offline. Building runs `make` in the source tree this directory
belongs to (build/libsgp.so; `make deps` installs what the C build needs)
and puts the library inside the package, so that `import sgp` finds it from
anywhere, without environment variables. The release is SGP_VERSION of
peer/lib/sgp.h, written into the package as sgp/_version.py.
"""

import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def version():
    with open(os.path.join(ROOT, "peer", "lib", "sgp.h")) as f:
        return re.search(r'#define SGP_VERSION "([^"]+)"', f.read()).group(1)


class BuildWithLibrary(build_py):
    """build_py, plus libsgp.so built by the source tree's Makefile and
    sgp/_version.py, the release of sgp.h the package was built from (the
    package reads it instead of a number of its own)."""

    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, "sgp", "_version.py"), "w") as f:
            f.write("# Written by setup.py from SGP_VERSION in peer/lib/sgp.h.\nversion = %r\n"
                    % self.distribution.get_version())
        lib = os.path.join(ROOT, "build", "libsgp.so")
        if os.environ.get("SGP_LIB"):
            lib = os.environ["SGP_LIB"]
        else:
            jobs = str(os.cpu_count() or 1)
            rc = subprocess.call(["make", "-C", ROOT, "-j" + jobs, "--no-print-directory", "build/libsgp.so"])
            if rc != 0:
                raise SystemExit("sgp: `make build/libsgp.so` failed in %s (does `make deps` install what is "
                                 "missing?)" % ROOT)
        shutil.copy(lib, os.path.join(self.build_lib, "sgp", "libsgp.so"))


class BinaryDistribution(Distribution):
    """The package carries a shared library: the wheel is for this platform."""

    def has_ext_modules(self):
        return True


setup(
    name="sgp",
    version=version(),
    description="Stochastic Gradient Push: decentralized gossip training for your own (PyTorch) training loop",
    long_description=open(os.path.join(HERE, "sgp", "__init__.py")).read().split('"""')[1],
    long_description_content_type="text/plain",
    license="see the source tree",
    packages=["sgp"],
    package_data={"sgp": ["libsgp.so"]},
    python_requires=">=3.8",
    install_requires=["numpy"],
    extras_require={"torch": ["torch"]},
    cmdclass={"build_py": BuildWithLibrary},
    distclass=BinaryDistribution,
    zip_safe=False,
)
