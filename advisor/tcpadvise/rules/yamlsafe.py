"""yamlsafe parses YAML from someone else with bounded time and memory.

yaml.safe_load expands aliases (an alias bomb of a few hundred bytes grows to
gigabytes) and recurses once per nesting level (deep nesting ends in
RecursionError). load refuses aliases and bounds size and depth, raising
yaml.MarkedYAMLError like any other YAML mistake, with where it stands.
"""

import yaml
from yaml.composer import ComposerError

# MAX_BYTES: far above any rule file or policy config, far below what hurts.
MAX_BYTES = 1 << 20
MAX_DEPTH = 64


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that refuses aliases and nesting deeper than MAX_DEPTH."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ComposerError(None, None, "aliases (*name) are not accepted", mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load(text: str) -> tuple[yaml.Node | None, object]:
    """The node tree of `text` (for positions) and its data, or MarkedYAMLError."""
    if len(text) > MAX_BYTES:
        raise yaml.MarkedYAMLError(problem=f"larger than {MAX_BYTES} bytes")
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        return root, (None if root is None else loader.construct_document(root))
    finally:
        loader.dispose()
