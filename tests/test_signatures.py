"""The live tests' noise-signature helpers (tests/signatures.py) on synthetic traces with known sources:
the injected source is found, random co-tenant detours and a rival with the same signature at
another phase are not."""
import numpy as np

from signatures import MARGIN, SOURCE_FILL, fill, grid_fill, node_grid_fill
from stackproof import noise
from stackproof.noise.synthetic import Source, simulate_core
from stackproof.noise.trace import write

Q, N, P_US, D_US = 1400.0, 2500, 100_000.0, 2500.0
T0 = 1_764_000_000_123_456_789           # realtime ns of the first sample: the grid is 43.457 ms away


def grid_phase_us():
    return (P_US * 1e3 - T0 % int(P_US * 1e3)) / 1e3


def trace(tmp_path, cores, name="t"):
    d = np.array([simulate_core(N, Q, sources, seed=i) for i, sources in enumerate(cores)])
    ranks = [{"rank": i, "cpu": i, "t0_realtime_ns": T0} for i in range(len(cores))]
    return noise.load(write(tmp_path / f"{name}.dat", d, ranks, quantum_target_ns=int(Q * 1e3)))


# co-tenants: frequent short preemptions and some long ones (up to 4x the source's detour)
BUSY = [Source(rate_hz=200, duration_range_us=(50, 1500)), Source(rate_hz=20, duration_range_us=(2000, 10000))]


def test_the_injected_source_is_found_on_its_core_only(tmp_path):
    injected = Source(freq_hz=10, duration_us=D_US, phase_us=grid_phase_us())
    t = trace(tmp_path, [[injected] + BUSY, BUSY])
    assert grid_fill(t, 0, 100, D_US) >= SOURCE_FILL
    assert grid_fill(t, 1, 100, D_US) <= grid_fill(t, 0, 100, D_US) - MARGIN
    assert fill(t, 0, 100, D_US) >= SOURCE_FILL


def test_a_rival_with_the_same_signature_at_another_phase_is_not_counted(tmp_path):
    injected = Source(freq_hz=10, duration_us=D_US, phase_us=grid_phase_us())
    rival = Source(freq_hz=10, duration_us=D_US, phase_us=grid_phase_us() + 37_000)
    t = trace(tmp_path, [[injected] + BUSY, [rival] + BUSY])
    assert fill(t, 1, 100, D_US) >= SOURCE_FILL            # any phase: the rival looks like the source
    assert grid_fill(t, 0, 100, D_US) >= SOURCE_FILL       # at the grid phase: only the injected one
    assert grid_fill(t, 1, 100, D_US) <= grid_fill(t, 0, 100, D_US) - MARGIN


def test_a_floating_source_fills_the_node(tmp_path):
    # the same grid source, its bursts landing on core 0 or core 1 (here: alternately)
    half = [Source(freq_hz=5, duration_us=D_US, phase_us=grid_phase_us() + k * P_US) for k in (0, 1)]
    t = trace(tmp_path, [[half[0]] + BUSY, [half[1]] + BUSY])
    assert node_grid_fill(t, 100, D_US) >= SOURCE_FILL
    quiet = trace(tmp_path, [BUSY, BUSY], name="quiet")
    assert node_grid_fill(quiet, 100, D_US) <= node_grid_fill(t, 100, D_US) - MARGIN
