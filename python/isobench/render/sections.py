"""How each section of the summary document (analysis/sections.py) is shown:
per section name a text block for the console, a Markdown block for
summary.md, an HTML block for index.html (the text block in <pre> when a
family gives none) and plots.  A renderer whose plots are `first` puts them
before every other plot of the report (the worksweep curves are the first
thing a reader sees).  Renderers read the section and the document only."""

from __future__ import annotations

from .kit import table as _table
from ..core import benchmarks
from dataclasses import dataclass
from typing import Callable, Mapping

Block = Callable[[Mapping, Mapping], str]  # (section, doc) -> text


@dataclass(frozen=True)
class Renderer:
    text: Block | None = None
    markdown: Block | None = None
    html: Block | None = None
    # (section, doc, width=inches) -> list of plots.Plot.  The report draws
    # every plot at a paper's double-column and single-column width
    # (plots.WIDTHS) with the shared look of plots.py (style, paper_rc,
    # time_axis); a function without a width parameter draws at its own size.
    plots: Callable[..., list] | None = None
    first: bool = False


from .families import (callkinds, inspect, lwc, lwcmonitor, lwcserve, microkernel, oslat, vmcall,
                       workloads)

# Section name -> its renderer.
RENDERERS: dict[str, Renderer] = {
    # The worksweep curves open the report: the most useful number for someone
    # choosing a mechanism is how much work a crossing needs to be affordable.
    "worksweep": Renderer(workloads.worksweep_text, workloads.worksweep_md,
                          plots=workloads.worksweep_plots, first=True),
    "cpuwork": Renderer(workloads.cpuwork_text, workloads.cpuwork_md),
    "memops": Renderer(workloads.memops_text, workloads.memops_md),
    "pipeio": Renderer(workloads.pipeio_text, workloads.pipeio_md),
    "scale": Renderer(workloads.scale_text, workloads.scale_md, plots=workloads.scale_plots),
    "lwc-create": Renderer(lwc.create_text, lwc.create_md, plots=lwc.create_plots),
    "lwc-switch": Renderer(lwc.switch_text, lwc.switch_md, plots=lwc.switch_plots),
    "refmon": Renderer(lwc.refmon_text, lwc.refmon_md, plots=lwc.refmon_plots),
    "lwc-sign": Renderer(lwc.sign_text, lwc.sign_md),
    "oslat": Renderer(text=oslat.text, markdown=oslat.markdown, plots=oslat.plots),
    "microkernel-ipc": Renderer(text=microkernel.ipc_text, markdown=microkernel.ipc_markdown),
    "microkernel-delegate": Renderer(text=microkernel.delegate_text,
                                     markdown=microkernel.delegate_markdown,
                                     plots=microkernel.delegate_plots),
    "microkernel-sched": Renderer(text=microkernel.sched_text,
                                  markdown=microkernel.sched_markdown,
                                  plots=microkernel.sched_plots),
    "lwc-serve": Renderer(text=lwcserve.text, markdown=lwcserve.markdown, plots=lwcserve.plots),
    "lwc-monitor": Renderer(text=lwcmonitor.text, markdown=lwcmonitor.markdown,
                            plots=lwcmonitor.plots),
    "lwc-tls": Renderer(text=lwcmonitor.tls_text, markdown=lwcmonitor.tls_markdown,
                        plots=lwcmonitor.tls_plots),
    "inspect": Renderer(text=inspect.text, markdown=inspect.markdown),
    "switch-call-kinds": Renderer(text=callkinds.text, markdown=callkinds.markdown),
    "vmcall": Renderer(text=vmcall.text, markdown=vmcall.markdown),
}


def each(doc: Mapping):
    for name, section in (doc.get("sections") or {}).items():
        r = RENDERERS.get(name)
        if r is not None:
            yield name, section, r


def covered(doc: Mapping) -> set[str]:
    """The benchmarks a section of this document shows in full (their
    records' full_section): when they run without mechanisms, the console's
    generic per-result table leaves them to the section's text block (their
    rows are cells, not mechanisms) and prints them with --wide only."""
    return {b for name, _, r in each(doc) if r.text for b in benchmarks.shown_in_full(name)}


def text_blocks(doc: Mapping) -> list[str]:
    return [r.text(s, doc) for _, s, r in each(doc) if r.text]


def markdown_blocks(doc: Mapping) -> list[str]:
    return [r.markdown(s, doc) for _, s, r in each(doc) if r.markdown]


def html_blocks(doc: Mapping) -> list[str]:
    out = []
    for _, s, r in each(doc):
        if r.html:
            out.append(r.html(s, doc))
        elif r.text:
            out.append(f"<pre>{_table.html_text(r.text(s, doc))}</pre>")
    return out
