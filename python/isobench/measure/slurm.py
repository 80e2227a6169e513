"""`isobench campaign slurm`: the same campaign as a Slurm job array.

The script written is one file with three modes:

    bash SCRIPT submit   (on a login node) one `sbatch --array=I` per node
                         type, each with that type's partition and
                         constraint, then an import job that waits for all
                         of them (--dependency=afterany);
    (no argument)        what Slurm runs as array task I: set up on the node
                         with the README's `make build` (or use a prebuilt
                         checkout), `isobench run`, and export the run to
                         SHARED/ID/exports/NODE_TYPE.json;
    import               `isobench campaign import ID SHARED/ID/exports`:
                         every export into SHARED/ID/campaign.sqlite, tagged
                         with its node type and the campaign id, so that
                         `isobench campaign show ID` and `campaign report`
                         read it as they read a campaign run through Ansible.

Why not one `#SBATCH --array=0-N` line: every task of an array shares the
job's options, partition and constraint included, so an array cannot place
its tasks on different node types.  One single-task array per node type
keeps SLURM_ARRAY_TASK_ID as the node type's index and lets each have its
own placement.  Every value is shell-quoted where it is written.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from typing import Sequence

from .campaign import NOT_COPIED, Selection

DEFAULT_TIME = "04:00:00"
IMPORT_TIME = "00:30:00"


@dataclass(frozen=True)
class NodeType:
    name: str
    partition: str
    constraint: str | None


def _array(name: str, values: Sequence[str]) -> str:
    return f"{name}=(" + " ".join(shlex.quote(v) for v in values) + ")"


def script(campaign_id: str, node_types: Sequence[NodeType], selection: Selection, *,
           shared: str, source: str, prebuilt: str | None = None,
           time_limit: str = DEFAULT_TIME, importer: Sequence[str] | None = None) -> str:
    """The sbatch script's text."""
    importer = list(importer or (sys.executable, "-m", "isobench"))
    q = shlex.quote
    excludes = " ".join(f"--exclude=./{d}" for d in NOT_COPIED)
    logs = f"{shared}/{campaign_id}/logs"
    return f"""#!/bin/bash
# isobench campaign {campaign_id} on Slurm: one array task per node type.
# Written by `isobench campaign slurm`; docs/campaigns.md explains it.
#
#   bash THIS_FILE submit   one job per node type (sbatch --array=I, with that
#                           type's partition and constraint), then an import
#                           job that runs after all of them
#   (run by Slurm)          array task I: set up, `isobench run`, export to
#                           SHARED/{campaign_id}/exports/NODE_TYPE.json
#   bash THIS_FILE import   every export into SHARED/{campaign_id}/campaign.sqlite;
#                           then `isobench campaign show {campaign_id} --db` that store
#
# Node types:
{chr(10).join(f"#   {i}  {t.name}: partition {t.partition}" + (f", constraint {t.constraint}" if t.constraint else "") for i, t in enumerate(node_types))}
#
#SBATCH --job-name=isobench-{campaign_id}
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --time={time_limit}
#SBATCH --output={logs}/%x-%A_%a.out
set -euo pipefail

CAMPAIGN={q(campaign_id)}
# Results of every node type go here: a folder every node can write.
SHARED={q(shared)}
# An isobench checkout every node can read; each task builds its own copy.
SOURCE={q(source)}
# A checkout already built for every node type (its build/isob and .venv):
# set-up is skipped.  Empty: copy SOURCE and `make build` on the node.
PREBUILT={q(prebuilt or "")}
{_array("NODE_TYPES", [t.name for t in node_types])}
{_array("PARTITIONS", [t.partition for t in node_types])}
{_array("CONSTRAINTS", [t.constraint or "" for t in node_types])}
{_array("RUN_ARGS", selection.run_args())}
# The isobench that imports the exports (the one that wrote this script).
{_array("IMPORTER", importer)}
EXPORTS="$SHARED/$CAMPAIGN/exports"

submit() {{
  mkdir -p "$EXPORTS" {q(logs)}
  local ids=() i args
  for i in "${{!NODE_TYPES[@]}}"; do
    args=(--parsable --array="$i" --partition="${{PARTITIONS[$i]}}")
    if [ -n "${{CONSTRAINTS[$i]}}" ]; then
      args+=(--constraint="${{CONSTRAINTS[$i]}}")
    fi
    ids+=("$(sbatch "${{args[@]}}" "$0" | cut -d';' -f1)")
    echo "isobench campaign $CAMPAIGN: ${{NODE_TYPES[$i]}} is job ${{ids[-1]}}"
  done
  local dep
  dep=$(IFS=:; echo "${{ids[*]}}")
  local imp
  imp=$(sbatch --parsable --job-name="isobench-$CAMPAIGN-import" --dependency="afterany:$dep" \\
    --nodes=1 --ntasks=1 --time={IMPORT_TIME} --output={q(logs)}/import-%j.out "$0" import)
  echo "isobench campaign $CAMPAIGN: the import is job $imp (after $dep)"
}}

measure() {{
  local i=${{SLURM_ARRAY_TASK_ID:?not a Slurm array task: use 'bash $0 submit'}}
  local name=${{NODE_TYPES[$i]:?no node type $i in this script}}
  # Global, so that the trap still sees it when the script exits.
  WORK="${{TMPDIR:-/tmp}}/isobench-$CAMPAIGN-$name-${{SLURM_JOB_ID:-$$}}"
  local work="$WORK" isobench
  mkdir -p "$EXPORTS" "$work"
  trap 'rm -rf "$WORK"' EXIT
  if [ -n "$PREBUILT" ]; then
    isobench="$PREBUILT/.venv/bin/isobench"
  else
    # The README's own set-up, on the node: system packages where missing,
    # the .venv, the native build (for this node's architecture).
    mkdir -p "$work/src"
    tar -C "$SOURCE" {excludes} -cf - . | tar -C "$work/src" -xf -
    make -C "$work/src" build
    isobench="$work/src/.venv/bin/isobench"
  fi
  # Exit status 1: some result failed; it is recorded in the run and exported.
  local rc=0
  "$isobench" run "${{RUN_ARGS[@]}}" --db "$work/store.sqlite" -q || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "isobench campaign $CAMPAIGN: $name: isobench run failed (exit status $rc)" >&2
    exit "$rc"
  fi
  "$isobench" export latest --format json --samples --db "$work/store.sqlite" \\
    -o "$EXPORTS/$name.json.part"
  mv -f "$EXPORTS/$name.json.part" "$EXPORTS/$name.json"
  echo "isobench campaign $CAMPAIGN: $name: exported to $EXPORTS/$name.json"
}}

collect() {{
  "${{IMPORTER[@]}}" campaign import "$CAMPAIGN" "$EXPORTS" --db "$SHARED/$CAMPAIGN/campaign.sqlite"
}}

case "${{1:-}}" in
  submit) submit ;;
  import) collect ;;
  "") measure ;;
  *) echo "usage: bash $0 [submit|import] (no argument: an array task under Slurm)" >&2; exit 2 ;;
esac
"""
