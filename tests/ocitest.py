"""OCI image archives for tests: gzipped tar layers and an OCI layout tar holding them (index ->
manifest -> layers, blobs by sha256), what `podman save --format oci-archive` writes."""
import hashlib
import io
import json
import tarfile
from pathlib import Path


def layer(members) -> bytes:
    """A gzipped tar layer from {name: bytes} (regular files) or [(name, kind, arg)]: kind `dir` (arg:
    mode), `file` (arg: bytes), `sym` or `hard` (arg: the link target)."""
    if isinstance(members, dict):
        members = [(name, "file", data) for name, data in members.items()]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind, arg in members:
            ti = tarfile.TarInfo(name)
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, arg
                tf.addfile(ti)
            elif kind == "file":
                ti.size, ti.mode = len(arg), 0o644
                tf.addfile(ti, io.BytesIO(arg))
            else:
                ti.type, ti.linkname = {"sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind], arg
                tf.addfile(ti)
    return buf.getvalue()


def oci_archive(path: Path, layers: list[bytes]) -> Path:
    """An OCI archive at `path` whose one image has these layers, lowest first."""
    blobs = {}

    def add(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest
    manifest = json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": add(x), "size": len(x)}
        for x in layers]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"digest": add(manifest)}]}).encode()
    with tarfile.open(path, "w") as tf:
        for name, data in [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)] + \
                [(f"blobs/{d.replace(':', '/')}", b) for d, b in blobs.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path
