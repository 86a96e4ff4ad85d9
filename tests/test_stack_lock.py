"""pip stacks install with hashes (issue 33, item 5): every shipped pip stack has a hash lock beside
its stack file that names each pin with a sha256 (the CI check), `stack install` runs pip with
--require-hashes --no-deps -r <lock>, and, offline with a hand-made wheel and real pip: `stack lock
--wheels DIR` writes the lock, `stack install --wheels DIR` installs from it, and a wheel replaced in
that directory is refused in one line with nothing installed."""
import base64
import hashlib
import json
import os
import subprocess
import zipfile

import pytest

from conftest import stackproof_cli
from stackproof.stacks import install, piplock
from stackproof.stacks.model import StackError, load_stack, parse_stack, stack_names


def test_every_pip_stack_has_a_lock_covering_its_pins_with_hashes():
    pip_stacks = [st for st in map(load_stack, stack_names()) if st.install_pip]
    assert {"vendor", "commodity-next"} <= {st.name for st in pip_stacks}
    for st in pip_stacks:
        lock = piplock.check_lock(st, install.parse_pins(st))        # StackError names what is missing
        locked = piplock.read_lock(lock)
        assert all(len(h) == 64 for _, hashes in locked.values() for h in hashes)
        text = lock.read_text()
        assert "-c " not in text and "--index-url" not in text and "--extra-index-url" not in text


def fake_python(tmp_path):
    """Records pip's arguments; a dry run reports the lock's contents."""
    script = tmp_path / "fakepython"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls.log
for a in "$@"; do if [ "$prev" = "--report" ]; then echo '{{"install": [{{"metadata": {{"name": "spkdemo", "version": "1.0"}}}}]}}' > "$a"; fi; prev=$a; done
case " $* " in *" venv "*) mkdir -p "$3/bin"; ln -sf {script} "$3/bin/python"; touch "$3/pyvenv.cfg";; esac
case " $* " in *" list "*) echo '[{{"name": "spkdemo", "version": "1.0"}}]';; esac
exit 0
""")
    script.chmod(0o755)
    return str(script)


def demo_stack(tmp_path, pins=("spkdemo==1.0",)):
    path = tmp_path / "stacks" / "demo.yaml"
    path.parent.mkdir(exist_ok=True)
    data = {"name": "demo", "prefix": str(tmp_path / "prefix"), "install": {"pip": list(pins)},
            "compilers": {"cc": "mpicc", "cxx": "mpicxx"}, "mpi": {"family": "openmpi", "version": "x", "library": "libmpi"},
            "launcher": {"local": ["mpirun"]}, "benchmarks": {}}
    path.write_text(json.dumps(data))                   # JSON is YAML: the CLI reads the same stack
    return parse_stack(data, path, "demo")


def test_install_runs_pip_with_require_hashes_from_the_lock(tmp_path):
    st = demo_stack(tmp_path)
    (tmp_path / "stacks" / "demo.pip-lock.txt").write_text(f"spkdemo==1.0 \\\n    --hash=sha256:{'a' * 64}\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    install.install(st, python=fake_python(tmp_path), wheels=wheels)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    installs = [c for c in calls if c.split()[:2] == ["-m", "pip"] and "install" in c.split()]
    assert len(installs) == 2 and "--dry-run" in installs[0]          # resolved first, then installed
    for call in installs:
        args = call.split()
        assert {"--require-hashes", "--no-deps", "--no-index", "--only-binary=:all:"} <= set(args)
        assert args[args.index("--find-links") + 1] == str(wheels)
        assert args[args.index("-r") + 1] == str(tmp_path / "stacks" / "demo.pip-lock.txt")
        assert "spkdemo==1.0" not in args                 # only what the lock names, hashes included


@pytest.mark.parametrize("lock, message", [
    (None, "no hash lock"),
    ("spkdemo==1.0\n", "expected name==version followed by --hash=sha256"),
    (f"spkdemo==0.9 --hash=sha256:{'a' * 64}\n", "does not lock spkdemo==1.0 (it has 0.9)"),
    (f"other==1.0 --hash=sha256:{'a' * 64}\n", "does not lock spkdemo==1.0"),
])
def test_a_lock_that_misses_a_pin_or_a_hash_is_one_line(tmp_path, lock, message):
    st = demo_stack(tmp_path)
    if lock is not None:
        (tmp_path / "stacks" / "demo.pip-lock.txt").write_text(lock)
    with pytest.raises(StackError) as exc:
        install.install(st, python=fake_python(tmp_path))
    assert message in str(exc.value) and "stackproof stack lock" in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "calls.log").exists(), "pip must not run"


def make_wheel(directory, payload=b"X = 1\n"):
    """A minimal pure-Python wheel spkdemo-1.0 (what `pip wheel` would write)."""
    path = directory / "spkdemo-1.0-py3-none-any.whl"
    files = {"spkdemo.py": payload,
             "spkdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: spkdemo\nVersion: 1.0\n",
             "spkdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
                     for n, d in files.items()) + "spkdemo-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("spkdemo-1.0.dist-info/RECORD", record)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_offline_lock_and_install_from_a_wheel_directory_and_a_replaced_wheel(tmp_path, monkeypatch):
    """What an offline image build does: the wheels downloaded elsewhere, installed with the same hashes."""
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sha = make_wheel(wheels)
    st = demo_stack(tmp_path)
    assert "locked 1 distribution(s)" in install.lock(st, wheels=wheels)
    lock = tmp_path / "stacks" / "demo.pip-lock.txt"
    assert piplock.read_lock(lock) == {"spkdemo": ("1.0", (sha,))}
    # through the CLI: --wheels DIR, no index
    env = dict(os.environ, STACKPROOF_STACKS_DIR=str(tmp_path / "stacks"), PIP_NO_CACHE_DIR="1")
    proc = stackproof_cli("stack", "install", "demo", "--wheels", str(wheels), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "prefix" / install.MANIFEST).read_text())
    assert manifest["installed"] == {"spkdemo": "1.0"}
    # a wheel replaced in the directory (same name, other bytes): refused, nothing installed
    subprocess.run(["rm", "-rf", str(tmp_path / "prefix")], check=True)
    make_wheel(wheels, payload=b"import os  # not the locked wheel\n")
    proc = stackproof_cli("stack", "install", "demo", "--wheels", str(wheels), env=env, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1 and "DO NOT MATCH THE HASHES" in err[0], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "prefix").exists()


def test_missing_wheel_directory_is_one_line(tmp_path):
    proc = stackproof_cli("stack", "install", "vendor", "--wheels",
                           str(tmp_path / "nowhere"), timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().endswith("is not a directory (--wheels or $STACKPROOF_WHEELS)")
    assert len(proc.stderr.strip().splitlines()) == 1
