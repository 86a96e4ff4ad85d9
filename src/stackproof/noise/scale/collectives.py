"""Allreduce algorithms as completion-time recurrences over all ranks (one rank per node).

Each function takes the times at which the ranks enter the collective (array of N) and returns the
times at which each leaves it, under LogGP costs (loggp.LogGP) for messages of `size` bytes. A
receive completes at max(receiver ready, sender's send time + o + wire) + o; a process sending
several messages spaces them by max(o, g). Communication itself is noise-free here: detours are
applied to the compute phases (docs/noise.md, "Noise at scale", states why).

  binomial            binomial-tree reduce to rank 0, then binomial broadcast (2 ceil(log2 N) steps)
  recursive-doubling  pairwise exchanges with rank ^ 2^k (non-powers of two fold the extra ranks first)
  dissemination       rank r sends to r + 2^k and receives from r - 2^k (mod N), ceil(log2 N) rounds
  linear              every rank sends to rank 0, which receives in arrival order, then sends back one by one
"""
from __future__ import annotations

import numpy as np

from functools import lru_cache

from stackproof.noise.scale.loggp import LogGP

ALGORITHMS = ("binomial", "recursive-doubling", "linear", "dissemination")


def _rounds(n: int) -> int:
    return max(int(np.ceil(np.log2(n))), 0) if n > 1 else 0


@lru_cache(maxsize=8)
def _binomial_schedule(n: int) -> tuple[list, list]:
    """Per step, the sending ranks of the reduce (children: r % 2^(k+1) == 2^k, to r - 2^k) and
    of the broadcast (parents: r % 2^(k+1) == 0, to r + 2^k), computed once per node count."""
    ranks = np.arange(n)
    up = [ranks[half::half << 1] for half in (1 << k for k in range(_rounds(n)))]
    down = [ranks[0:max(n - half, 0):half << 1] for half in (1 << k for k in reversed(range(_rounds(n))))]
    return up, down


def binomial(t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    n = t.size
    t = t.copy()
    hop = p.o + p.wire(size)
    step = max(p.o, p.g)
    up, down = _binomial_schedule(n)
    for k, senders in enumerate(up):                  # reduce: children send up
        receivers = senders - (1 << k)
        t[receivers] = np.maximum(t[receivers], t[senders] + hop) + p.o
        t[senders] += p.o
    for j, senders in enumerate(down):                # broadcast: parents send down
        receivers = senders + (1 << (len(down) - 1 - j))
        t[receivers] = np.maximum(t[receivers], t[senders] + hop) + p.o
        t[senders] += step
    return t


def _exchange(t: np.ndarray, partner_t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    """Each rank sends (o) and receives its partner's message: done at max(own send, arrival) + o."""
    return np.maximum(t + p.o, partner_t + p.o + p.wire(size)) + p.o


def _swap_halves(t: np.ndarray, half: int) -> np.ndarray:
    """t[r ^ half] for all r (len(t) a power of two): swap adjacent blocks of `half`, no gather."""
    return t.reshape(-1, 2, half)[:, ::-1, :].reshape(-1)


def recursive_doubling(t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    n = t.size
    t = t.copy()
    if n == 1:
        return t
    p2 = 1 << int(np.floor(np.log2(n)))
    extra = np.arange(p2, n)
    hop = p.o + p.wire(size)
    if extra.size:                                    # fold: ranks >= p2 hand their data down
        t[extra - p2] = np.maximum(t[extra - p2], t[extra] + hop) + p.o
        t[extra] += p.o
    core = t[:p2]
    for k in range(int(np.log2(p2))):
        core = _exchange(core, _swap_halves(core, 1 << k), p, size)
    t[:p2] = core
    if extra.size:                                    # unfold: the result goes back up
        t[extra] = np.maximum(t[extra], t[extra - p2] + hop) + p.o
        t[extra - p2] += max(p.o, p.g)
    return t


def dissemination(t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    n = t.size
    t = t.copy()
    for k in range(_rounds(n)):                       # receive from r - 2^k (mod n): a rotation
        t = _exchange(t, np.roll(t, 1 << k), p, size)
    return t


def linear(t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    n = t.size
    if n == 1:
        return t.copy()
    step = max(p.o, p.g)
    out = t + p.o                                     # every non-root rank sends once
    arrivals = np.sort(t[1:] + p.o + p.wire(size))
    # root handles the arrivals in order, `step` each: after the k-th (0-based) it is at
    # max over j <= k of (arrival_j + (k - j + 1) step), and no earlier than t0 + (k + 1) step
    m = arrivals.size
    done = max(float(t[0]) + m * step, float(np.max(arrivals + (m - np.arange(m)) * step)))
    sends = done + np.arange(m) * step                 # then one message to each rank, in rank order
    out[1:] = np.maximum(out[1:], sends + p.o + p.wire(size)) + p.o
    out[0] = done + m * step
    return out


FUNCTIONS = {"binomial": binomial, "recursive-doubling": recursive_doubling,
             "linear": linear, "dissemination": dissemination}


def allreduce(name: str, t: np.ndarray, p: LogGP, size: int) -> np.ndarray:
    return FUNCTIONS[name](t, p, size)
