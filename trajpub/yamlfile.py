"""Reading a YAML file a person wrote (release specs, gate policies) with limits: a size cap and a cap on what
it expands to, so that a "billion laughs" alias bomb is refused at once instead of expanding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trajpub.errors import ParameterError

MAX_BYTES = 1_000_000
"""A release spec or a policy is a few kilobytes; a megabyte is no hand-written file."""
MAX_NODES = 100_000
"""Values (scalars, lists, mappings) a file may stand for once its aliases (``*name``) are expanded: a spec has
dozens. Counted while the file is composed, before anything is expanded."""


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    """A key written twice in one mapping: YAML says keys are unique, and PyYAML would silently keep the last
    (a second ``dataset:`` further down would win). Refused, naming both lines. A merge key (``<<: *other``) is
    refused too: it brings in keys that are not written where they apply, a second ``dataset`` among them."""
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.tag == "tag:yaml.org,2002:merge":
            raise ParameterError("a merge key ('<<') is not allowed: write the keys out where they apply",
                                 f"line {key.start_mark.line + 1}, column {key.start_mark.column + 1}")
        if not isinstance(key, yaml.ScalarNode):
            continue
        if (key.tag, key.value) in seen:
            raise ParameterError(f"the key {key.value[:60]!r} appears twice in one mapping (first on line "
                                 f"{seen[key.tag, key.value]}); remove one",
                                 f"line {key.start_mark.line + 1}, column {key.start_mark.column + 1}")
        seen[key.tag, key.value] = key.start_mark.line + 1


class _LimitedLoader(yaml.SafeLoader):
    """The safe loader, weighing every node by the number of values it stands for, aliases expanded."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.weights: dict[int, int] = {}

    def compose_node(self, parent, index):
        node = super().compose_node(parent, index)
        if id(node) in self.weights:  # an alias: the anchored node, already weighed
            return node
        if isinstance(node, yaml.SequenceNode):
            weight = 1 + sum(self.weights[id(child)] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node)
            weight = 1 + sum(self.weights[id(k)] + self.weights[id(v)] for k, v in node.value)
        else:
            weight = 1
        if weight > MAX_NODES:
            raise ParameterError(f"the YAML stands for more than {MAX_NODES} values once its aliases are expanded; "
                                 "refused (an alias bomb?)", f"line {node.start_mark.line + 1}")
        self.weights[id(node)] = weight
        return node


def read_yaml(path: str | Path, what: str) -> Any:
    """The YAML document in ``path`` (``what``: "release spec", "gate policy" for the errors): one sentence on a
    missing, oversized, non-UTF-8 or invalid file, naming the file, line and column; never the file's text."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ParameterError(f"the {what} file does not exist", f"file {path}") from None
    except OSError as exc:
        raise ParameterError(f"the {what} file cannot be read ({exc.strerror})", f"file {path}") from None
    if len(data) > MAX_BYTES:
        raise ParameterError(f"the {what} file is larger than {MAX_BYTES} bytes", f"file {path}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"the {what} is not UTF-8 text (byte {exc.start})", f"file {path}") from None
    loader = None
    try:
        loader = _LimitedLoader(text)  # its reader refuses control characters (a NUL) at once
        return loader.get_single_data()
    except ParameterError as exc:
        raise ParameterError(exc.message, f"file {path}, {exc.where}") from None
    except RecursionError:
        raise ParameterError(f"the {what} is nested too deeply to be a hand-written file", f"file {path}") from None
    except yaml.reader.ReaderError as exc:
        raise ParameterError(f"the {what} is not YAML text: character #x{exc.character:04x} at position "
                             f"{exc.position} is not allowed", f"file {path}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"file {path}" + (f", line {mark.line + 1}, column {mark.column + 1}" if mark else "")
        problem = str(getattr(exc, "problem", None) or type(exc).__name__)[:200]
        raise ParameterError(f"the {what} is not valid YAML: {problem}", where) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value YAML's types cannot hold: a 31 February
        raise ParameterError(f"the {what} holds a value YAML cannot read ({str(exc)[:200]}); quote it to pass it "
                             "as text", f"file {path}") from None
    finally:
        if loader is not None:
            loader.dispose()
