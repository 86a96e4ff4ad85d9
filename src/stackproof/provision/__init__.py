"""Provisioning: node images (Containerfiles, SIF/OCI), Warewulf (overlays, wwctl) and the virtual
cluster of network-booted QEMU nodes.

The top floor below acceptance/ and the CLI: may import nodes/, cluster/, stacks/ and the basics.
"""
