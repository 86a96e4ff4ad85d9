"""ReFrame configuration of the stackproof acceptance suite.

Merges common.py with every systems/*.py (the eth-cscs/cscs-reframe-tests layout):
  reframe -C reframe-tests/config/site.py --system local -r
Systems: local (this machine), testcluster (stackproof cluster up), lassen and x86gpu (example real
sites). Partitions are built from stackproof node types (config/partitions.py).
"""
import glob
import os
import sys

from reframe.utility import import_module_from_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)     # systems/*.py import partitions.py


def _load(path):
    return import_module_from_file(path).site_configuration


def _merge(into, conf):
    for section, entries in conf.items():
        into.setdefault(section, []).extend(entries)


site_configuration = {}
_merge(site_configuration, _load(os.path.join(HERE, 'common.py')))
_systems = sorted(glob.glob(os.path.join(HERE, 'systems', '*.py')))
# `local` matches every hostname: it must come last so real sites are picked by hostname.
_systems.sort(key=lambda p: os.path.basename(p) == 'local.py')
for _path in _systems:
    _merge(site_configuration, _load(_path))
