"""The report's building blocks: a Markdown table, CSV text, a number as the tables show it, the
line that counts a table's prediction errors against the target, and a Section (what one
experiment adds to report.md: its text, the plots and CSV files it wrote).

    markdown_table(["strategy", "examples/s"], [["MWMS", "2637"]])
"""
import csv
import dataclasses
import io

from results.records.store import write_text_atomic


@dataclasses.dataclass
class Section:
    markdown: str  # starts with its "## " heading
    plots: list = dataclasses.field(default_factory=list)  # PNG paths, shown under "## Plots"
    files: list = dataclasses.field(default_factory=list)  # other paths written (CSV)
    first: bool = False  # placed before the per-setting tables (the zoo's answer, a host warning)


def experiment_section(path, name, text, draw, csv_rows, columns, first=False):
    """One experiment's Section: its text, <name>.png drawn by draw(png_path) and <name>.csv of
    csv_rows (path(file name): where a file of the results directory goes)."""
    return Section(text, plots=[draw(path(f"{name}.png"))],
                   files=[write_text_atomic(path(f"{name}.csv"), csv_text(csv_rows, columns))],
                   first=first)


def markdown_table(head, rows):
    """A GitHub Markdown table: `head` the column names, `rows` lists of cell strings."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in cells) + " |" for cells in rows]
    return "\n".join(lines)


# The bound every out-of-sample prediction of a shaped run is counted against
PREDICTION_TARGET = 0.15


def errors_line(errors, what="the shaped points"):
    """'Largest error over <what>: X% (k/n within ±T%).', T the PREDICTION_TARGET, for relative
    errors (None: not counted); None when nothing was predicted."""
    checked = [abs(e) for e in errors if e is not None]
    if not checked:
        return None
    within = sum(e <= PREDICTION_TARGET for e in checked)
    return (f"Largest error over {what}: {max(checked) * 100:.1f}% ({within}/{len(checked)} "
            f"within ±{PREDICTION_TARGET * 100:g}%).")


def csv_text(rows, columns):
    """Dict rows as CSV with these columns, in this order."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def fmt(value, digits=3):
    """A cell: '–' for nothing, floats to `digits` significant digits (whole from 1000 on)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)
