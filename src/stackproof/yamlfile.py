"""Reading the project's YAML files with one kind of error for every failure."""
from pathlib import Path

import yaml

from stackproof.errors import StackproofError


def read_yaml(path, what: str = "file"):
    """Parsed content of a YAML file; a missing file or bad YAML raises StackproofError naming it."""
    path = Path(path)
    if not path.is_file():
        raise StackproofError(f"{what} not found: {path}")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise StackproofError(f"{path}: invalid YAML: {exc}") from None
