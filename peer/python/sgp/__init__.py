"""sgp: Stochastic Gradient Push gossip for your own training loop.

A ctypes binding of libsgp (peer/lib/sgp.h, the C library of the sgp
project): peers train one model together with no coordinator, each taking
its own optimizer steps and exchanging compressed push-sum messages with its
neighbours on the cluster file's topology.

Install: ``pip install --no-build-isolation ./peer/python`` from the source
tree (the build runs ``make build/libsgp.so`` and the package carries that
library), or put ``peer/python`` on PYTHONPATH. The library is looked up in this order: ``$SGP_LIB``, the copy
inside the package, ``build/libsgp.so`` of the source tree the package sits
in, then the system's (``make install``).

PyTorch (the recipe: local steps, an outer optimizer, a sparse codec)::

    import sgp.torch
    opt = sgp.torch.Optimizer(torch.optim.AdamW(model.parameters(), lr=3e-4),
                              cluster="run/cluster.conf", steps=10_000,
                              local_steps=10, outer="nesterov:0.7:0.9", codec="stc:0.04")
    for x, y in batches:                      # your loop, unchanged
        loss_fn(model(x), y).backward()
        opt.step()                            # gossips every local_steps steps
        opt.zero_grad()
        if opt.done:
            break

``sgp.torch.TorchPeer`` is the lower-level form (you call ``peer.step()``
once a round). With NumPy (one flat float32 vector of parameters)::

    import numpy as np, sgp
    params = np.zeros(n, dtype=np.float32)
    with sgp.Peer(params, cluster="run/cluster.conf", rounds=1000, codec="stc:0.04") as peer:
        while True:
            my_optimizer_step(params)      # in place, at the parameters sgp handed you
            if peer.step(params):          # mixed in place; True: the final model
                break
        print(peer.status())

Every field of sgp_options is a keyword argument: cluster, id, key, rounds,
rounds_per_epoch, codec, step, codec_warmup, tau, dead_timeout,
round_timeout, round_deadline, checkpoint, checkpoint_every, resume, seed,
log, verbose, local_steps, outer, overlap, gossip_threads, gather (peer/lib/sgp.h
says what each does).
Errors raise sgp.Error with libsgp's message and errno.
"""

import ctypes
import errno as _errno
import os
import re
from typing import TYPE_CHECKING, Any, Dict, Tuple

if TYPE_CHECKING:
    import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))


def _release() -> str:
    """The release this binding is: the _version.py that setup.py writes
    into the package it builds, else (the package used from the source tree,
    PYTHONPATH=peer/python) SGP_VERSION of that tree's peer/lib/sgp.h, where
    the number is kept once."""
    try:
        from ._version import version
        return version
    except ImportError:
        pass
    header = os.path.normpath(os.path.join(_here, "..", "..", "lib", "sgp.h"))
    try:
        with open(header) as f:
            return re.search(r'#define SGP_VERSION "([^"]+)"', f.read()).group(1)
    except (OSError, AttributeError):
        raise ImportError("sgp: no _version.py (pip install builds it) nor SGP_VERSION in %s" % header) from None


__version__ = _release()
__all__ = ["Peer", "TorchPeer", "Error", "load_library", "library_path", "OPTIONS", "__version__"]

DONE = 1


class Error(OSError):
    """A libsgp call failed: .errno is the (positive) errno, str() the reason."""


class _Options(ctypes.Structure):
    # The layout of sgp_options in peer/lib/sgp.h, field for field.
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("cluster", ctypes.c_char_p),
        ("id", ctypes.c_int),
        ("key", ctypes.c_char_p),
        ("rounds", ctypes.c_long),
        ("rounds_per_epoch", ctypes.c_long),
        ("codec", ctypes.c_char_p),
        ("step", ctypes.c_double),
        ("codec_warmup", ctypes.c_double),
        ("tau", ctypes.c_int),
        ("dead_timeout", ctypes.c_double),
        ("round_timeout", ctypes.c_double),
        ("round_deadline", ctypes.c_double),
        ("checkpoint", ctypes.c_char_p),
        ("checkpoint_every", ctypes.c_double),
        ("resume", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("log", ctypes.c_char_p),
        ("verbose", ctypes.c_int),
        ("local_steps", ctypes.c_int),
        ("outer", ctypes.c_char_p),
        ("overlap", ctypes.c_int),
        ("gossip_threads", ctypes.c_int),
        ("gather", ctypes.c_double),
    ]


