"""sgp.torch against real libsgp peers: two peers of one run on loopback,
each on a thread of this process (real sockets, real crypto), driven the way
a PyTorch user drives them. Run by tests/process/test_lib_python.c:

    SGP_LIB=build/libsgp.so python3 -m unittest tests/python/test_sgp_torch.py

What it checks: the parameters become views of one buffer and a round makes
no copy; the optimizer's state survives the wrapping; buffers averaged or
kept local as asked, a constant buffer of -inf (a causal attention mask)
kept local by default; values that are not finite refused with the
tensor named; the wrapper's state_dict round trip (gossip checkpoint
included); overlap=True reaching libsgp; sgp.Error for a wrong size, a closed peer, a missing cluster
file; the GPU path when a GPU is present.
"""

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "peer", "python"))
import sgp  # noqa: E402
import sgp.torch  # noqa: E402

SGP_BIN = os.environ.get("SGP_BIN", "build/sgp")
torch.set_num_threads(1)


def cluster(peers=2):
    """A fresh run's cluster file (sgp launch --prepare): its path."""
    d = tempfile.mkdtemp(prefix="sgp-torch-test-")
    subprocess.run([SGP_BIN, "launch", "--peers", str(peers), "--prepare", "--run-dir", d], check=True,
                   capture_output=True)
    return d, os.path.join(d, "cluster.conf")


def on_threads(fn, n=2):
    """fn(i) for i in range(n), each on its own thread; their results, or the first exception."""
    out, errs = [None] * n, []

    def run(i):
        try:
            out[i] = fn(i)
        except BaseException as e:  # noqa: B902 (reported below)
            errs.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    if errs:
        raise errs[0]
    return out


def small_model(seed=0, device="cpu"):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 2)).to(device)


class ZeroCopy(unittest.TestCase):
    def test_parameters_are_views_of_the_buffer_and_a_round_copies_nothing(self):
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)
        copies = []
        real_copy = torch.Tensor.copy_

        def counting_copy(t, *a, **k):
            copies.append(tuple(t.shape))
            return real_copy(t, *a, **k)

        def peer(i):
            m = small_model(seed=0)
            inner = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            x = torch.randn(16, 6)
            m(x).pow(2).mean().backward()
            inner.step()  # momentum state exists before wrapping
            before = {id(p): inner.state[p]["momentum_buffer"].clone() for p in m.parameters()}
            with sgp.torch.TorchPeer(m, cluster=conf, id=i, rounds=3, codec="exact") as p:
                base, end = p.flat.flat.data_ptr(), p.flat.flat.data_ptr() + 4 * p.flat.n
                for q in m.parameters():
                    self.assertTrue(base <= q.data_ptr() < end, "a parameter outside the buffer")
                    self.assertEqual(inner.state[q]["momentum_buffer"].shape, q.shape)
                    self.assertTrue(torch.equal(inner.state[q]["momentum_buffer"], before[id(q)]))
                # the buffer is the model: writing one is writing the other
                first = next(m.parameters())
                p.buffer[0] = 42.0
                self.assertEqual(float(first.detach().reshape(-1)[0]), 42.0)
                m(x).pow(2).mean().backward()
                inner.step()
                if i == 0:
                    torch.Tensor.copy_ = counting_copy
                try:
                    p.step()
                finally:
                    torch.Tensor.copy_ = real_copy
                for q in m.parameters():
                    self.assertTrue(base <= q.data_ptr() < end, "still in the buffer after a round")
                while not p.step():
                    pass
            return None

        on_threads(peer)
        self.assertEqual(copies, [], "a round on the CPU copies no tensor")


