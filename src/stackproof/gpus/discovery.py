"""GPUs that hwloc sees only as PCI devices, filled in from the vendor's tool.

Debian's and Ubuntu's hwloc packages are built without NVML/CUDA (and RSMI): on such a node an
H100 is a bare PCI 3D controller (class 0302, vendor 10de) with no GPU OS device, and a node
type derived from it would say `gpus: []`. Here every PCI display/3D controller of a GPU vendor
that has no compute OS device below it (only DRM devices, or nothing) is looked up in
`nvidia-smi -q` (NVIDIA) or `rocm-smi --showproductname --showbus --showuniqueid --json` (AMD),
matched by PCI bus id. If that is impossible the caller gets an error naming the device and how
to get an hwloc that sees it.

The vendor output comes from the tool on PATH, or from a recorded file (`--smi-output`), so a
topology recorded on a GPU node can be turned into a node type anywhere.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from stackproof.errors import StackproofError

# PCI class codes of display controllers: VGA, 3D, other display.
GPU_CLASSES = {"0300", "0302", "0380"}
VENDOR_IDS = {"10de": "nvidia", "1002": "amd", "8086": "intel"}
TOOLS = {"nvidia": "nvidia-smi", "amd": "rocm-smi"}
# OS devices that prove hwloc has no compute backend for a GPU: DRM nodes exist without one.
DRM_PREFIXES = ("card", "renderD", "controlD")

HWLOC_HELP = ("get an hwloc that sees GPUs: Spack `spack install hwloc +nvml +cuda` (AMD: `+rocm`), "
              "the distribution's plugin package (Debian/Ubuntu: libhwloc-contrib-plugins), or hwloc "
              "built from source with `./configure --enable-nvml --with-cuda=$CUDA_HOME` "
              "(docs/gpu.md); or pass the vendor tool's recorded output with --smi-output FILE")


@dataclass
class PciGpu:
    bus_id: str            # 0000:00:06.0
    vendor: str            # nvidia | amd | intel
    pci_ids: str           # "0302 [10de:2330]"
    element: ET.Element    # the PCIDev element (for NUMA locality)


@dataclass
class SmiGpu:
    index: int
    model: str
    bus_id: str
    uuid: str | None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None


def normalize_bus_id(text: str) -> str:
    """'00000000:00:06.0' (nvidia-smi), '0000:C1:00.0' (rocm-smi) -> '0000:00:06.0' (hwloc)."""
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*", text)
    if not m:
        raise ValueError(f"not a PCI bus id: {text!r}")
    domain = int(m.group(1) or "0", 16) & 0xffff
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def _is_drm(osdev: ET.Element) -> bool:
    return osdev.get("name", "").startswith(DRM_PREFIXES)


def pci_gpus_without_backend(objects: list[ET.Element]) -> list[PciGpu]:
    """PCI display/3D controllers of NVIDIA, AMD or Intel (Intel only as class 0380: class 0300
    Intel devices are integrated graphics) with no compute OS device below them, in bus order."""
    found = []
    for o in objects:
        if o.get("type") != "PCIDev":
            continue
        m = re.match(r"([0-9a-fA-F]{4}) \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]", o.get("pci_type", ""))
        if not m or m.group(1) not in GPU_CLASSES:
            continue
        cls, vendor_id = m.group(1), m.group(2).lower()
        vendor = VENDOR_IDS.get(vendor_id)
        if vendor is None or (vendor == "intel" and cls != "0380"):
            continue
        osdevs = [c for c in o if c.tag == "object" and c.get("type") == "OSDev"]
        if any(not _is_drm(d) for d in osdevs):
            continue                # NVML, RSMI, CUDA, OpenCL, Level Zero: hwloc knows it
        found.append(PciGpu(normalize_bus_id(o.get("pci_busid", "")), vendor,
                            f"{cls} [{vendor_id}:{m.group(3).lower()}]", o))
    return sorted(found, key=lambda g: g.bus_id)


# ---- vendor tool output ---------------------------------------------------------------------------

def parse_nvidia_smi_q(text: str) -> list[SmiGpu]:
    """`nvidia-smi -q`: one block per GPU headed `GPU 00000000:00:06.0`, in NVML index order."""
    gpus: list[SmiGpu] = []
    cur: dict | None = None
    section: list[str] = []
    for line in text.splitlines():
        head = re.match(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if head:
            cur = {"bus": head.group(1)}
            gpus.append(cur)        # type: ignore[arg-type]
            section = []
            continue
        if cur is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        depth = max(0, indent // 4 - 1)
        section = section[:depth]
        if not sep or not value:
            section.append(key)
            continue
        path = "/".join(section + [key])
        cur.setdefault(path, value)
    out = []
    for i, g in enumerate(gpus):
        def num(path):
            m = re.match(r"(\d+)", g.get(path, ""))
            return int(m.group(1)) if m else None
        out.append(SmiGpu(index=i, model=g.get("Product Name", "unknown"),
                          bus_id=normalize_bus_id(g.get("PCI/Bus Id", g["bus"])),
                          uuid=g.get("GPU UUID"),
                          pcie_gen_max=num("PCI/GPU Link Info/PCIe Generation/Max"),
                          pcie_width_max=num("PCI/GPU Link Info/Link Width/Max")))
    if not out and "NVSMI LOG" not in text:
        raise ValueError("no `GPU <bus id>` block: not `nvidia-smi -q` output")
    return out


ROCM_TEXT_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*([^:]+?)\s*:\s*(.*?)\s*$")
NOT_AVAILABLE = {"", "n/a", "na", "unknown", "not supported"}


def _rocm_cards(cards: dict[int, dict]) -> list[SmiGpu]:
    """{GPU index: {key: value}} with rocm-smi's key names (any case: 'Card series' in ROCm 5,
    'Card Series' in ROCm 6) -> GPUs. 'Card Model' is often a PCI device id (0x74a1): no name."""
    out = []
    for index in sorted(cards):
        card = {k.lower(): str(v).strip() for k, v in cards[index].items()}
        bus = card.get("pci bus")
        if not bus:
            raise ValueError(f"card{index}: no 'PCI Bus' (run rocm-smi with --showbus)")
        names = [card.get(k, "") for k in ("card series", "market name", "device name", "card model")]
        model = next((n for n in names if n.lower() not in NOT_AVAILABLE and not re.fullmatch(r"0x[0-9a-fA-F]+", n)),
                     "unknown")
        uuid = card.get("unique id", "")
        out.append(SmiGpu(index=index, model=model, bus_id=normalize_bus_id(bus),
                          uuid=None if uuid.lower() in NOT_AVAILABLE else uuid))
    return out


def parse_rocm_smi_json(text: str) -> list[SmiGpu]:
    """`rocm-smi --showproductname --showbus --showuniqueid --json`: {"card0": {"PCI Bus": ...}}
    (cardN is the GPU index N, as GPU[N] in the text output; other keys such as "system" are
    ignored)."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object of cards")
    return _rocm_cards({int(k[4:]): v for k, v in data.items() if re.fullmatch(r"card\d+", k)})


