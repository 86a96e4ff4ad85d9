"""`stackproof vcluster`: a virtual test cluster provisioned the Warewulf way from our own node image.

Modules, one job each:
  nodesconf  cluster description -> nodes.conf -> one resolved record per node (checked before boot)
  netboot    dnsmasq.conf (DHCP + TFTP) and the iPXE scripts, from those records
  overlays   the per-node overlays (site overlays from images/warewulf, wwinit/hostname/hosts stand-ins)
  cpio       newc archives: overlays, and an OCI image's root filesystem streamed into one
  artifacts  kernel, kmods, image, overlays and boot files under <root>/http, rebuilt when inputs change
  head       the head's network namespace, bridge, taps, dnsmasq, HTTP, munged, slurmctld; teardown
  share      directories shared with the nodes at the same path (virtiofs: virtiofsd + mount unit)
  boot       QEMU TCG nodes and their boot stages
  core       up / down / status / exec / console
  cli        the command line
"""
