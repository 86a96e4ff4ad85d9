"""GPU health output, GPU model peaks and PCIe link limits: the figures of the GPUHealth check.

`reframe-tests/checks/gpu/src/gpu_health.cu` prints one line per verified measurement; this module
parses it (and the `nvidia-smi --query-gpu=...,pcie.link.gen.max,pcie.link.width.max` CSV the
check records beside it) and turns it into fractions of limits:
  - FMA-loop FP64/FP32 GFLOP/s as a fraction of the model's vector peak (data/gpu_models.yaml),
  - host<->device copies (pinned, pageable) as a fraction of the PCIe link limit (generation and
    width from nvidia-smi; the topology's pci_link_speed is the *current* speed, which an idle GPU
    lowers: the H100 XMLs show 63.0 and 15.8 GB/s for the same gen5 x16 link),
  - device-to-device copy (read + write) as a fraction of the model's memory bandwidth,
  - the slowest peer-to-peer pair (GB/s) and the CPUs a live context migrated over.
The worst GPU of the node gives each figure: one slow GPU fails the node.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from stackproof.errors import StackproofError

MODELS_FILE = Path(__file__).parent / "data" / "gpu_models.yaml"

# Transfer rate per lane (GT/s) and line-code efficiency, by PCIe generation (PCI-SIG).
PCIE_GEN = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
            5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


@lru_cache(maxsize=1)
def models() -> list[dict]:
    return yaml.safe_load(MODELS_FILE.read_text())["models"]


def model_info(model: str) -> dict | None:
    """The table entry of a GPU model string ('NVIDIA H100 80GB HBM3', 'Tesla V100-SXM2-16GB')."""
    for entry in models():
        if re.search(entry["match"], model or "", re.IGNORECASE):
            return entry
    return None


def cuda_arch(model: str) -> str | None:
    info = model_info(model)
    return info["arch"] if info else None


def pcie_limit_gbs(gen: int, width: int) -> float:
    """Payload-free link limit in GB/s (10^9 B/s) per direction: gen5 x16 -> 63.0."""
    if gen not in PCIE_GEN or width <= 0:
        raise ValueError(f"unknown PCIe link gen{gen} x{width}")
    rate, code = PCIE_GEN[gen]
    return rate * width * code / 8


@dataclass
class Link:
    gen: int
    width: int

    @property
    def limit_gbs(self) -> float:
        return pcie_limit_gbs(self.gen, self.width)


def parse_links(text: str) -> dict[int, Link]:
    """`nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.max,pcie.link.width.max
    --format=csv,noheader` -> {index: Link}. Lines that are not such rows are ignored."""
    links = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit() and parts[2].isdigit() and parts[3].isdigit():
            links[int(parts[0])] = Link(int(parts[2]), int(parts[3]))
    return links


@dataclass
class Device:
    index: int
    pci: str = ""
    name: str = ""
    fma: dict = field(default_factory=dict)         # fp64|fp32 -> (ok, gflops)
    copies: dict = field(default_factory=dict)      # (h2d|d2h|d2d, pinned|pageable|device) -> (ok, GB/s)
    migrate: tuple | None = None                    # (cpus, visited, ok)


@dataclass
class Output:
    devices: dict[int, Device]
    p2p: list[tuple]                                # (src, dst, access, ok, GB/s)
    verdict: str | None                             # PASS | FAIL | None (cut off)
    errors: list[str]
    count: int = 0                                  # devices the program said it saw


_NUM = r"([0-9.]+(?:[eE][+-]?\d+)?)"
LINES = {
    "head": re.compile(r"^gpu_health: version (\d+) devices (\d+)$"),
    "device": re.compile(r"^device (\d+) pci (\S+) sms (\d+) name (.*)$"),
    "fma": re.compile(rf"^fma (\d+) (fp64|fp32) (ok|FAIL) gflops {_NUM} iterations (\d+)$"),
    "copy": re.compile(rf"^copy (\d+) (h2d|d2h|d2d) (pinned|pageable|device) (ok|FAIL) GB/s {_NUM}$"),
    "p2p": re.compile(rf"^p2p (\d+) (\d+) access (yes|no) (ok|FAIL) GB/s {_NUM}$"),
    "migrate": re.compile(r"^migrate (\d+) cpus (\d+) visited (\d+) (ok|FAIL)$"),
    "verdict": re.compile(r"^gpu_health: (PASS|FAIL)$"),
    "error": re.compile(r"^gpu_health: (CUDA error .*|copy size .*)$"),
}


def parse_output(text: str, origin: str = "gpu_health output") -> Output:
    count = None
    devices: dict[int, Device] = {}
    out = Output(devices, [], None, [])

    def dev(i):
        return devices.setdefault(int(i), Device(int(i)))

    for line in text.splitlines():
        line = line.rstrip()
        for kind, rx in LINES.items():
            m = rx.match(line)
            if m:
                break
        else:
            continue
        g = m.groups()
        if kind == "head":
            if g[0] != "2":
                raise StackproofError(f"{origin}: gpu_health output version {g[0]}, expected 2")
            count = int(g[1])
        elif kind == "device":
            d = dev(g[0])
            d.pci, d.name = g[1], g[3].strip()
        elif kind == "fma":
            dev(g[0]).fma[g[1]] = (g[2] == "ok", float(g[3]))
        elif kind == "copy":
            dev(g[0]).copies[(g[1], g[2])] = (g[3] == "ok", float(g[4]))
        elif kind == "p2p":
            out.p2p.append((int(g[0]), int(g[1]), g[2] == "yes", g[3] == "ok", float(g[4])))
        elif kind == "migrate":
            dev(g[0]).migrate = (int(g[1]), int(g[2]), g[3] == "ok")
        elif kind == "verdict":
            out.verdict = g[0]
        else:
            out.errors.append(g[0])
    if count is None and out.errors:
        raise StackproofError(f"{origin}: gpu_health stopped before measuring: {out.errors[0]}")
    if count is None:
        raise StackproofError(f"{origin}: no 'gpu_health: version 2 devices N' line (the program did not "
                              f"start, or this is not its output)")
    for i in range(count):
        dev(i)
    out.count = count
    return out


COPIES = [("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"), ("d2d", "device")]


def problems(out: Output, expected_devices: int) -> list[str]:
    """Everything that makes the run unhealthy; empty when every measurement was verified."""
    found = []
    if out.count != expected_devices:
        found.append(f"the job saw {out.count} GPUs, the partition has {expected_devices}")
    if len(out.devices) != out.count:
        found.append(f"results for {len(out.devices)} GPUs, the program saw {out.count}")
    found += out.errors
    for d in out.devices.values():
        for prec in ("fp64", "fp32"):
            if d.fma.get(prec, (False,))[0] is not True:
                found.append(f"GPU {d.index}: {prec} FMA loop " + ("wrong result" if prec in d.fma else "missing"))
        for key in COPIES:
            if d.copies.get(key, (False,))[0] is not True:
                found.append(f"GPU {d.index}: {key[0]} {key[1]} copy " + ("wrong data" if key in d.copies else "missing"))
        if d.migrate is None or not d.migrate[2]:
            found.append(f"GPU {d.index}: thread migration " + (
                f"failed ({d.migrate[1]} of {2 * d.migrate[0]} moves verified)" if d.migrate else "missing"))
    pairs = {(s, t) for s, t, _, ok, _ in out.p2p if ok}
    missing = [(s, t) for s in out.devices for t in out.devices if s != t and (s, t) not in pairs]
    if missing:
        found.append("GPU pairs without a verified copy: " + ", ".join(f"{s}->{t}" for s, t in missing))
    if out.verdict != "PASS":
        found.append(f"program verdict {out.verdict or 'missing (cut off?)'}")
    return found


def figure_units() -> dict[str, str]:
    """Every figure `figures` can give, with its unit (the GPU health check declares them up front)."""
    units = {}
    for prec in ("fp64", "fp32"):
        units.update({f"{prec}_gflops": "GFLOP/s", f"{prec}_fraction": ""})
    for direction, mem in COPIES[:4]:
        units.update({f"{direction}_{mem}_gbs": "GB/s", f"{direction}_{mem}_fraction": ""})
    units.update({"d2d_gbs": "GB/s", "d2d_fraction": "", "p2p_min_gbs": "GB/s", "migrated_cpus": "CPUs"})
    return units


def figures(out: Output, model: str, links: dict[int, Link]) -> tuple[dict, list[str]]:
    """Performance figures {name: (value, unit)} (worst GPU) and notes on what could not be
    computed. A figure whose limit is unknown is left out (never reported as a pass)."""
    notes = []
    info = model_info(model)
    if info is None:
        notes.append(f"GPU model {model!r} is not in {MODELS_FILE.name}: no fractions of peak")
    devs = list(out.devices.values())

    def worst(values):
        values = [v for v in values if v is not None]
        return min(values) if values and len(values) == len(devs) else None

    res: dict[str, tuple] = {}
    for prec in ("fp64", "fp32"):
        gflops = worst(d.fma.get(prec, (None, None))[1] for d in devs)
        res[f"{prec}_gflops"] = (gflops, "GFLOP/s")
        peak = info[f"{prec}_tflops"] * 1000 if info else None
        res[f"{prec}_fraction"] = (gflops / peak if gflops is not None and peak else None, "")
    missing_links = [d.index for d in devs if d.index not in links]
    if missing_links:
        notes.append(f"no PCIe link generation/width for GPU(s) {missing_links} (nvidia-smi): "
                     "no host<->device fractions")
    for direction, mem in COPIES[:4]:
        gbs = worst(d.copies.get((direction, mem), (None, None))[1] for d in devs)
        res[f"{direction}_{mem}_gbs"] = (gbs, "GB/s")
        fracs = [d.copies[(direction, mem)][1] / links[d.index].limit_gbs
                 for d in devs if (direction, mem) in d.copies and d.index in links]
        res[f"{direction}_{mem}_fraction"] = (min(fracs) if fracs and len(fracs) == len(devs) else None, "")
    d2d = worst(d.copies.get(("d2d", "device"), (None, None))[1] for d in devs)
    res["d2d_gbs"] = (d2d, "GB/s")
    res["d2d_fraction"] = (d2d / info["mem_gbs"] if d2d is not None and info else None, "")
    if len(devs) > 1:
        res["p2p_min_gbs"] = (min((p[4] for p in out.p2p), default=None), "GB/s")
    moves = [d.migrate[1] for d in devs if d.migrate]
    res["migrated_cpus"] = (min(moves) // 2 if moves and len(moves) == len(devs) else None, "CPUs")
    return res, notes
