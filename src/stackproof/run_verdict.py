"""Old name of stackproof.run_outcome (whether a ReFrame run measured anything: its *run outcome*;
"verdict" is the per-metric call of the report). Kept only so that imports in files other helpers
own (reframe-tests/run.py, checks/noise/fwq.py, tests/test_gpu_partitions.py) keep working until
they import stackproof.run_outcome; then delete this file."""
from .run_outcome import injector_not_measured, is_gpu_case, problems, skip_reasons

__all__ = ["injector_not_measured", "is_gpu_case", "problems", "skip_reasons"]
