"""How each section of the summary document (analysis/sections.py) is shown:
per section name a text block for the console, a Markdown block for
summary.md, an HTML block for index.html (the text block in <pre> when a
family gives none) and plots.  A renderer whose plots are `first` puts them
before every other plot of the report (the worksweep curves are the first
thing a reader sees).  Renderers read the section and the document only."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, Mapping

Block = Callable[[Mapping, Mapping], str]  # (section, doc) -> text


@dataclass(frozen=True)
class Renderer:
    text: Block | None = None
    markdown: Block | None = None
    html: Block | None = None
    plots: Callable[[Mapping, Mapping], list] | None = None  # -> list of plots.Plot
    first: bool = False


# Section name -> its renderer.
RENDERERS: dict[str, Renderer] = {}


def _register() -> None:
    # The family modules import Renderer from here, so they are imported
    # once it exists.
    from . import lwcserve
    RENDERERS["lwc-serve"] = lwcserve.RENDERER


_register()


def _each(doc: Mapping):
    for name, section in (doc.get("sections") or {}).items():
        r = RENDERERS.get(name)
        if r is not None:
            yield name, section, r


def text_blocks(doc: Mapping) -> list[str]:
    return [r.text(s, doc) for _, s, r in _each(doc) if r.text]


def markdown_blocks(doc: Mapping) -> list[str]:
    return [r.markdown(s, doc) for _, s, r in _each(doc) if r.markdown]


def html_blocks(doc: Mapping) -> list[str]:
    out = []
    for _, s, r in _each(doc):
        if r.html:
            out.append(r.html(s, doc))
        elif r.text:
            out.append(f"<pre>{html.escape(r.text(s, doc))}</pre>")
    return out


def plots(doc: Mapping, first: bool) -> list:
    out = []
    for _, s, r in _each(doc):
        if r.plots and r.first == first:
            out += r.plots(s, doc)
    return out
