"""pip installs are hash-checked (issue 28, case 7): every pin of requirements-lock.txt carries
sha256 hashes, `make venv` installs with --require-hashes, and pip in that mode refuses a lock line
without a hash and a wheel whose hash differs (a replaced wheel). Offline: a hand-made wheel."""
import base64
import hashlib
import re
import subprocess
import sys
import zipfile

import pytest

from stackproof.paths import REPO


def _requirements(text):
    """[(name==version, [hashes])] of a pip requirements file with continuation lines."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append((line.split()[0], re.findall(r"--hash=sha256:([0-9a-f]{64})", line)))
    return out


def test_every_lock_line_is_pinned_and_hashed():
    reqs = _requirements((REPO / "requirements-lock.txt").read_text())
    assert len(reqs) > 20
    for req, hashes in reqs:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+", req), req
        assert hashes, f"{req} has no --hash"


def test_make_venv_installs_with_require_hashes():
    text = (REPO / "Makefile").read_text()
    lines = [line for line in text.splitlines() if "pip install" in line and "requirements-lock.txt" in line]
    assert lines and all("--require-hashes" in line for line in lines), lines


def _wheel(tmp_path, payload=b"X = 1\n"):
    """A minimal pure-Python wheel spkdemo-1.0 (what `pip wheel` would write), and its sha256."""
    path = tmp_path / "wheels" / "spkdemo-1.0-py3-none-any.whl"
    path.parent.mkdir(exist_ok=True)
    files = {"spkdemo.py": payload,
             "spkdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: spkdemo\nVersion: 1.0\n",
             "spkdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    record += "spkdemo-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("spkdemo-1.0.dist-info/RECORD", record)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _pip_install(tmp_path, lock_text):
    lock = tmp_path / "lock.txt"
    lock.write_text(lock_text)
    return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links",
                           str(tmp_path / "wheels"), "--disable-pip-version-check", "--require-hashes",
                           "--target", str(tmp_path / "target"), "-r", str(lock)],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null"})


@pytest.fixture
def wheel(tmp_path):
    return _wheel(tmp_path)


def test_pip_accepts_the_right_hash(tmp_path, wheel):
    _, digest = wheel
    res = _pip_install(tmp_path, f"spkdemo==1.0 --hash=sha256:{digest}\n")
    assert res.returncode == 0, res.stderr
    assert "spkdemo-1.0" in res.stdout


def test_pip_refuses_a_lock_line_without_a_hash(tmp_path, wheel):
    res = _pip_install(tmp_path, "spkdemo==1.0\n")
    assert res.returncode != 0 and "Hashes are required in --require-hashes mode" in res.stderr, res.stderr


def test_pip_refuses_a_replaced_wheel(tmp_path, wheel):
    _, digest = wheel
    _wheel(tmp_path, payload=b"import os; os.system('touch pwned')\n")       # same name, other bytes
    res = _pip_install(tmp_path, f"spkdemo==1.0 --hash=sha256:{digest}\n")
    assert res.returncode != 0 and "DO NOT MATCH THE HASHES" in res.stderr, res.stderr
