"""sgp for PyTorch: a zero-copy TorchPeer and an optimizer wrapper.

``Optimizer`` wraps the optimizer you already have; your loop does not
change::

    import torch, sgp.torch
    opt = sgp.torch.Optimizer(torch.optim.AdamW(model.parameters(), lr=3e-4),
                              cluster="run/cluster.conf", steps=10_000, local_steps=10,
                              outer="nesterov:0.7:0.9", codec="stc:0.04")
    shard = my_data[opt.id::opt.peers]        # this peer's share of the data
    for x, y in batches(shard):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()                            # the inner step; every 10th also gossips
        opt.zero_grad()
        if opt.done:                          # the run's last round: params hold the final model
            break
    opt.close()

``TorchPeer`` is the same machinery one level down: you call
``peer.step()`` once a round, after your own optimizer steps.

Zero copy. Both rebind the model's parameters (``p.data``) as views of one
flat float32 buffer that libsgp reads and mixes in place: no packing or
unpacking per step, and the Parameter objects stay the same, so the
optimizer's state (momentum, Adam moments, keyed by parameter) stays valid.
Keep the model where it is after wrapping (``model.to(...)`` or assigning a
new ``p.data`` would leave the buffer; ``step`` checks and raises
``sgp.Error``). A model on a GPU stays there: its flat buffer is on the GPU,
and each round goes through one pinned host buffer with non-blocking copies
(device to host before the exchange, host to device after).

Buffers (``buffers=``). ``"running"`` (the default): the running
statistics of normalisation layers (``running_mean`` and ``running_var``
of batch and instance norm with ``track_running_stats``) are views of the
same flat buffer and are mixed like the parameters, so a peer's statistics
follow its averaged weights; every other buffer (an attention mask, a table
of positions: constants the model registered) stays this peer's own, as
PyTorch DDP broadcasts buffers and never averages a constant. ``"average"``:
every float32 buffer is mixed (a documented choice; each must be finite).
``"local"``: none. Integer buffers (``num_batches_tracked``) and buffers of
other float types are always local. ``Optimizer`` sees only the optimizer's
parameters: pass ``model=`` to have its running statistics mixed too.

Finite values only. What sgp mixes must be finite: a NaN or an infinity in
a parameter or a mixed buffer, at wrapping or at a round, raises
``sgp.Error`` (EDOM) naming the tensor, before anything is handed to
libsgp (a peer whose model is not finite stops its run rather than gossip
it).
"""

import errno
import math
import os
import tempfile
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch

from . import Error, Peer, __version__

__all__ = ["TorchPeer", "Optimizer", "BUFFERS"]

BUFFERS = ("running", "average", "local")
"""Which of a model's float32 buffers are mixed: the normalisation layers'
running statistics, every one, or none."""

_RUNNING = ("running_mean", "running_var")


def _mixed_buffers(model: Optional[torch.nn.Module], buffers: str) -> List[Tuple[str, torch.Tensor]]:
    """The buffers to mix, with their names in the model."""
    if buffers not in BUFFERS:
        raise Error(errno.EINVAL, "buffers=%r: expected one of %s" % (buffers, ", ".join(BUFFERS)))
    if model is None or buffers == "local":
        return []
    if buffers == "average":
        return [("buffer " + n, b) for n, b in model.named_buffers() if b.dtype == torch.float32]
    out = []
    for mname, mod in model.named_modules():
        if isinstance(mod, torch.nn.modules.batchnorm._NormBase) and mod.track_running_stats:
            for bname in _RUNNING:
                b = getattr(mod, bname, None)
                if isinstance(b, torch.Tensor) and b.dtype == torch.float32:
                    out.append(("buffer " + (mname + "." if mname else "") + bname, b))
    return out


def _named_parameters(model: Optional[torch.nn.Module], params: List[torch.Tensor]) -> List[Tuple[str, torch.Tensor]]:
    """params with their names in the model where it has them (else by
    position and shape)."""
    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    return [("parameter " + names[id(p)] if id(p) in names else "parameter %d %s" % (i, tuple(p.shape)), p)
            for i, p in enumerate(params)]


