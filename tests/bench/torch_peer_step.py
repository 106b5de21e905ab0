#!/usr/bin/env python3
"""What a round of sgp.torch costs a PyTorch model, on the CPU or a GPU.

Two peers of one run on loopback (threads of this process), each a
TorchPeer over an MLP of about --params parameters, codec stc:0.04: the time
of peer.step() (device to host, push, wait, mix, host to device), against
the reference in the same run: copying the model's parameters out to a
host buffer and back, the least a step that mixes on the host can cost, and
the old pack/unpack (one copy per parameter tensor each way, what TorchPeer
did before the flat buffer).

With --local-steps H each round is H stand-in optimizer steps of --step-ms
milliseconds of real work each (a matrix product on the model's device), and
the table gives peer.step()'s blocking time as a share of the round's H
steps (--idle-steps: the stand-in steps sleep, leaving the host's cores to
sgp's threads as a GPU's steps do; else both peers' steps and exchanges
share this host's cores); --overlap runs the exchange during the next round's steps (`sgp peer
--overlap`), so peer.step() waits only for what the steps did not cover; --gather
DECAY times the LM recipe's exact sparse all-gather (with --codec sparseloco:32).

    SGP_LIB=build/libsgp.so python3 tests/bench/torch_peer_step.py [--device cuda] [--params 25e6]
    SGP_LIB=build/libsgp.so python3 tests/bench/torch_peer_step.py --local-steps 10 --step-ms 20 [--overlap] [--idle-steps]
        [--gossip-threads N] [--codec sparseloco:32 --gather 0.95]

Prints a table; median over --rounds rounds after 3 warm-up rounds.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "peer", "python"))
import sgp.torch  # noqa: E402


def model(params, device):
    width = int((params / 4) ** 0.5)  # 4 square layers
    torch.manual_seed(0)
    layers = [torch.nn.Linear(width, width) for _ in range(4)]
    return torch.nn.Sequential(*layers).to(device), sum(p.numel() for lay in layers for p in lay.parameters())


def busy(ms, device, idle=False):
    """About ms milliseconds of real work on device: a stand-in for a forward and backward pass
    (idle: a sleep, the host as a GPU's step leaves it, its cores free for sgp's threads)."""
    if ms <= 0:
        return
    if idle:
        time.sleep(ms / 1e3)
        return
    a = torch.randn(256, 256, device=device)
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < ms:
        a = torch.tanh(a @ a)
        sync(device)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def copy_times(m, device, rounds):
    """The reference: the flat parameters out to pinned host memory and back; and per-tensor pack/unpack."""
    params = list(m.parameters())
    n = sum(p.numel() for p in params)
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    host = torch.empty(n, dtype=torch.float32, pin_memory=device.startswith("cuda"))
    whole, per_tensor = [], []
    for _ in range(rounds):
        sync(device)
        t0 = time.perf_counter()
        host.copy_(flat, non_blocking=True)
        sync(device)
        flat.copy_(host, non_blocking=True)
        sync(device)
        whole.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        i = 0
        with torch.no_grad():
            for p in params:
                host[i:i + p.numel()].copy_(p.reshape(-1))
                i += p.numel()
            i = 0
            for p in params:
                p.copy_(host[i:i + p.numel()].view_as(p))
                i += p.numel()
        sync(device)
        per_tensor.append(time.perf_counter() - t0)
    return statistics.median(whole), statistics.median(per_tensor)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--params", type=float, default=5e6)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--codec", default="stc:0.04")
    ap.add_argument("--local-steps", type=int, default=1, help="stand-in optimizer steps a round [1]")
    ap.add_argument("--step-ms", type=float, default=0, help="milliseconds of work a stand-in step [0]")
    ap.add_argument("--overlap", action="store_true", help="the exchange runs during the next round's steps")
    ap.add_argument("--gather", type=float, help="the exact sparse all-gather with this error feedback decay "
                    "(the LM recipe: --codec sparseloco:32 --gather 0.95) [off: push-sum]")
    ap.add_argument("--gossip-threads", type=int, default=0,
                    help="sgp's threads for its vector loops, each peer (0: the host's cores) [0]")
    ap.add_argument("--idle-steps", action="store_true",
                    help="the stand-in steps sleep: the host's cores stay free, as on a GPU host")
    a = ap.parse_args()
    torch.set_num_threads(2)
    d = tempfile.mkdtemp(prefix="sgp-torch-step-")
    subprocess.run([os.environ.get("SGP_BIN", "build/sgp"), "launch", "--peers", "2", "--prepare", "--run-dir", d],
                   check=True, capture_output=True)
    times = [[], []]
    compute = [[], []]
    sizes = [0, 0]

    def peer(i):
        m, n = model(a.params, a.device)
        sizes[i] = n
        with sgp.torch.TorchPeer(m, cluster=os.path.join(d, "cluster.conf"), id=i, rounds=a.rounds + 3,
                                 codec=a.codec, local_steps=a.local_steps, overlap=a.overlap,
                                 gossip_threads=a.gossip_threads,
                                 **({"gather": a.gather} if a.gather is not None else {})) as p:
            for r in range(a.rounds + 3):
                t0 = time.perf_counter()
                for _ in range(a.local_steps):
                    busy(a.step_ms, a.device, a.idle_steps)
                    with torch.no_grad():
                        for q in m.parameters():
                            q.mul_(0.999)  # a stand-in for an optimizer step: the model moves
                sync(a.device)
                if r >= 3:
                    compute[i].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                p.step()
                sync(a.device)
                if r >= 3:
                    times[i].append(time.perf_counter() - t0)

    ts = [threading.Thread(target=peer, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    m, n = model(a.params, a.device)
    whole, per_tensor = copy_times(m, a.device, a.rounds)
    step = statistics.median(times[0] + times[1])
    steps = statistics.median(compute[0] + compute[1])
    name = torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu"
    print("| device | parameters | codec | H | overlap | gossip threads | steps | peer.step() | the H steps | "
          "blocking share | flat copy out and back | per-tensor pack/unpack |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("| %s (%s) | %d | %s | %d | %s | %s | %s | %.2f ms | %.2f ms | %s | %.2f ms | %.2f ms |" % (
        a.device, name, n, a.codec + (" --gather %g" % a.gather if a.gather is not None else ""), a.local_steps, "yes" if a.overlap else "no",
        a.gossip_threads or "cores",
        "idle" if a.idle_steps else "busy", 1e3 * step, 1e3 * steps,
        "%.1f%%" % (100 * step / steps) if a.step_ms > 0 else "-", 1e3 * whole, 1e3 * per_tensor))


if __name__ == "__main__":
    main()
