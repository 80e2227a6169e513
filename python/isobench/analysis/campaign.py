"""The campaign document: one table mechanism x host per population, each
cell a host's own ratio to its own `direct`.

A campaign's runs are the runs of the store whose origin names it
(`{"campaign": ID, "host": NAME}`, written when `isobench campaign run` or
`campaign import` imported them).  Each host's run is summarised on its own
(summary.build: headlines, intervals over repetitions, ratios to that run's
baseline), and only then are the hosts set side by side: a cell is the
ratio that host's summary holds, never a number computed across hosts.
Hosts differ in CPU, kernel, hypervisor, counter and unit, so absolute
values are shown only when asked for (`--absolute`), with a warning, and
no value is ever averaged over hosts.

A table is one population (runs.POPULATION_PARAMS: benchmark, placement,
payload, phase, primitive); its rows are mechanisms with every other
identity param (kv's data size, worksweep's k, wasm's checks: those that
differ between rows are in the row's label); its columns are hosts.  Two
configurations of one host in one cell are an error, never last-one-wins.

Document history ("campaign_version"):

    1  first version.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from .kit import runs
from . import summary
from ..errors import UsageError
from ..store import Store

CAMPAIGN_VERSION = 1

ABSOLUTE_WARNING = ("absolute values across hosts: each host has its own CPU, counter and "
                    "unit, so a column compares with another only through the ratios")


def campaign_runs(store: Store, campaign_id: str) -> list[tuple[str, int]]:
    """(host, run id) of every run of the campaign in the store, oldest first;
    a host with two runs (measured again after a clean-up) is shown with the
    newer one."""
    found: dict[str, int] = {}
    for run_id in store.run_ids():
        origin = store.run(run_id).get("origin") or {}
        if origin.get("campaign") == campaign_id and isinstance(origin.get("host"), str):
            found[origin["host"]] = max(run_id, found.get(origin["host"], 0))
    return sorted(found.items(), key=lambda hr: hr[1])


def campaign_ids(store: Store) -> list[str]:
    """Every campaign id the store holds runs of, oldest first."""
    out: list[str] = []
    for run_id in store.run_ids():
        cid = (store.run(run_id).get("origin") or {}).get("campaign")
        if isinstance(cid, str) and cid not in out:
            out.append(cid)
    return out


def _pku(env: Mapping) -> str:
    flags = set(env.get("cpu_flags") or env.get("cpu_flags_relevant") or ())
    if "pku" not in flags:
        return "no"
    return "yes" if "ospke" in flags else "no (CPU has it, kernel off)"


def _pmu(env: Mapping) -> str:
    v = env.get("pmu")
    return "unknown" if v is None else ("yes" if v else "no")


def host_header(host: str, doc: Mapping) -> dict:
    """What a reader needs to judge a host's column: CPU, kernel, hypervisor,
    PMU and PKU, and the counter its numbers were read with."""
    run = doc["run"]
    env = run.get("environment") or {}
    m = doc.get("measurement") or {}
    counters = sorted({c[0] for c in m.get("counters") or [] if c and c[0]})
    return {"host": host, "run_id": run["run_id"], "status": run.get("status"),
            "hostname": env.get("hostname"), "cpu": env.get("cpu_model"),
            "kernel": env.get("kernel"),
            "hypervisor": env.get("hypervisor") or "none (bare metal)",
            "pmu": _pmu(env), "pku": _pku(env),
            "counter": ", ".join(counters) or env.get("counter"), "unit": m.get("unit"),
            "started": run.get("started"), "failed_results": sum(
                1 for r in doc["results"] if r["status"] == "failed")}


def row_params(params: Mapping) -> dict:
    """The identity params of a configuration that its table's title does
    not hold (runs.POPULATION_PARAMS are the title): all of them key a row,
    so that configurations measured apart never share a cell (worksweep's
    k = 1, 64 and 4,096 are three rows)."""
    return {k: v for k, v in sorted(runs.identity(params).items())
            if k not in runs.POPULATION_PARAMS or v is None}


def _order(v) -> tuple:
    """Numbers before anything else, in numeric order; the rest by their text."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v, "")
    return (1, 0, json.dumps(v, sort_keys=True))


def _row_key(mechanism: str, params: Mapping, unit: str | None) -> str:
    return json.dumps([mechanism, row_params(params), unit], sort_keys=True)


def _row_label(mechanism: str, params: Mapping, alike: Mapping) -> str:
    """The mechanism and the row's params that tell it from the table's other
    rows (kv's data size, worksweep's k), not those every row has alike."""
    parts = [f"{k}={v}" for k, v in row_params(params).items()
             if k not in alike or alike[k] != v]
    return " ".join([mechanism, *parts])


def _population_label(benchmark: str, params: Mapping) -> str:
    pop = [f"{k}={params[k]}" for k in runs.POPULATION_PARAMS if params.get(k) is not None]
    return " ".join([benchmark, *pop])


def _cell(c: Mapping, absolute: bool) -> dict | None:
    """A host's number for one configuration: its ratio to its own direct,
    or (absolute) its headline value in its own unit."""
    h = c["headline"]
    if absolute:
        if h["value"] is None:
            return None
        iv = h.get("interval")
        return {"kind": "absolute", "value": h["value"], "unit": c["unit"],
                "low": iv["low"] if iv else None, "high": iv["high"] if iv else None,
                "ns": h.get("ns"), "reps": h["reps"]}
    if c["role"] == "baseline":
        return {"kind": "baseline", "value": 1.0, "low": None, "high": None,
                "reps": h["reps"]}
    r = c.get("ratio")
    if r is None:
        return None
    iv = r.get("interval")
    return {"kind": "ratio", "value": r["value"], "low": iv["low"] if iv else None,
            "high": iv["high"] if iv else None, "note": r.get("note"), "reps": h["reps"]}


