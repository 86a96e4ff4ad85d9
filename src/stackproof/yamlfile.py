"""Reading the project's YAML files with one kind of error for every failure."""
from pathlib import Path

import yaml

from stackproof.errors import InputError, StackproofError


def read_yaml(path, what: str = "file"):
    """Parsed content of a YAML file. A missing file raises StackproofError naming it; text that is
    not YAML (or not UTF-8) is bad input: InputError, in one line naming the file and the position."""
    path = Path(path)
    if not path.is_file():
        raise StackproofError(f"{what} not found: {path}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: invalid YAML: not UTF-8 text (byte {exc.start})") from None
