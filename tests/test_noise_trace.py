"""FWQ trace format: round trip, and every kind of damage detected with a clear message."""
import numpy as np
import pytest

from stackproof import noise
from stackproof.cli import main
from stackproof.noise.trace import TRAILER_SIZE


@pytest.fixture
def good(tmp_path):
    rng = np.random.default_rng(3)
    d = 1400 + rng.exponential(5, size=(3, 500))
    path = noise.write(tmp_path / "good.dat", d, ranks=[{"rank": r, "cpu": 2 * r, "host": "n1",
                                                         "t0_ticks": 1000 * r} for r in range(3)])
    return path, d


def test_round_trip_keeps_samples_and_metadata(good):
    path, d = good
    t = noise.load(path)
    assert (t.nranks, t.nsamples) == (3, 500)
    assert np.allclose(t.durations_us(), d, atol=1e-3)  # ns ticks
    assert [r["cpu"] for r in t.ranks] == [0, 2, 4]
    # start times are the exact running sum of durations; aligned starts add the t0 offsets
    assert np.allclose(t.starts_us()[1, 1:], np.cumsum(t.durations_us()[1, :-1]))
    assert np.allclose(t.starts_aligned_us()[:, 0], [0, 1, 2])


def _damage(path, fn):
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(fn(data)))
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-1], "truncated"),
    (lambda b: b[: len(b) // 2], "truncated"),
    (lambda b: b + b"x", "trailing garbage"),
    (lambda b: b[:-TRAILER_SIZE - 40] + bytes([b[-TRAILER_SIZE - 40] ^ 0x10]) + b[-TRAILER_SIZE - 39:], "CRC"),
    (lambda b: b"XWQ" + b[3:], "magic"),
    (lambda b: b[:-TRAILER_SIZE] + b"NOT-END!" + b[-8:], "trailer"),
    (lambda b: b.replace(b"nsamples=500", b"nsamples=501"), "truncated"),
    (lambda b: b.replace(b"nranks=3", b"nranks=2"), "describes 3"),
    (lambda b: b[:40], "header"),
])
def test_damaged_files_are_rejected(good, damage, message):
    path, _ = good
    _damage(path, damage)
    with pytest.raises(noise.TraceError, match=message):
        noise.load(path)


def test_cli_reports_corrupted_file_and_fails(good, capsys):
    path, _ = good
    _damage(path, lambda b: b[:-7])
    assert main(["noise", "stats", str(path)]) == 2          # bad input
    assert "truncated" in capsys.readouterr().err


def test_cli_reports_missing_file(tmp_path, capsys):
    assert main(["noise", "stats", "--json", str(tmp_path / "nope.dat")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_write_rejects_empty_or_negative(tmp_path):
    with pytest.raises(noise.TraceError):
        noise.write(tmp_path / "x.dat", np.empty((1, 0)))
    with pytest.raises(noise.TraceError):
        noise.write(tmp_path / "x.dat", [[-1.0, 2.0]])