class _Flat:
    """Tensors rebound as views of one flat float32 buffer on their device,
    and the host vector libsgp mixes: that buffer itself on the CPU, one
    pinned copy of it for a GPU."""

    def __init__(self, named: Iterable[Tuple[str, torch.Tensor]]) -> None:
        unique: Dict[int, Tuple[str, torch.Tensor]] = {}
        for name, t in named:
            unique.setdefault(id(t), (name, t))
        self.names = [n for n, _ in unique.values()]
        self.tensors = [t for _, t in unique.values()]
        if not self.tensors:
            raise Error(errno.EINVAL, "no parameters to gossip")
        devices = {t.device for t in self.tensors}
        if len(devices) != 1:
            raise Error(errno.EINVAL, "the parameters are on several devices (%s): sgp mixes one flat buffer"
                        % ", ".join(sorted(str(d) for d in devices)))
        other = sorted({str(t.dtype) for t in self.tensors if t.dtype != torch.float32})
        if other:
            raise Error(errno.EINVAL, "sgp mixes float32 parameters; this model has %s (model.float() converts it)"
                        % ", ".join(other))
        self.device = devices.pop()
        for name, t in zip(self.names, self.tensors):
            if not bool(torch.isfinite(t.detach()).all()):
                raise Error(errno.EDOM, "%s holds a NaN or an infinity: sgp mixes finite values only%s"
                            % (name, " (buffers='running', the default, keeps constant buffers local)"
                               if name.startswith("buffer ") else ""))
        self.n = sum(t.numel() for t in self.tensors)
        self.flat = torch.empty(self.n, dtype=torch.float32, device=self.device)
        with torch.no_grad():
            i = 0
            for t in self.tensors:
                k = t.numel()
                self.flat[i:i + k].copy_(t.detach().reshape(-1))
                t.data = self.flat[i:i + k].view_as(t)
                i += k
        if self.device.type == "cpu":
            self.host = self.flat
        else:
            self.host = torch.empty(self.n, dtype=torch.float32, pin_memory=True)
            self.host.copy_(self.flat)
        self.array = self.host.numpy()  # shares the host buffer's memory: what libsgp reads and writes

    def check(self) -> None:
        """Every tensor still lives in the flat buffer."""
        base = self.flat.data_ptr()
        end = base + 4 * self.n
        for t in self.tensors:
            if t.numel() and not base <= t.data_ptr() < end:
                raise Error(errno.EINVAL, "a parameter of shape %s no longer lives in sgp's buffer (the model was "
                            "moved or its .data replaced after wrapping): wrap the model where it will train"
                            % tuple(t.shape))

    def all_finite(self) -> bool:
        # A NaN or an infinity anywhere makes the sum NaN or infinite, so a
        # finite sum settles it in one reduction (a fifth of isfinite's time
        # here); only a sum that is not (a bad value, or finite values that
        # overflow it) is checked value by value, in chunks on the CPU, so
        # that the check allocates a MB, not a byte a value.
        if bool(torch.isfinite(self.flat.sum())):
            return True
        step = self.n if self.device.type != "cpu" else 1 << 20
        return all(bool(torch.isfinite(self.flat[i:i + step]).all()) for i in range(0, self.n, step))

    def check_finite(self) -> None:
        """Every value finite, else sgp.Error naming the tensors that are not."""
        if self.all_finite():
            return
        bad = [n for n, t in zip(self.names, self.tensors) if not bool(torch.isfinite(t.detach()).all())]
        raise Error(errno.EDOM, "not finite (a NaN or an infinity), so not handed to sgp: %s; the model diverged "
                    "(try a lower learning rate or gradient clipping)" % ", ".join(bad[:8] + (["..."] if len(bad) > 8 else [])))

    def settle(self) -> None:
        """Wait for the device's queued work (the optimizer's step), so that
        what follows is timed as the gossip's own."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def to_host(self) -> None:
        if self.host is not self.flat:
            self.host.copy_(self.flat, non_blocking=True)
            torch.cuda.current_stream(self.device).synchronize()

    def from_host(self) -> None:
        # ordered before the next kernel on the stream; the host buffer is
        # not written again before the next to_host, which follows it
        if self.host is not self.flat:
            self.flat.copy_(self.host, non_blocking=True)


class TorchPeer(Peer):
    """A Peer over a torch model: its parameters (and the running statistics
    of its normalisation layers: buffers=) become views of one flat float32 buffer that libsgp
    mixes in place. Call step() after each round's optimizer step(s).

    Every keyword of sgp.Peer is accepted (cluster, rounds, codec,
    local_steps, outer, checkpoint, resume, ...). The constructor blocks
    until the cluster is up and writes the model to start from into the
    parameters (the checkpoint's or a neighbour's with resume=True).
    """

    def __init__(self, model: torch.nn.Module, *, buffers: str = "running", **options: Any) -> None:
        self.flat = _Flat(_named_parameters(model, list(model.parameters())) + _mixed_buffers(model, buffers))
        super().__init__(self.flat.array, **options)
        self.flat.from_host()

    @property
    def buffer(self):
        """The host float32 vector libsgp mixes (a NumPy view)."""
        return self.flat.array

    def step(self, params: Any = None) -> bool:
        """After the optimizer step(s) of a round: mix the model in place.
        True once it holds the final model."""
        if params is not None:
            raise TypeError("TorchPeer.step() takes no vector: it mixes the model's own parameters")
        self.flat.check()
        self.flat.check_finite()
        self.flat.to_host()
        done = super().step(self.flat.array)
        self.flat.from_host()
        return done


RECIPE_LM = {"codec": "sparseloco:32", "gather": 0.95, "local_steps": 10}
"""What recipe="lm" sets (peer/cmd/gossip_opts.h, GOSSIP_RECIPE_LM_*)."""


class Optimizer(torch.optim.Optimizer):
    """Your optimizer, gossiping through sgp every local_steps steps.

    step() runs the inner optimizer's step and, after every local_steps of
    them (and after the last), one sgp round: push a compressed share, take
    in the neighbours', and with outer= take the outer optimizer's step on
    the round's progress. param_groups, state, zero_grad and learning-rate
    schedulers work as on the inner optimizer.

    optimizer: the inner optimizer (its parameters are gossiped).
    cluster: the cluster file (``sgp launch --prepare`` writes one).
    steps: how many optimizer steps every peer takes; the run has
        ceil(steps / local_steps) rounds.
    local_steps, outer, codec: the recipe (``sgp peer`` options of the same names).
    recipe: "lm" for the language-model recipe (``sgp peer --recipe lm``:
        codec sparseloco:32, gather=0.95, local_steps 10; the cluster's
        topology must be complete: ``sgp launch --prepare --topology
        complete``); what is given beside it wins. gather= (a keyword for
        sgp.Peer) alone turns on the exact sparse all-gather.
    overlap: True to run each round's exchange during the next round's
        local steps (``sgp peer --overlap``): the gossip step waits
        neither for the neighbours' shares of the round it sends nor for
        their encode, and the
        parameters it leaves are your own steps mixed with the shares of
        the round before (one round of delay; the first round's are your
        own steps unmixed).
    model: pass it to have its running statistics mixed too, and its
        parameters named in errors (see buffers).
    checkpoint: the gossip checkpoint file; state_dict() includes its
        contents. None: a file in a private temporary directory.
    Other keywords go to sgp.Peer (id, key, tau, step, codec_warmup,
    dead_timeout, round_timeout, round_deadline, checkpoint_every, seed,
    log, verbose, rounds_per_epoch, gossip_threads: sgp's threads for its
    vector loops, 0 for the host's cores).

    The peer is opened (which waits for the cluster) at the first of step(),
    load_state_dict(), or reading id, peers, status() or peer.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, cluster: str, steps: int,
                 local_steps: Optional[int] = None, outer: Optional[str] = None, codec: Optional[str] = None,
                 overlap: bool = False, recipe: Optional[str] = None, model: Optional[torch.nn.Module] = None,
                 buffers: str = "running", checkpoint: Optional[str] = None, **options: Any) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("sgp.torch.Optimizer wraps a torch.optim.Optimizer, not %s" % type(optimizer).__name__)
        if recipe not in (None, "lm"):
            raise Error(errno.EINVAL, "recipe must be None or 'lm', not %r" % (recipe,))
        if recipe == "lm":  # (``sgp peer --recipe lm``: what is given beside it wins)
            codec = RECIPE_LM["codec"] if codec is None else codec
            local_steps = RECIPE_LM["local_steps"] if local_steps is None else local_steps
            options.setdefault("gather", RECIPE_LM["gather"])
        local_steps = 1 if local_steps is None else local_steps
        if int(steps) < 1 or int(local_steps) < 1:
            raise Error(errno.EINVAL, "steps and local_steps must be at least 1 (steps=%s, local_steps=%s)"
                        % (steps, local_steps))
        for key in ("rounds", "resume", "params"):
            if key in options:
                raise TypeError("%r is set by sgp.torch.Optimizer (from steps, and load_state_dict)" % key)
        self.optimizer = optimizer
        self.total_steps, self.local_steps = int(steps), int(local_steps)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self._flat = _Flat(_named_parameters(model, params) + _mixed_buffers(model, buffers))
        self._tmp = None
        if checkpoint is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="sgp-torch-")
            checkpoint = os.path.join(self._tmp.name, "gossip.ckpt")
        self._checkpoint = os.fspath(checkpoint)
        self._options = dict(options, cluster=cluster, rounds=math.ceil(self.total_steps / self.local_steps),
                             local_steps=self.local_steps, outer=outer, codec=codec, overlap=bool(overlap),
                             checkpoint=self._checkpoint)
        self._peer: Optional[Peer] = None
        self._steps = 0
        self.done = False
        """True once the run's last round is over: the parameters hold the final model."""
        self.gossip_seconds = 0.0
        """Wall seconds step() spent in its gossip rounds (the checks, the copies and sgp's step): what
        the exchange held your training loop for; its share of the run is its cost. On a GPU it
        starts once the inner step's kernels are done, which it waits for."""

    # ---- what a torch.optim.Optimizer is: the inner one's -----------------------
    @property
    def param_groups(self) -> List[Dict[str, Any]]:
        return self.optimizer.param_groups

    @property
    def state(self) -> Dict[Any, Any]:
        return self.optimizer.state

    @property
    def defaults(self) -> Dict[str, Any]:
        return self.optimizer.defaults

    def zero_grad(self, set_to_none: Optional[bool] = None) -> None:
        # the inner optimizer's own default when not given (False in torch 1.x, True from 2.0)
        if set_to_none is None:
            self.optimizer.zero_grad()
        else:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        raise Error(errno.EINVAL, "sgp gossips the parameters the optimizer had when it was wrapped: "
                    "add the group to the inner optimizer before wrapping it")

    def __repr__(self) -> str:
        return "sgp.torch.Optimizer(%r, local_steps=%d, outer=%r, codec=%r, overlap=%r)" % (
            self.optimizer, self.local_steps, self._options["outer"], self._options["codec"],
            self._options["overlap"])

    # ---- the peer ------------------------------------------------------------------
    def _open(self, resume: bool = False) -> Peer:
        if self._peer is None:
            self._peer = Peer(self._flat.array, resume=resume, **self._options)
            self._flat.from_host()
        return self._peer

    @property
    def peer(self) -> Peer:
        """The sgp.Peer underneath (opened if it is not yet)."""
        return self._open()

    @property
    def id(self) -> int:
        """This peer's id in the cluster (to shard your data)."""
        return self._open().status()["id"]

    @property
    def peers(self) -> int:
        """The cluster's number of peers."""
        return self._open().status()["peers"]

    def status(self) -> Dict[str, Any]:
        """sgp.Peer.status(): round, weight, bytes sent and received, fault counters."""
        return self._open().status()

    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:
        """The inner optimizer's step; after every local_steps of them (and
        the last), one gossip round. Returns the closure's loss, if any."""
        peer = self._open()
        loss = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        self._steps += 1
        if not self.done and (self._steps % self.local_steps == 0 or self._steps >= self.total_steps):
            self._flat.settle()  # (the inner step's kernels are the step's time, not the gossip's)
            t0 = time.perf_counter()
            self._flat.check()
            self._flat.check_finite()
            self._flat.to_host()
            self.done = peer.step(self._flat.array)
            self._flat.from_host()
            self.gossip_seconds += time.perf_counter() - t0
        return loss

    def state_dict(self) -> Dict[str, Any]:
        """The inner optimizer's state_dict plus sgp's: the steps taken up to
        the current round's start, and the gossip checkpoint (push-sum state,
        codec references, outer velocity) as bytes. Taken right after a
        gossip step (steps a multiple of local_steps) it is exact; taken
        mid-round, a restore starts that round again from its beginning."""
        sd = {"optimizer": self.optimizer.state_dict(),
              "sgp": {"version": __version__, "steps": self._steps - self._steps % self.local_steps}}
        if self._peer is not None and not self.done:
            self._peer.checkpoint()
            with open(self._checkpoint, "rb") as f:
                sd["sgp"]["checkpoint"] = f.read()
        return sd

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore a state_dict() into a fresh wrapper, before its first
        step: the inner optimizer's state, and the gossip state, from which
        the peer rejoins its run (the parameters take the checkpoint's model;
        without a checkpoint, a neighbour's)."""
        if self._peer is not None:
            raise Error(errno.EBUSY, "load_state_dict must come before the first step (the peer has joined its "
                        "run already): restore into a fresh sgp.torch.Optimizer")
        if "optimizer" not in state_dict or "sgp" not in state_dict:
            raise Error(errno.EINVAL, "not a state_dict of sgp.torch.Optimizer (no 'optimizer' and 'sgp' keys)")
        self.optimizer.load_state_dict(state_dict["optimizer"])
        mine = state_dict["sgp"]
        self._steps = int(mine["steps"])
        if mine.get("checkpoint"):
            tmp = self._checkpoint + ".loading"
            with open(tmp, "wb") as f:
                f.write(mine["checkpoint"])
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._checkpoint)
        self._open(resume=True)

    def close(self) -> None:
        """Leave the run (neighbours are told at once). Idempotent."""
        if self._peer is not None:
            self._peer.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
