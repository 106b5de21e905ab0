"""The sgp package's own logic, with no peer and no network: where its
release comes from, which library it loads and which it refuses, what it
makes of the keyword arguments, and how libsgp's return codes become
results and sgp.Error. Run by tests/process/test_lib_python.c:

    SGP_LIB=build/libsgp.so python3 -m unittest tests/python/test_sgp_package.py

libsgp itself is called only where no peer starts: its version, its
defaults (sgp_options_init_sized) and the options sgp_open refuses before
opening anything. Everything past sgp_open goes to a stand-in library
(FakeLib) that records what the package hands it, so that what is checked
is the package's half of each call. NumPy (Peer's parameters) is Debian's;
PyTorch is not needed.
"""

import ctypes
import ctypes.util
import errno
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PACKAGE = os.path.join(ROOT, "peer", "python", "sgp")
sys.path.insert(0, os.path.dirname(PACKAGE))
import sgp  # noqa: E402


def header_release():
    with open(os.path.join(ROOT, "peer", "lib", "sgp.h")) as f:
        return re.search(r'#define SGP_VERSION "([^"]+)"', f.read()).group(1)


def python(code, cwd, pythonpath):
    """Run code in a fresh interpreter (a fresh import of sgp): its result."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


class Release(unittest.TestCase):
    """One number, peer/lib/sgp.h's SGP_VERSION: a package in a source tree
    reads that tree's header; a built one carries the _version.py setup.py
    wrote from it, which comes first."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sgp-package-test-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.python_dir = os.path.join(self.dir, "peer", "python")
        shutil.copytree(PACKAGE, os.path.join(self.python_dir, "sgp"), ignore=shutil.ignore_patterns("__pycache__"))

    def plant(self, path, text):
        path = os.path.join(self.dir, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def version(self):
        r = python("import sgp; print(sgp.__version__)", self.dir, self.python_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def test_from_this_source_tree_the_release_is_sgp_h_s(self):
        self.assertFalse(os.path.exists(os.path.join(PACKAGE, "_version.py")), "the source tree has no _version.py")
        self.assertEqual(sgp.__version__, header_release())

    def test_in_a_source_tree_the_release_is_that_tree_s_header(self):
        self.plant("peer/lib/sgp.h", '#define SGP_H\n#define SGP_VERSION "8.8.8"\n')
        self.assertEqual(self.version(), "8.8.8")

    def test_a_built_package_takes_the_release_written_beside_it_first(self):
        self.plant("peer/lib/sgp.h", '#define SGP_VERSION "8.8.8"\n')
        self.plant("peer/python/sgp/_version.py", "version = '7.7.7'\n")
        self.assertEqual(self.version(), "7.7.7")

    def test_a_package_with_neither_does_not_import(self):
        # (a copy of the package outside any source tree, never built)
        r = python("import sgp", self.dir, self.python_dir)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: sgp: no _version.py", r.stderr)
        self.plant("peer/lib/sgp.h", "/* no SGP_VERSION */\n")
        r = python("import sgp", self.dir, self.python_dir)
        self.assertIn("ImportError: sgp: no _version.py", r.stderr)

    def test_importing_sgp_imports_neither_numpy_nor_torch(self):
        r = python("import sys, sgp; print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))",
                   self.dir, os.path.dirname(PACKAGE))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "[]")

    def test_a_name_the_package_lacks_is_an_attribute_error(self):
        with self.assertRaises(AttributeError):
            sgp.NoSuchThing  # noqa: B018


class LoadLibrary(unittest.TestCase):
    """load_library takes a libsgp of the binding's major.minor and no
    other; each refusal is an sgp.Error with an errno."""

    def setUp(self):
        self.path = sgp.library_path()
        self.assertIsNotNone(self.path, "no libsgp: set SGP_LIB or build build/libsgp.so")
        patcher = mock.patch.object(sgp, "_lib", None)  # each test loads afresh, none keeps what it loaded
        patcher.start()
        self.addCleanup(patcher.stop)

    def major_minor(self):
        return tuple(int(x) for x in sgp.__version__.split(".")[:2])

    def test_the_library_is_this_release(self):
        lib = sgp.load_library(self.path)
        self.assertEqual(lib.sgp_version().decode(), sgp.__version__)
        self.assertEqual(lib.path, self.path)
        self.assertIs(sgp.load_library(), lib, "loaded once")

    def test_another_patch_level_is_taken(self):
        major, minor = self.major_minor()
        with mock.patch.object(sgp, "__version__", "%d.%d.99" % (major, minor)):
            self.assertEqual(sgp.load_library(self.path).path, self.path)

    def test_another_minor_or_major_is_refused(self):
        major, minor = self.major_minor()
        for other in ("%d.%d.0" % (major, minor + 1), "%d.%d.0" % (major + 1, minor)):
            with self.subTest(binding=other), mock.patch.object(sgp, "__version__", other):
                with self.assertRaises(sgp.Error) as e:
                    sgp.load_library(self.path)
                self.assertEqual(e.exception.errno, errno.ENOEXEC)
                self.assertIn("is libsgp %s; this binding is %s" % (header_release(), other), str(e.exception))
                self.assertIsNone(sgp._lib, "a refused library is not kept")

    def test_a_library_that_is_not_libsgp_is_refused(self):
        libc = ctypes.util.find_library("c")
        with self.assertRaises(sgp.Error) as e:
            sgp.load_library(libc)
        self.assertEqual(e.exception.errno, errno.ENOEXEC)
        self.assertIn("not libsgp", str(e.exception))

    def test_a_missing_file_is_enoent(self):
        with self.assertRaises(sgp.Error) as e:
            sgp.load_library("/nonexistent/libsgp.so")
        self.assertEqual(e.exception.errno, errno.ENOENT)

    def test_no_library_anywhere_says_how_to_install_one(self):
        with mock.patch.object(sgp, "library_path", return_value=None), self.assertRaises(sgp.Error) as e:
            sgp.load_library()
        self.assertEqual(e.exception.errno, errno.ENOENT)
        self.assertIn("pip install --no-build-isolation ./peer/python", str(e.exception))


class LibraryPath(unittest.TestCase):
    """The order: $SGP_LIB, the package's own copy, the source tree's
    build/libsgp.so, the system's; a candidate that is not there is passed."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sgp-package-test-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.package = os.path.join(self.dir, "peer", "python", "sgp")
        self.env_lib = os.path.join(self.dir, "elsewhere", "libsgp.so")
        self.package_lib = os.path.join(self.package, "libsgp.so")
        self.tree_lib = os.path.join(self.dir, "build", "libsgp.so")
        for path in (self.env_lib, self.package_lib, self.tree_lib):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
        for patcher in (mock.patch.object(sgp, "_here", self.package),
                        mock.patch("ctypes.util.find_library", return_value="libsgp.so.0"),
                        mock.patch.dict(os.environ, {"SGP_LIB": self.env_lib})):
            patcher.start()
            self.addCleanup(patcher.stop)

    def test_sgp_lib_comes_first(self):
        self.assertEqual(sgp.library_path(), self.env_lib)

    def test_then_the_package_s_own_copy(self):
        os.environ["SGP_LIB"] = os.path.join(self.dir, "missing.so")
        self.assertEqual(sgp.library_path(), self.package_lib)
        del os.environ["SGP_LIB"]
        self.assertEqual(sgp.library_path(), self.package_lib)

    def test_then_the_source_tree_s_build(self):
        del os.environ["SGP_LIB"]
        os.remove(self.package_lib)
        self.assertEqual(sgp.library_path(), self.tree_lib)

    def test_then_the_system_s(self):
        del os.environ["SGP_LIB"]
        os.remove(self.package_lib)
        os.remove(self.tree_lib)
        self.assertEqual(sgp.library_path(), "libsgp.so.0")
        with mock.patch("ctypes.util.find_library", return_value=None):
            self.assertIsNone(sgp.library_path())


class FakeLib:
    """libsgp past sgp_open, as the package sees it: records the options
    and arguments it is handed and answers the return codes a test sets.
    sgp_options_init_sized is the real library's (its defaults)."""

    HANDLE = 0x5150

    def __init__(self, real):
        self.sgp_options_init_sized = real.sgp_options_init_sized
        self.open_rc, self.open_err = 0, b""
        self.step_rc = self.checkpoint_rc = self.close_rc = self.status_rc = 0
        self.error = b""
        self.status = {}
        self.calls = []

    def sgp_open(self, handle, options, ptr, n, err, errlen):
        o = options._obj
        self.options = {name: getattr(o, name) for name, _ in sgp._Options._fields_}
        self.calls.append(("open", n))
        err.value = self.open_err
        if self.open_rc == 0:
            handle._obj.value = self.HANDLE
        return self.open_rc

    def sgp_step(self, p, ptr, n):
        self.calls.append(("step", p.value, n))
        return self.step_rc

    def sgp_status_get(self, p, status):
        self.calls.append(("status", p.value))
        for name, value in self.status.items():
            setattr(status._obj, name, value)
        return self.status_rc

    def sgp_checkpoint(self, p):
        self.calls.append(("checkpoint", p.value))
        return self.checkpoint_rc

    def sgp_close(self, p):
        self.calls.append(("close", p.value))
        return self.close_rc

    def sgp_error(self, p):
        return self.error


class WithFakeLib(unittest.TestCase):
    def setUp(self):
        self.lib = FakeLib(sgp.load_library())
        patcher = mock.patch.object(sgp, "load_library", return_value=self.lib)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.params = np.zeros(6, dtype=np.float32)


class Options(WithFakeLib):
    """Every field of sgp_options is a keyword argument, set as C wants it;
    what is not given keeps libsgp's default."""

    def test_the_options_are_the_fields_of_sgp_options_and_the_docstring_lists_them(self):
        self.assertEqual(sgp.OPTIONS, tuple(name for name, _ in sgp._Options._fields_[1:]))
        self.assertEqual(sgp._Options._fields_[0][0], "size")
        listed = re.search(r"Every field of sgp_options is a keyword argument: (.*?)\(", sgp.__doc__, re.S).group(1)
        self.assertEqual(tuple(re.findall(r"\w+", listed)), sgp.OPTIONS)

    def test_an_unknown_option_is_a_type_error_before_sgp_open(self):
        with self.assertRaises(TypeError) as e:
            sgp.Peer(self.params, cluster="c.conf", rounds=1, round=3)
        self.assertIn("unknown sgp option 'round'", str(e.exception))
        self.assertIn("rounds", str(e.exception), "the message lists the options")
        self.assertEqual(self.lib.calls, [])

    def test_values_reach_sgp_open_as_c_has_them(self):
        peer = sgp.Peer(self.params, cluster=pathlib.Path("/run/c.conf"), id=None, rounds=7, codec="stc:0.04",
                        step=0.5, resume=True, seed=2**63 + 1, local_steps=10, outer="nesterov:0.7:0.9",
                        overlap=True, gossip_threads=3, gather=0.8)
        o = self.lib.options
        self.assertEqual(o["size"], ctypes.sizeof(sgp._Options), "sized by sgp_options_init_sized")
        self.assertEqual(o["cluster"], b"/run/c.conf")
        self.assertEqual(o["codec"], b"stc:0.04")
        self.assertEqual(o["outer"], b"nesterov:0.7:0.9")
        self.assertEqual((o["rounds"], o["step"], o["resume"], o["seed"], o["local_steps"], o["overlap"],
                          o["gossip_threads"], o["gather"]), (7, 0.5, 1, 2**63 + 1, 10, 1, 3, 0.8))
        # not given, or None: libsgp's defaults (peer/lib/sgp.c)
        self.assertEqual((o["id"], o["dead_timeout"], o["round_timeout"], o["key"]), (-1, 5.0, 30.0, None))
        self.assertEqual(self.lib.calls, [("open", 6)])
        self.assertEqual(peer.n, 6)
        peer.close()
        sgp.Peer(self.params, cluster="c.conf", rounds=1).close()
        self.assertEqual(self.lib.options["gather"], -1.0, "push-sum unless asked")

    def test_sgp_open_s_error_is_sgp_error_with_its_errno_and_message(self):
        self.lib.open_rc, self.lib.open_err = -errno.ENOENT, b"cluster file c.conf: No such file"
        with self.assertRaises(sgp.Error) as e:
            sgp.Peer(self.params, cluster="c.conf", rounds=1)
        self.assertIsInstance(e.exception, OSError)
        self.assertEqual(e.exception.errno, errno.ENOENT)
        self.assertEqual(e.exception.strerror, "cluster file c.conf: No such file")
        self.assertNotIn("close", [c[0] for c in self.lib.calls], "nothing to close of a peer never opened")

    def test_params_must_be_a_contiguous_writable_float32_array(self):
        read_only = np.zeros(6, dtype=np.float32)
        read_only.flags.writeable = False
        for bad in (np.zeros(6, dtype=np.float64), np.zeros(12, dtype=np.float32)[::2], read_only, [0.0] * 6):
            with self.subTest(params=bad), self.assertRaises(TypeError):
                sgp.Peer(bad, cluster="c.conf", rounds=1)
        self.assertEqual(self.lib.calls, [])


class RealOptions(unittest.TestCase):
    """What libsgp itself refuses before opening anything reaches Python as
    sgp.Error, errno and message: the options did arrive."""

    def test_the_library_s_refusals(self):
        params = np.zeros(4, dtype=np.float32)
        for options, message in ((dict(cluster="c.conf", rounds=0), "options.rounds must be at least 1"),
                                 (dict(rounds=1), "no cluster file"),
                                 (dict(cluster="c.conf", rounds=1, codec="nonsense"), "unknown codec 'nonsense'"),
                                 (dict(cluster="c.conf", rounds=1, local_steps=0), "local_steps must be 1 to")):
            with self.subTest(**options), self.assertRaises(sgp.Error) as e:
                sgp.Peer(params, **options)
            self.assertEqual(e.exception.errno, errno.EINVAL)
            self.assertIn(message, str(e.exception))


class Calls(WithFakeLib):
    """An open peer's calls: libsgp's return codes become results, its
    negative ones sgp.Error; a closed peer refuses every call."""

    def setUp(self):
        super().setUp()
        self.peer = sgp.Peer(self.params, cluster="c.conf", rounds=1)
        self.lib.calls.clear()

    def test_step_is_true_only_at_the_final_model(self):
        self.assertFalse(self.peer.step(self.params))
        self.lib.step_rc = sgp.DONE
        self.assertTrue(self.peer.step(self.params))
        self.assertEqual(self.lib.calls, [("step", FakeLib.HANDLE, 6)] * 2)

    def test_a_failed_call_is_sgp_error_with_the_library_s_message(self):
        self.lib.step_rc = self.lib.checkpoint_rc = self.lib.status_rc = -errno.EPIPE
        self.lib.error = b"neighbour 1 left the run"
        for call in (lambda: self.peer.step(self.params), self.peer.checkpoint, self.peer.status):
            with self.assertRaises(sgp.Error) as e:
                call()
            self.assertEqual((e.exception.errno, e.exception.strerror), (errno.EPIPE, "neighbour 1 left the run"))

    def test_params_of_another_size_are_refused_before_the_library(self):
        with self.assertRaises(sgp.Error) as e:
            self.peer.step(np.zeros(5, dtype=np.float32))
        self.assertEqual(e.exception.errno, errno.EINVAL)
        self.assertEqual(self.lib.calls, [])

    def test_status_is_every_field_of_sgp_status(self):
        self.lib.status = {"id": 3, "peers": 8, "round": 41, "weight": 0.25, "bytes_sent": 2**40, "done": 1}
        status = self.peer.status()
        self.assertEqual(list(status), [name for name, _ in sgp._Status._fields_])
        for name, value in self.lib.status.items():
            self.assertEqual(status[name], value, name)
        self.assertEqual(status["messages_sent"], 0)

    def test_close_once_then_every_call_is_ebadf(self):
        self.peer.close()
        self.peer.close()
        self.assertEqual(self.lib.calls, [("close", FakeLib.HANDLE)])
        for call in (lambda: self.peer.step(self.params), self.peer.checkpoint, self.peer.status):
            with self.assertRaises(sgp.Error) as e:
                call()
            self.assertEqual(e.exception.errno, errno.EBADF)
        self.assertEqual(len(self.lib.calls), 1)

    def test_a_run_that_ended_badly_raises_at_close(self):
        self.lib.close_rc = -errno.ETIMEDOUT
        with self.assertRaises(sgp.Error) as e:
            self.peer.close()
        self.assertEqual(e.exception.errno, errno.ETIMEDOUT)
        self.assertIn(os.strerror(errno.ETIMEDOUT), str(e.exception))
        self.peer.close()  # closed all the same
        self.assertEqual(len(self.lib.calls), 1)

    def test_the_with_block_closes(self):
        with self.peer as p:
            self.assertIs(p, self.peer)
        self.assertEqual(self.lib.calls, [("close", FakeLib.HANDLE)])


if __name__ == "__main__":
    unittest.main()
