"""pip install . builds libwharf and puts it inside the wharf package.

configure --disable-fs (no FUSE, curl or zstd) runs in a temporary
directory; only include/, common/ and loader/ are made, and the library
lands in the package as wharf/libwharf.so.0, the first place the package
looks (python/wharf/_lib.py).  CUDA is left out unless WHARF_CUDA names the
toolkit (WHARF_CUDA=/usr/local/cuda): a library built with it loads that
CUDA runtime at its first CUDA call (dlopen), and the package works without
it.
"""

import os
import re
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

TOP = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libwharf.so.0"


def version():
    with open(os.path.join(TOP, "configure.ac")) as f:
        m = re.search(r"AC_INIT\(\[wharf\],\s*\[([^]]+)\]", f.read())
    if not m:
        raise SystemExit("setup.py: no version in configure.ac's AC_INIT")
    return m.group(1)


class BuildError(SystemExit):
    pass


def run(cmd, cwd, log, env):
    log.write("$ %s\n" % " ".join(cmd))
    log.flush()
    try:
        rc = subprocess.call(cmd, cwd=cwd, stdout=log,
                             stderr=subprocess.STDOUT, env=env)
    except OSError as e:
        rc = "not run (%s)" % e
    if rc != 0:
        log.flush()
        with open(log.name) as f:
            tail = "".join(f.readlines()[-25:])
        raise BuildError(
            "building libwharf: %s failed (%s); the log is %s:\n%s\n"
            "The tools it needs "
            "on Debian/Ubuntu: apt-get install build-essential autoconf "
            "automake libtool pkg-config (and libjpeg62-turbo-dev for the "
            "jpeg decoder)" % (cmd[0], rc, log.name, tail))


def build_library(dest):
    """Configure and make libwharf in a temporary directory; copy it to
    dest.  The source tree gets nothing but what autoreconf writes when
    there is no configure yet (a git checkout)."""
    if os.path.exists(os.path.join(TOP, "config.status")):
        raise BuildError(
            "%s is configured in place (config.status): run make distclean "
            "there first; out-of-tree builds (build/plain) are fine" % TOP)
    # A make that runs pip (make check) must not hand its jobserver and
    # command-line variables to this separate build.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    cuda = env.get("WHARF_CUDA", "no") or "no"
    tmp = tempfile.mkdtemp(prefix="wharf-build-")
    with open(os.path.join(tmp, "build.log"), "w") as log:
        if not os.path.exists(os.path.join(TOP, "configure")):
            run(["autoreconf", "-fi"], TOP, log, env)
        run([os.path.join(TOP, "configure"), "-q", "--disable-fs",
             "--without-cuda" if cuda == "no" else "--with-cuda=" + cuda,
             "--cache-file=/dev/null"], tmp, log, env)
        jobs = "-j%d" % (os.cpu_count() or 1)
        for sub in ("include", "common", "loader"):
            run(["make", "-C", sub, jobs], tmp, log, env)
    shutil.copyfile(os.path.join(tmp, "loader", ".libs", LIBRARY), dest)
    os.chmod(dest, 0o755)
    shutil.rmtree(tmp)


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        build_library(self.library_path())

    def library_path(self):
        return os.path.join(self.build_lib, "wharf", LIBRARY)

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + [self.library_path()]


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: it is for this platform only."""

    def has_ext_modules(self):
        return True


setup(version=version(), package_dir={"": "python"}, packages=["wharf"],
      cmdclass={"build_py": BuildPyWithLibrary},
      distclass=BinaryDistribution)
