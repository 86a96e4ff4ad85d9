"""Provisioning: node images (Containerfiles, SIF/OCI), Warewulf (overlays, wwctl) and the virtual
cluster of network-booted QEMU nodes.

May import: basics, nodes/, cluster/, stacks/. Nothing in stackproof imports it but the CLI.
"""
