"""GPUs: discovery without NVML (sysfs, PCI ids), GPU health and CUDA-aware MPI probes.

Owns the GPU facts of a node (models, peaks in data/gpu_models.yaml).

May import: basics (errors, paths, yamlfile, cpulist).
"""
