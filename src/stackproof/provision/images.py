"""`stackproof images ...`: node images and Warewulf. The work lives in two modules with one job each:
stackproof.provision.warewulf (nodes.conf from node types, expected overlay renders) and stackproof.provision.imagescan
(the secret scanner); this module is their command line and re-exports their names.
"""
from __future__ import annotations

import re

import sys
from pathlib import Path

from stackproof.provision.imagescan import Finding, scan
from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision.warewulf import (DEFAULT_PROFILE, DEFAULT_SPEC, IMAGE_MPIBIND_PLUGIN, IMAGES_DIR,
                       OVERLAY_FILES, ClusterSpec, ProfileSpec, expected_renders, kernel_args,
                       load_spec, node_line_fields, nodes_conf, nodes_conf_text, profile_tags,
                       stackproof_render, write_expected)

__all__ = ["REPO", "Finding", "scan", "DEFAULT_PROFILE", "DEFAULT_SPEC", "IMAGE_MPIBIND_PLUGIN", "IMAGES_DIR",
           "OVERLAY_FILES", "ClusterSpec", "ProfileSpec", "expected_renders", "kernel_args", "load_spec",
           "node_line_fields", "nodes_conf", "nodes_conf_text", "profile_tags", "stackproof_render",
           "write_expected", "register"]


# ---- CLI ---------------------------------------------------------------------------------------------------

def _cmd_nodes(args) -> int:
    text = nodes_conf_text(load_spec(args.spec), default_profile=not args.no_default_profile)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _cmd_expected(args) -> int:
    n = write_expected(load_spec(args.spec), Path(args.output), args.overlay)
    print(f"wrote {n} expected overlay files under {args.output}", file=sys.stderr)
    return 0


def _cmd_scan(args) -> int:
    rc = 0
    for image in args.image:
        found = scan(image)
        for f in found:
            print(f"SECRET {f}")
        if found:
            rc = 1
        else:
            print(f"ok {image}: no munge keys, SSH host keys or private keys")
    return rc


def register(sub) -> None:
    p = sub.add_parser("images", help="node images: Warewulf nodes.conf from node types, secret scan")
    isub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = isub.add_parser("warewulf-nodes", help="render nodes.conf (profiles with node-type tags)")
    q.add_argument("--spec", default=str(DEFAULT_SPEC), help="cluster description YAML")
    q.add_argument("-o", "--output", help="write here instead of stdout")
    q.add_argument("--no-default-profile", action="store_true",
                   help="leave out Warewulf's default profile (overlay test inputs)")
    q.set_defaults(func=_cmd_nodes)
    q = isub.add_parser("warewulf-expected", help="write what the slurm/corespec overlays must render per node")
    q.add_argument("--spec", default=str(DEFAULT_SPEC))
    q.add_argument("--overlay", required=True, choices=sorted(OVERLAY_FILES))
    q.add_argument("-o", "--output", required=True)
    q.set_defaults(func=_cmd_expected)
    q = isub.add_parser("scan", help="fail if an image contains munge keys, SSH host keys or private keys")
    q.add_argument("image", nargs="+", help="rootfs dir, rootfs tar(.gz), OCI archive or OCI layout dir")
    q.set_defaults(func=_cmd_scan)


def munge_id() -> int:
    """The image's fixed munge uid/gid (images/common/install-stack.sh, one place)."""
    text = (REPO / "images" / "common" / "install-stack.sh").read_text()
    m = re.search(r"^MUNGE_ID=(\d+)$", text, re.M)
    if not m:
        raise StackproofError("cannot read MUNGE_ID from images/common/install-stack.sh")
    return int(m.group(1))
