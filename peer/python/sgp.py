"""sgp: Stochastic Gradient Push gossip for your own training loop.

A ctypes binding of libsgp (peer/lib/sgp.h): no compiler needed, only the
shared library built by `make` (build/libsgp.so). Put this directory on
PYTHONPATH; the library is found through $SGP_LIB, or at ../../build/libsgp.so
from this file.

With NumPy (one flat float32 vector of parameters)::

    import numpy as np, sgp
    params = np.zeros(n, dtype=np.float32)
    with sgp.Peer(params, cluster="run/cluster.conf", rounds=1000, codec="stc:0.04") as peer:
        while True:
            my_optimizer_step(params)      # in place, at the parameters sgp handed you
            if peer.step(params):          # mixed in place; True: the final model
                break
        print(peer.status())

With PyTorch (the model's parameters are flattened into one buffer, mixed,
and copied back after every step)::

    peer = sgp.TorchPeer(model, cluster="run/cluster.conf", rounds=1000, codec="stc:0.04")
    for x, y in batches:
        loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()
        if peer.step():
            break
    peer.close()

Every option of sgp_options is a keyword argument (cluster, id, key, rounds,
rounds_per_epoch, codec, step, codec_warmup, tau, dead_timeout,
round_timeout, round_deadline, checkpoint, checkpoint_every, resume, seed,
log, verbose). Errors raise sgp.Error with libsgp's message and errno.
"""

import ctypes
import errno as _errno
import os

__version__ = "0.1.0"
__all__ = ["Peer", "TorchPeer", "Error", "load_library", "__version__"]

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
    ]


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


def load_library(path=None):
    """Load libsgp once (path, else $SGP_LIB, else build/libsgp.so of this checkout)."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    if path is None:
        path = os.environ.get("SGP_LIB") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "libsgp.so")
    lib = ctypes.CDLL(path)
    P = ctypes.c_void_p
    F = ctypes.POINTER(ctypes.c_float)
    lib.sgp_options_init.argtypes = [ctypes.POINTER(_Options)]
    lib.sgp_options_init.restype = None
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
    lib.sgp_version.argtypes = []
    lib.sgp_version.restype = ctypes.c_char_p
    _lib = lib
    return lib


def _float_buffer(params):
    """A float32 pointer and length for a contiguous, writable float32 array."""
    import numpy as np
    if not isinstance(params, np.ndarray) or params.dtype != np.float32 or not params.flags.c_contiguous \
            or not params.flags.writeable:
        raise TypeError("params must be a contiguous, writable numpy float32 array")
    return params.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), params.size


class Peer:
    """One peer of an sgp run, driving rounds on a NumPy float32 vector.

    The constructor blocks until the cluster is up and writes into params the
    model to start from (unchanged unless resume=True). The network runs on
    libsgp's own thread; use a Peer from one thread at a time.
    """

    def __init__(self, params, **options):
        self._lib = load_library(options.pop("library", None))
        self._p = None
        o = _Options()
        self._lib.sgp_options_init(ctypes.byref(o))
        for name, value in options.items():
            if name not in dict(_Options._fields_) or name == "size":
                raise TypeError("unknown sgp option %r" % name)
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

    def _check(self, rc):
        if rc < 0:
            raise Error(-rc, self._lib.sgp_error(self._p).decode(errors="replace"))
        return rc

    def step(self, params):
        """After your step on params: mix in place. True once params hold the final model."""
        if self._p is None:
            raise Error(_errno.EBADF, "the peer is closed")
        ptr, n = _float_buffer(params)
        if n != self.n:
            raise ValueError("params has %d floats, the peer was opened with %d" % (n, self.n))
        return self._check(self._lib.sgp_step(self._p, ptr, n)) == DONE

    def status(self):
        """Round, weight, neighbours alive, bytes and fault counters as a dict."""
        if self._p is None:
            raise Error(_errno.EBADF, "the peer is closed")
        s = _Status()
        self._check(self._lib.sgp_status_get(self._p, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _Status._fields_}

    def checkpoint(self):
        """Write the gossip state's checkpoint now (requires checkpoint=PATH)."""
        if self._p is None:
            raise Error(_errno.EBADF, "the peer is closed")
        self._check(self._lib.sgp_checkpoint(self._p))

    def close(self):
        """Leave the run (neighbours are told; checkpoint with checkpoint=PATH). Idempotent."""
        if self._p is None:
            return
        p, self._p = self._p, None
        rc = self._lib.sgp_close(p)
        if rc < 0:
            raise Error(-rc, "the run ended with an error: %s" % os.strerror(-rc))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class TorchPeer(Peer):
    """A Peer over a torch model's parameters: step() copies them into one
    float32 buffer, mixes it, and copies the result back."""

    def __init__(self, model, **options):
        import numpy as np
        import torch
        self._params = [p for p in model.parameters()]
        self._torch = torch
        n = sum(p.numel() for p in self._params)
        self.buffer = np.empty(n, dtype=np.float32)
        self._pack()
        super().__init__(self.buffer, **options)
        self._unpack()

    def _pack(self):
        flat = self._torch.from_numpy(self.buffer)
        i = 0
        with self._torch.no_grad():
            for p in self._params:
                flat[i:i + p.numel()].copy_(p.detach().reshape(-1))
                i += p.numel()

    def _unpack(self):
        flat = self._torch.from_numpy(self.buffer)
        i = 0
        with self._torch.no_grad():
            for p in self._params:
                p.copy_(flat[i:i + p.numel()].view_as(p))
                i += p.numel()

    def step(self):
        """After the optimizer step: mix the model's parameters. True once they are final."""
        self._pack()
        done = super().step(self.buffer)
        self._unpack()
        return done