class Buffers(unittest.TestCase):
    def run_pair(self, buffers):
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            m = small_model(seed=0)
            with torch.no_grad():
                m[1].running_mean.fill_(2.0 * i)  # 0 and 2: averaged, 1
            inner = torch.optim.SGD(m.parameters(), lr=0.0)
            opt = sgp.torch.Optimizer(inner, cluster=conf, id=i, steps=1, codec="exact", model=m,
                                      buffers=buffers)
            opt.step()
            self.assertTrue(opt.done)
            out = m[1].running_mean.clone(), int(m[1].num_batches_tracked)
            opt.close()
            return out

        return on_threads(peer)

    def test_average_mixes_the_float_buffers(self):
        (a, _), (b, _) = self.run_pair("average")
        self.assertTrue(torch.allclose(a, torch.ones_like(a), atol=1e-6), a)
        self.assertTrue(torch.allclose(b, torch.ones_like(b), atol=1e-6), b)

    def test_local_keeps_them(self):
        (a, _), (b, _) = self.run_pair("local")
        self.assertTrue(torch.equal(a, torch.zeros_like(a)), a)
        self.assertTrue(torch.equal(b, torch.full_like(b, 2.0)), b)

    def test_an_unknown_choice_is_refused(self):
        with self.assertRaises(sgp.Error) as e:
            sgp.torch.Optimizer(torch.optim.SGD(small_model().parameters(), lr=0.1), cluster="x", steps=1,
                                buffers="sum")
        self.assertIn("average, local", str(e.exception))


    def test_running_the_default_mixes_the_running_statistics(self):
        (a, _), (b, _) = self.run_pair("running")
        self.assertTrue(torch.allclose(a, torch.ones_like(a), atol=1e-6), a)
        self.assertTrue(torch.allclose(b, torch.ones_like(b), atol=1e-6), b)


class TinyGPT(torch.nn.Module):
    """nanoGPT's shape in little: token and position embeddings, causal
    self-attention whose mask is a registered buffer of -inf above the
    diagonal (nn.MultiheadAttention's attn_mask, as people write it), and a
    head."""

    def __init__(self, vocab=16, width=16, heads=2, T=8):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Embedding(T, width)
        self.attn = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

    def forward(self, idx):
        T = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(T))
        a, _ = self.attn(h, h, h, attn_mask=self.mask[:T, :T], need_weights=False)
        return self.head(self.ln(h + a))


class FiniteOnly(unittest.TestCase):
    def test_a_gpt_with_a_causal_mask_buffer_trains_through_sgp_by_default(self):
        """Before, the default mixed the mask: 'the model diverged at round 0'."""
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            torch.manual_seed(0)
            m = TinyGPT()
            mask = m.mask.clone()
            opt = sgp.torch.Optimizer(torch.optim.AdamW(m.parameters(), lr=3e-3), cluster=conf, id=i, steps=6,
                                      local_steps=2, codec="stc:0.04", model=m)
            g = torch.Generator().manual_seed(i)
            while not opt.done:
                x = torch.randint(0, 16, (4, 8), generator=g)
                loss = torch.nn.functional.cross_entropy(m(x[:, :-1]).reshape(-1, 16), x[:, 1:].reshape(-1))
                loss.backward()
                opt.step()
                opt.zero_grad()
            self.assertTrue(torch.equal(m.mask, mask), "the constant stays as it was")
            self.assertTrue(all(bool(torch.isfinite(p).all()) for p in m.parameters()))
            opt.close()

        on_threads(peer)

    def test_average_refuses_a_buffer_that_is_not_finite_naming_it(self):
        with self.assertRaises(sgp.Error) as e:
            sgp.torch.Optimizer(torch.optim.SGD(TinyGPT().parameters(), lr=0.1), cluster="x", steps=1,
                                model=TinyGPT(), buffers="average")
        self.assertEqual(e.exception.errno, errno.EDOM)
        self.assertIn("buffer mask", str(e.exception))

    def test_the_finiteness_check_finds_any_bad_value_and_lets_an_overflowing_sum_pass(self):
        w = torch.zeros(3 << 20)  # more than one of the exact check's chunks
        f = sgp.torch._Flat([("w", w)])
        self.assertTrue(f.all_finite())
        with torch.no_grad():
            w[:2] = 3e38  # finite values whose sum is not
        self.assertTrue(f.all_finite())
        for bad in (float("nan"), float("inf"), float("-inf")):
            with torch.no_grad():
                w[(2 << 20) + 5] = bad
            self.assertFalse(f.all_finite(), bad)
            with torch.no_grad():
                w[(2 << 20) + 5] = 0

    def test_a_parameter_gone_to_nan_is_refused_at_the_round_naming_it(self):
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            m = small_model(seed=0)
            opt = sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=0.0), cluster=conf, id=i, steps=4,
                                      codec="exact", model=m)
            opt.step()
            if i == 1:
                with torch.no_grad():
                    m[3].weight[0, 0] = float("nan")
                with self.assertRaises(sgp.Error) as e:
                    opt.step()
                self.assertEqual(e.exception.errno, errno.EDOM)
                self.assertIn("parameter 3.weight", str(e.exception))
            opt.close()

        on_threads(peer)


