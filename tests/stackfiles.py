"""Test helpers shared by the stack and ReFrame-suite tests: site stack files written from the
shipped commodity stack, and the rows of `make reframe-compare`."""
import csv
import io

import yaml

from stackproof.paths import REPO

TEMPLATE = REPO / "reframe-tests" / "stacks" / "commodity.yaml"


def write_stack(stacks_dir, name, **changes):
    """stacks_dir/NAME.yaml: the commodity stack file renamed, with `changes` applied (a value of
    None removes the key). Returns its path."""
    data = yaml.safe_load(TEMPLATE.read_text())
    data["name"] = name
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = stacks_dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def compare_rows(text):
    """Rows of `make reframe-compare` (one CSV table per check, blank-line separated)."""
    rows = []
    for block in text.strip().split("\n\n"):
        if not block.startswith("#"):
            rows += list(csv.DictReader(io.StringIO(block)))
    return rows
