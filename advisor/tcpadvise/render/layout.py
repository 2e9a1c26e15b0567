"""The two layouts of a table in text: the table itself when it fits the
console, otherwise one block per row (a bold heading, then the row's cells
as indented, labelled lines), which fits any width without cutting a cell."""

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Wider than any table, to measure its natural width.
_WIDE = 10_000


def fits(console: Console, table: Table) -> bool:
    """Whether `table` fits the console without rich wrapping or cutting any cell."""
    unbounded = console.options.update_width(_WIDE)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def labelled_block(heading: str, details: list[tuple[str, str]], label_width: int) -> Text:
    """The heading, then a line `  label  value` per detail, labels padded to `label_width` so values align."""
    lines = [Text(f"  {label:<{label_width}}{value}") for label, value in details]
    return Text("\n").join([Text(heading, style="bold"), *lines])