class StateDict(unittest.TestCase):
    def test_round_trip_restores_model_inner_state_and_gossip_state(self):
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)
        H, STEPS = 2, 12

        def make(i, seed):
            m = small_model(seed=seed)
            inner = torch.optim.AdamW(m.parameters(), lr=0.01)
            opt = sgp.torch.Optimizer(inner, cluster=conf, id=i, steps=STEPS, local_steps=H,
                                      outer="nesterov:0.7:0.9", codec="stc:0.25", model=m,
                                      checkpoint=os.path.join(d, "%d.ckpt" % i))
            return m, inner, opt

        def train(m, opt, i, steps):
            g = torch.Generator().manual_seed(100 + i + opt._steps)
            for _ in range(steps):
                x = torch.randn(16, 6, generator=g)
                m(x).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()

        def first(i):
            m, inner, opt = make(i, seed=0)
            train(m, opt, i, 4)  # two rounds
            sd = opt.state_dict()
            params = [p.detach().clone() for p in m.parameters()]
            moments = [inner.state[p]["exp_avg"].clone() for p in m.parameters()]
            opt.close()
            return sd, params, moments

        saved = on_threads(first)

        def second(i):
            sd, params, moments = saved[i]
            self.assertEqual(sd["sgp"]["steps"], 4)
            self.assertGreater(len(sd["sgp"]["checkpoint"]), 0)
            m, inner, opt = make(i, seed=7)  # another initial model: the state_dict must replace it
            opt.load_state_dict(sd)
            for p, q in zip(m.parameters(), params):
                self.assertTrue(torch.allclose(p, q, atol=1e-6), "the model comes back")
            for p, mom in zip(m.parameters(), moments):
                self.assertTrue(torch.equal(inner.state[p]["exp_avg"], mom), "the inner state comes back")
            self.assertEqual(opt.status()["round"], 2)
            train(m, opt, i, STEPS - 4)
            self.assertTrue(opt.done)
            with self.assertRaises(sgp.Error) as e:
                opt.load_state_dict(sd)
            self.assertEqual(e.exception.errno, errno.EBUSY)
            opt.close()

        on_threads(second)

    def test_a_scheduler_drives_the_wrapped_learning_rate(self):
        m = small_model()
        opt = sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=1.0), cluster="unused", steps=4)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        self.assertIsInstance(opt, torch.optim.Optimizer)
        with warnings.catch_warnings():  # "scheduler before optimizer": no peer is opened here
            warnings.simplefilter("ignore")
            sched.step()
        self.assertEqual(opt.optimizer.param_groups[0]["lr"], 0.5)


class Overlap(unittest.TestCase):
    def test_overlap_true_reaches_libsgp_the_first_round_leaves_the_own_step(self):
        # Peer i's step adds i + 1 (SGD, lr 1, gradient -(i + 1)) from 0, 2
        # rounds of one step, push-sum with the "exact" codec. With overlap the
        # first gossip step leaves the own step (1, 2), the second mixes in
        # the first round's shares and the end the second's: 3 on both, the
        # mean of the steps, every step counted whole
        # (tests/process/test_lib_api.c derives such values); without, 1.5
        # and then 3.
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            w = torch.nn.Parameter(torch.zeros(4))
            opt = sgp.torch.Optimizer(torch.optim.SGD([w], lr=1.0), cluster=conf, id=i, steps=2,
                                      codec="exact", overlap=True)
            seen = []
            for _ in range(2):
                w.grad = torch.full((4,), -(i + 1.0))
                opt.step()
                seen.append(w.detach().clone())
            self.assertTrue(opt.done)
            opt.close()
            return seen, repr(opt)

        for i, (seen, r) in enumerate(on_threads(peer)):
            self.assertTrue(torch.equal(seen[0], torch.full((4,), i + 1.0)), "peer %d: %s" % (i, seen[0]))
            self.assertTrue(torch.equal(seen[1], torch.full((4,), 3.0)), "peer %d: %s" % (i, seen[1]))
            self.assertIn("overlap=True", r)