def _shown(c: Mapping, absolute: bool) -> bool:
    if not c.get("headline_phase", True):
        return False  # one population per number: kv's get phase stands for kv
    if absolute:
        return c["headline"]["value"] is not None
    return c["role"] == "baseline" or c.get("ratio") is not None


def tables(docs: Sequence[tuple[str, Mapping]], absolute: bool = False) -> list[dict]:
    """One table per population, rows mechanisms with every other identity
    param (row_params), columns hosts.  Two configurations of one host
    landing in one cell is an error (UsageError), never last-one-wins."""
    out: dict[str, dict] = {}
    for host, doc in docs:
        for c in doc["configs"]:
            if not _shown(c, absolute):
                continue
            cell = _cell(c, absolute)
            if cell is None:
                continue
            title = _population_label(c["benchmark"], c["params"])
            t = out.setdefault(title, {"title": title, "benchmark": c["benchmark"],
                                       "population": {k: c["params"].get(k)
                                                      for k in runs.POPULATION_PARAMS
                                                      if c["params"].get(k) is not None},
                                       "rows": {}})
            key = _row_key(c["mechanism"], c["params"], c.get("unit"))
            row = t["rows"].setdefault(key, {"mechanism": c["mechanism"], "role": c["role"],
                                             "params": row_params(c["params"]),
                                             "unit": c.get("unit"), "cells": {},
                                             "labels": {}})
            if host in row["cells"]:
                raise UsageError(
                    f"campaign table '{title}': host {host} has two configurations for one "
                    f"cell ({row['labels'][host]!r} and {c['label']!r}); isobench cannot "
                    "tell them apart: report this run's params")
            row["cells"][host] = cell
            row["labels"][host] = c["label"]
    result = []
    for t in out.values():
        rows = list(t["rows"].values())
        first = rows[0]["params"]
        alike = {k: v for k, v in first.items() if all(
            k in r["params"] and r["params"][k] == v for r in rows)}
        units = {r["unit"] for r in rows if r["mechanism"] == rows[0]["mechanism"]}
        for r in rows:
            r["label"] = _row_label(r["mechanism"], r["params"], alike) + (
                f" [{r['unit']}]" if len(units) > 1 else "")
            del r["labels"]
        # Rows in the order of their params (kv's sizes and worksweep's k
        # ascending), the baseline last: it reads 1 everywhere and closes
        # the table.
        mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
        rows.sort(key=lambda r: (r["role"] == "baseline", mechs.index(r["mechanism"]),
                                 [(k, _order(v)) for k, v in r["params"].items()]))
        result.append({**t, "rows": rows})
    return result


def _counter_note(headers: Sequence[Mapping]) -> str | None:
    kinds = {h["counter"] for h in headers if h.get("counter")}
    if len(kinds) > 1:
        return ("the hosts measured with different counters (" + ", ".join(
            f"{h['host']}: {h['counter']}" for h in headers) + "): each column is a ratio "
            "within its own host and nothing is averaged across hosts")
    return None


def build(store: Store, campaign_id: str, state: Mapping | None = None,
          absolute: bool = False) -> dict:
    """The campaign document of campaign_id (state: the campaign's state, for
    the hosts that have no run because they failed)."""
    found = campaign_runs(store, campaign_id)
    # The inventory's order where the campaign's state is known, else the
    # order the runs were imported in.
    order = list(((state or {}).get("hosts") or {}))
    found.sort(key=lambda hr: (order.index(hr[0]) if hr[0] in order else len(order), hr[1]))
    docs = [(host, summary.build(runs.load_run(store, run_id))) for host, run_id in found]
    headers = [host_header(h, d) for h, d in docs]
    have = {h for h, _ in docs}
    missing = []
    for host, s in ((state or {}).get("hosts") or {}).items():
        if host not in have:
            missing.append({"host": host, "status": s.get("status"), "stage": s.get("stage"),
                            "reason": s.get("reason")})
    notes = []
    if absolute:
        notes.append(ABSOLUTE_WARNING)
    cn = _counter_note(headers)
    if cn:
        notes.append(cn)
    without = sum(1 for _, d in docs for c in d["configs"]
                  if c.get("headline_phase", True) and not _shown(c, absolute))
    if without and not absolute:
        notes.append(f"{without} configuration(s) without a ratio to their host's direct "
                     "(direct's own variants, benchmarks without a baseline) are not shown; "
                     "--absolute shows them in each host's own unit")
    selection = (state or {}).get("selection")
    return {"campaign_version": CAMPAIGN_VERSION, "campaign": campaign_id,
            "db": str(store.path), "absolute": absolute,
            "selection": selection, "hosts": headers, "missing": missing,
            "tables": tables(docs, absolute), "notes": notes,
            "cell": ("headline value in the host's own unit [95% interval]" if absolute else
                     "ratio to the host's own direct [95% interval over repetitions]; "
                     "baseline: direct itself"),
            "findings": {h: [f["id"] for f in d["findings"] if f["severity"] == "error"]
                         for h, d in docs}}
