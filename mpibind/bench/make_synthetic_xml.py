#!/usr/bin/env python3
"""Write an hwloc XML of a synthetic GPU node for the benchmark and tests.

The CPU part comes from hwloc's synthetic backend (lstopo); one PCI GPU (NVML or RSMI
OS device with vendor, model and UUID) is then attached next to every NUMA domain.
Default: 2 packages x 4 NUMA x 24 cores x 2 PUs = 384 PUs, 8 NUMA, 8 GPUs.
"""
import argparse
import subprocess
import sys
import xml.etree.ElementTree as ET

VENDORS = {"nvidia": ("10de", "NVIDIA Corporation", "nvml", "NVML", "NVIDIAUUID"),
           "amd": ("1002", "AMD", "rsmi", "RSMI", "AMDUUID")}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("output")
    ap.add_argument("--synthetic", default="pack:2 numa:4 l3:1 l2:24 core:1 pu:2")
    ap.add_argument("--vendor", choices=sorted(VENDORS), default="nvidia")
    ap.add_argument("--lstopo", default="lstopo-no-graphics")
    args = ap.parse_args()
    vendor_id, vendor, prefix, subtype, uuid_key = VENDORS[args.vendor]

    xml = subprocess.run([args.lstopo, "-i", args.synthetic, "--of", "xml", "-"],
                         check=True, capture_output=True, text=True).stdout
    root = ET.fromstring(xml)
    gp = 100000
    gpu = 0
    # The parent of each NUMA node gets a host bridge with one GPU below it.
    for parent in root.iter("object"):
        if not any(c.get("type") == "NUMANode" for c in parent.findall("object")):
            continue
        bus = gpu + 1
        bridge = ET.SubElement(parent, "object", {
            "type": "Bridge", "gp_index": str(gp), "bridge_type": "0-1", "depth": "0",
            "bridge_pci": f"0000:[{bus:02x}-{bus:02x}]"})
        pci = ET.SubElement(bridge, "object", {
            "type": "PCIDev", "gp_index": str(gp + 1), "pci_busid": f"0000:{bus:02x}:00.0",
            "pci_type": f"0302 [{vendor_id}:2330] [{vendor_id}:16c1] a1",
            "pci_link_speed": "0.000000"})
        osdev = ET.SubElement(pci, "object", {
            "type": "OSDev", "gp_index": str(gp + 2), "name": f"{prefix}{gpu}",
            "subtype": subtype, "osdev_type": "1"})
        for key, value in (("GPUVendor", vendor), ("GPUModel", "Synthetic GPU"),
                           (uuid_key, f"GPU-{gpu:08x}-0000-0000-0000-000000000000")):
            ET.SubElement(osdev, "info", {"name": key, "value": value})
        gp += 3
        gpu += 1
    with open(args.output, "w") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                  '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        out.write(ET.tostring(root, encoding="unicode"))
        out.write("\n")
    print(f"{args.output}: {args.synthetic}, {gpu} {args.vendor} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
