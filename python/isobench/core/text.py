"""Plain text tables and notes, for every stage that prints.

The one text-table function (render: columns padded to their widest cell,
two apart), notes wrapped to at most WIDTH columns, and nothing that knows
a benchmark or a run: render/kit/table.py builds the tables of results on these,
and measure/ prints its own commands' tables (tune, scrape) with them."""

from __future__ import annotations

import re
import textwrap
from typing import Any, Sequence

# The widest line a default table or note may take: a terminal of 100
# columns, or a paper's listing, shows it without wrapping.
WIDTH = 100


def wrap(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A note in lines of at most width columns; continuation lines indented."""
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent=indent,
                                    break_long_words=True, break_on_hyphens=False)) or text


def render(headers: Sequence[str], rows: Sequence[Sequence[str]],
           right: frozenset[str] | set[str] = frozenset()) -> str:
    """Columns padded to their widest cell, two spaces apart."""
    return render_widths(headers, rows, right, column_widths(headers, rows))


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Each column's widest cell, its header included."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]
    return widths


def render_widths(headers: Sequence[str], rows: Sequence[Sequence[str]],
                  right: frozenset[str] | set[str] | Sequence[bool],
                  widths: Sequence[int]) -> str:
    """render() with the column widths given (a folded table's blocks share them)."""
    # right: header names, or one flag per column (a folded table's repeated
    # header names may differ in alignment).
    flags = (list(right) if isinstance(right, (list, tuple))
             else [h in right for h in headers])

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if r else c.ljust(w) for r, c, w in zip(flags, cells, widths)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


# What a terminal acts on instead of printing: C0 controls but newline and
# tab (ESC starts the sequences that retitle the window or clear the
# screen, CR overwrites a line), DEL, C1 controls (0x9b is a one-byte CSI)
# and the bidirectional marks and overrides that reorder a line.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f"
                      "\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def terminal(text: Any) -> str:
    """text as a terminal shows it literally: every control character
    written as a visible escape (ESC as \\x1b), newlines and tabs kept.  Every
    command's text output goes through it (cli/), since a run may carry
    names, host names and reasons from another machine (`isobench import`)."""
    return _CONTROL.sub(_visible, str(text))