OPTIONS = tuple(name for name, _ in _Options._fields_ if name != "size")
"""The keyword arguments Peer takes: the fields of sgp_options."""


class _Status(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_int),
        ("peers", ctypes.c_int),
        ("round", ctypes.c_long),
        ("start_round", ctypes.c_long),
        ("local_steps", ctypes.c_long),
        ("weight", ctypes.c_double),
        ("neighbours", ctypes.c_int),
        ("neighbours_alive", ctypes.c_int),
        ("bytes_sent", ctypes.c_uint64),
        ("bytes_received", ctypes.c_uint64),
        ("messages_sent", ctypes.c_uint64),
        ("messages_absorbed", ctypes.c_uint64),
        ("late_marks", ctypes.c_long),
        ("catch_ups", ctypes.c_long),
        ("neighbours_lost", ctypes.c_long),
        ("checkpoints", ctypes.c_long),
        ("done", ctypes.c_int),
    ]


_lib = None


def library_path():
    """Where load_library() looks for libsgp: $SGP_LIB, the package's own
    copy, the source tree's build/, else the system's (None: not found)."""
    candidates = [os.environ.get("SGP_LIB"), os.path.join(_here, "libsgp.so"),
                  os.path.join(_here, "..", "..", "..", "build", "libsgp.so")]
    for path in candidates:
        if path and os.path.exists(path):
            return os.path.normpath(path)
    import ctypes.util
    return ctypes.util.find_library("sgp")