class Errors(unittest.TestCase):
    def test_a_cluster_file_that_does_not_exist(self):
        m = small_model()
        with self.assertRaises(sgp.Error) as e:
            sgp.torch.TorchPeer(m, cluster="/no/such/cluster.conf", id=0, rounds=1)
        self.assertEqual(e.exception.errno, errno.ENOENT)
        self.assertIn("/no/such/cluster.conf", str(e.exception))

    def test_a_wrong_size_and_a_closed_peer(self):
        import numpy as np
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            x = np.zeros(10, dtype=np.float32)
            p = sgp.Peer(x, cluster=conf, id=i, rounds=1, codec="exact")
            with self.assertRaises(sgp.Error) as e:
                p.step(np.zeros(9, dtype=np.float32))
            self.assertEqual(e.exception.errno, errno.EINVAL)
            self.assertIn("10", str(e.exception))
            self.assertTrue(p.step(x))
            p.close()
            with self.assertRaises(sgp.Error) as e:
                p.step(x)
            self.assertEqual(e.exception.errno, errno.EBADF)

        on_threads(peer)

    def test_an_unknown_option_and_a_model_not_float32(self):
        with self.assertRaises(TypeError) as e:
            sgp.torch.TorchPeer(small_model(), cluster="x", rounds=1, codex="stc:0.1")
        self.assertIn("codex", str(e.exception))
        with self.assertRaises(sgp.Error) as e:
            sgp.torch.TorchPeer(small_model().double(), cluster="x", rounds=1)
        self.assertIn("float32", str(e.exception))


    def test_the_lm_recipe_sets_the_all_gather_and_what_is_given_wins(self):
        m = small_model()
        opt = sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=0.1), cluster="x", steps=30, recipe="lm")
        o = opt._options
        self.assertEqual((o["codec"], o["gather"], o["local_steps"], o["rounds"]), ("sparseloco:32", 0.95, 10, 3))
        opt = sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=0.1), cluster="x", steps=9, recipe="lm",
                                  codec="sparseloco:16", local_steps=1, gather=0.5)
        o = opt._options
        self.assertEqual((o["codec"], o["gather"], o["local_steps"]), ("sparseloco:16", 0.5, 1))
        self.assertNotIn("gather", sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=0.1), cluster="x",
                                                       steps=9)._options, "push-sum unless asked")
        with self.assertRaises(sgp.Error):
            sgp.torch.Optimizer(torch.optim.SGD(m.parameters(), lr=0.1), cluster="x", steps=9, recipe="vision")


@unittest.skipUnless(torch.cuda.is_available(), "no GPU here: the GPU path is checked where torch sees one")
class Gpu(unittest.TestCase):
    def test_a_model_on_the_gpu_stays_there_and_averages(self):
        d, conf = cluster()
        self.addCleanup(shutil.rmtree, d, True)

        def peer(i):
            m = small_model(seed=0, device="cuda")
            with torch.no_grad():
                for p in m.parameters():
                    p.fill_(float(i))  # 0 and 1: averaged, 0.5
            with sgp.torch.TorchPeer(m, cluster=conf, id=i, rounds=1, codec="exact") as p:
                self.assertTrue(p.flat.host.is_pinned())
                self.assertTrue(p.step())
                for q in m.parameters():
                    self.assertEqual(q.device.type, "cuda")
                    self.assertTrue(torch.allclose(q, torch.full_like(q, 0.5), atol=1e-6))

        on_threads(peer)


if __name__ == "__main__":
    unittest.main()