def parse_rocm_smi_text(text: str) -> list[SmiGpu]:
    """rocm-smi's text output (`rocm-smi -a`, or --showbus --showproductname without --json):
    `GPU[0]\t\t: PCI Bus: 0000:26:00.0` lines."""
    cards: dict[int, dict] = {}
    for line in text.splitlines():
        m = ROCM_TEXT_LINE.match(line.strip())
        if m:
            cards.setdefault(int(m.group(1)), {}).setdefault(m.group(2), m.group(3))
    if not cards:
        raise ValueError("no `GPU[N] : key: value` line: not rocm-smi output")
    return _rocm_cards(cards)


def parse_smi_output(text: str, origin: str) -> tuple[str, list[SmiGpu]]:
    """Recorded vendor output of either tool: (vendor, GPUs)."""
    try:
        if text.lstrip().startswith("{"):
            return "amd", parse_rocm_smi_json(text)
        if "ROCm System Management Interface" in text or re.search(r"^GPU\[\d+\]", text, re.M):
            return "amd", parse_rocm_smi_text(text)
        return "nvidia", parse_nvidia_smi_q(text)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StackproofError(f"{origin}: cannot read vendor GPU output: {exc}") from None


def run_vendor_tool(vendor: str) -> list[SmiGpu] | str:
    """The vendor tool's GPUs, or a string saying why there are none."""
    tool = TOOLS.get(vendor)
    if tool is None:
        return f"no vendor tool is known for {vendor} GPUs"
    exe = shutil.which(tool)
    if exe is None:
        return f"{tool} not found on PATH"
    args = [exe, "-q"] if vendor == "nvidia" else [exe, "--showproductname", "--showbus", "--showuniqueid", "--json"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool} failed: {exc}"
    if proc.returncode != 0:
        return f"{tool} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[:200]}"
    try:
        return parse_nvidia_smi_q(proc.stdout) if vendor == "nvidia" else parse_rocm_smi_json(proc.stdout)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{tool} output not understood: {exc}"


def fill_from_vendor_tools(pci_gpus: list[PciGpu], origin: str, smi_output: str | None = None
                           ) -> tuple[dict[str, SmiGpu], str]:
    """Match every PCI-only GPU with the vendor tool's record of the same bus id.
    Returns ({bus id: record}, description of the source). Raises StackproofError naming each
    device that cannot be matched and how to get an hwloc that sees it."""
    if smi_output is not None:
        try:
            text = open(smi_output).read()
        except OSError as exc:
            raise StackproofError(f"--smi-output {smi_output}: {exc.strerror}") from None
        vendor, records = parse_smi_output(text, smi_output)
        tables = {vendor: records}
        source = {vendor: f"{TOOLS[vendor]} output {smi_output}"}
    else:
        tables, source = {}, {}
        for vendor in sorted({g.vendor for g in pci_gpus}):
            got = run_vendor_tool(vendor)
            tables[vendor] = got
            source[vendor] = TOOLS.get(vendor, vendor)
    matched, missing = {}, []
    for g in pci_gpus:
        table = tables.get(g.vendor)
        if isinstance(table, list):
            rec = next((r for r in table if r.bus_id == g.bus_id), None)
            if rec is not None:
                matched[g.bus_id] = rec
                continue
            why = f"{source[g.vendor]} lists no GPU at {g.bus_id} (" \
                  f"{', '.join(r.bus_id for r in table) or 'none'})"
        else:
            why = table or f"no {g.vendor} vendor output given"
        missing.append(f"{g.bus_id} ({g.vendor}, PCI {g.pci_ids}): {why}")
    if missing:
        raise StackproofError(
            f"{origin}: hwloc shows GPU(s) only as PCI devices (it was built without the vendor's "
            f"library) and they could not be identified: {'; '.join(missing)}. To fix, {HWLOC_HELP}")
    used = sorted({source[g.vendor] for g in pci_gpus})
    return matched, ", ".join(used)