def load_library(path=None):
    """Load libsgp once (path, else library_path()); check it is the version
    this binding speaks."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    path = path or library_path()
    if not path:
        raise Error(_errno.ENOENT, "libsgp not found: pip install --no-build-isolation ./peer/python, "
                    "run `make install`, or set SGP_LIB to a libsgp.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise Error(_errno.ENOENT, "cannot load libsgp from %s: %s" % (path, e)) from None
    P = ctypes.c_void_p
    F = ctypes.POINTER(ctypes.c_float)
    if not hasattr(lib, "sgp_version"):
        raise Error(_errno.ENOEXEC, "%s is not libsgp (no sgp_version)" % path)
    lib.sgp_version.argtypes = []
    lib.sgp_version.restype = ctypes.c_char_p
    version = lib.sgp_version().decode()
    if not hasattr(lib, "sgp_options_init_sized") or version.split(".")[:2] != __version__.split(".")[:2]:
        raise Error(_errno.ENOEXEC, "%s is libsgp %s; this binding is %s (rebuild or reinstall the package)"
                    % (path, version, __version__))
    lib.sgp_options_init_sized.argtypes = [ctypes.POINTER(_Options), ctypes.c_size_t]
    lib.sgp_options_init_sized.restype = None
    lib.sgp_open.argtypes = [ctypes.POINTER(P), ctypes.POINTER(_Options), F, ctypes.c_size_t,
                             ctypes.c_char_p, ctypes.c_size_t]
    lib.sgp_open.restype = ctypes.c_int
    lib.sgp_step.argtypes = [P, F, ctypes.c_size_t]
    lib.sgp_step.restype = ctypes.c_int
    lib.sgp_status_get.argtypes = [P, ctypes.POINTER(_Status)]
    lib.sgp_status_get.restype = ctypes.c_int
    lib.sgp_checkpoint.argtypes = [P]
    lib.sgp_checkpoint.restype = ctypes.c_int
    lib.sgp_close.argtypes = [P]
    lib.sgp_close.restype = ctypes.c_int
    lib.sgp_error.argtypes = [P]
    lib.sgp_error.restype = ctypes.c_char_p
    lib.path = path
    _lib = lib
    return lib


def _float_buffer(params: "np.ndarray") -> Tuple["ctypes._Pointer", int]:
    """A float32 pointer and length for a contiguous, writable float32 array."""
    import numpy as np
    if not isinstance(params, np.ndarray) or params.dtype != np.float32 or not params.flags.c_contiguous \
            or not params.flags.writeable:
        raise TypeError("params must be a contiguous, writable numpy float32 array")
    return params.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), params.size


class Peer:
    """One peer of an sgp run, driving rounds on a NumPy float32 vector.

    The constructor blocks until the cluster is up (at most round_timeout
    seconds) and writes into params the model to start from: unchanged, or
    with resume=True the checkpoint's or a neighbour's. The network runs on
    libsgp's own thread; use a Peer from one thread at a time. Between two
    calls the vector is yours; during step() libsgp reads and writes it.
    """

    def __init__(self, params: "np.ndarray", **options: Any) -> None:
        self._lib = load_library(options.pop("library", None))
        self._p = None
        o = _Options()
        self._lib.sgp_options_init_sized(ctypes.byref(o), ctypes.sizeof(o))
        for name, value in options.items():
            if name not in OPTIONS:
                raise TypeError("unknown sgp option %r (the options: %s)" % (name, ", ".join(OPTIONS)))
            if value is None:
                continue
            if isinstance(value, (str, os.PathLike)):
                value = os.fsencode(value)
            if isinstance(value, bool):
                value = int(value)
            setattr(o, name, value)
        self._options = o  # the strings must outlive sgp_open
        ptr, n = _float_buffer(params)
        self.n = n
        err = ctypes.create_string_buffer(512)
        handle = ctypes.c_void_p()
        rc = self._lib.sgp_open(ctypes.byref(handle), ctypes.byref(o), ptr, n, err, len(err))
        if rc < 0:
            raise Error(-rc, err.value.decode(errors="replace"))
        self._p = handle

    def _open(self) -> ctypes.c_void_p:
        if self._p is None:
            raise Error(_errno.EBADF, "the peer is closed")
        return self._p

    def _check(self, rc: int) -> int:
        if rc < 0:
            raise Error(-rc, self._lib.sgp_error(self._p).decode(errors="replace"))
        return rc

    def step(self, params: "np.ndarray") -> bool:
        """After your step(s) on params: push, wait for the round, mix in
        place. True once params hold the final model (every later call too)."""
        p = self._open()
        ptr, n = _float_buffer(params)
        if n != self.n:
            raise Error(_errno.EINVAL, "params has %d floats, the peer was opened with %d" % (n, self.n))
        return self._check(self._lib.sgp_step(p, ptr, n)) == DONE

    def status(self) -> Dict[str, Any]:
        """Round, weight, neighbours alive, bytes and fault counters, as of
        the last round handed to you (the fields of sgp_status)."""
        p = self._open()
        s = _Status()
        self._check(self._lib.sgp_status_get(p, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _Status._fields_}

    def checkpoint(self) -> None:
        """Write the gossip state's checkpoint now, at the current round
        boundary (requires checkpoint=PATH); atomic."""
        self._check(self._lib.sgp_checkpoint(self._open()))

    def close(self) -> None:
        """Leave the run: neighbours are told at once, and the state is
        checkpointed with checkpoint=PATH. Idempotent."""
        if self._p is None:
            return
        p, self._p = self._p, None
        rc = self._lib.sgp_close(p)
        if rc < 0:
            raise Error(-rc, "the run ended with an error: %s" % os.strerror(-rc))

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def __getattr__(name):
    # sgp.TorchPeer without importing torch for NumPy users
    if name == "TorchPeer":
        from .torch import TorchPeer
        return TorchPeer
    raise AttributeError("module 'sgp' has no attribute %r" % name)
