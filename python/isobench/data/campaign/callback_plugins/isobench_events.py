"""An Ansible stdout callback that prints one JSON line per task outcome on
one host, for `isobench campaign run` to read (python/isobench/measure/
campaign.py).  Only what a reader needs to say why a host failed is
written: the host, the task's name, the outcome, the message, the return
code and the last lines of stderr.  Module arguments, variables and
standard output are never written, so nothing the inventory holds (a
password, a key file) reaches the campaign's files or the store."""

from __future__ import annotations

import json
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: isobench_events
    type: stdout
    short_description: one JSON line per task outcome, for isobench campaign
    description:
        - Prints host, task, outcome, message, return code and the end of stderr.
"""

# Only the end of stderr is kept: it is for the failure reason, not a log.
STDERR_LINES = 5
TEXT_LIMIT = 2000


def _parts(result):
    """(host name, task name, result dict) of a task result, for the result
    objects of ansible-core 2.19 and of the releases before it."""
    host = getattr(result, "host", None) or getattr(result, "_host")
    task = getattr(result, "task", None) or getattr(result, "_task")
    res = getattr(result, "result", None)
    if not isinstance(res, dict):
        res = getattr(result, "_result", {}) or {}
    return host.get_name(), task.get_name(), res


def _text(value) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[-TEXT_LIMIT:]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "isobench_events"

    def _emit(self, outcome: str, result) -> None:
        host, task, res = _parts(result)
        stderr = res.get("stderr") or res.get("module_stderr") or ""
        if not isinstance(stderr, str):
            stderr = str(stderr)
        line = {"event": "task", "outcome": outcome, "host": host, "task": task,
                "msg": _text(res.get("msg")), "rc": res.get("rc"),
                "stderr": "\n".join(stderr.strip().splitlines()[-STDERR_LINES:])[-TEXT_LIMIT:]}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def v2_runner_on_ok(self, result) -> None:
        self._emit("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors: bool = False) -> None:
        self._emit("ignored" if ignore_errors else "failed", result)

    def v2_runner_on_unreachable(self, result) -> None:
        self._emit("unreachable", result)

    def v2_runner_on_skipped(self, result) -> None:
        self._emit("skipped", result)

    def v2_playbook_on_stats(self, stats) -> None:
        hosts = sorted(stats.processed.keys())
        summary = {h: stats.summarize(h) for h in hosts}
        sys.stdout.write(json.dumps({"event": "stats", "hosts": summary}) + "\n")
        sys.stdout.flush()
