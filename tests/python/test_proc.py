"""The child-process runner: lines as they come, time-outs, process groups."""

import os
import time
import signal
import sys
import textwrap

from isobench.measure import proc


def py(code):
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_lines_and_exit_status():
    lines = []
    ex = proc.run_lines(py("""
        import sys
        print("one"); print("two", flush=True)
        sys.stderr.write("first\\nlast words\\n")
        sys.stdout.write("no newline")
        sys.exit(3)
    """), timeout=60, on_line=lines.append)
    assert lines == ["one", "two", "no newline"]
    assert (ex.returncode, ex.timed_out, ex.signal) == (3, False, None)
    assert ex.stderr_tail() == "last words"


def test_signal_is_reported():
    ex = proc.run_lines(py("import os, signal; os.kill(os.getpid(), signal.SIGABRT)"),
                        timeout=60, on_line=lambda _: None)
    assert ex.signal == signal.SIGABRT
    assert proc.signal_name(ex.signal) == "SIGABRT"


def test_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    lines = []
    ex = proc.run_lines(py(f"""
        import os, time
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
        open({str(pidfile)!r}, "w").write(str(pid))
        print("started", flush=True)
        time.sleep(3600)
    """), timeout=5, on_line=lines.append)
    assert ex.timed_out and ex.signal is None
    assert lines == ["started"]
    grandchild = int(pidfile.read_text())
    # SIGKILL is delivered at once but the exit itself takes a moment on a
    # loaded machine: wait for it, with a bound so a survivor still fails.
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_straggler_holding_the_pipe_does_not_block(tmp_path):
    # The child exits at once; a grandchild keeps stdout open.  The runner
    # must not wait for the time-out (it would report timed_out).
    ex = proc.run_lines(py("""
        import os, time
        if os.fork() == 0:
            time.sleep(3600)
        print("done", flush=True)
    """), timeout=60, on_line=lambda _: None)
    assert (ex.returncode, ex.timed_out) == (0, False)


def test_exception_in_callback_kills_the_child():
    def boom(_):
        raise RuntimeError("store failed")
    try:
        proc.run_lines(py("import time; print('x', flush=True); time.sleep(3600)"),
                       timeout=60, on_line=boom)
    except RuntimeError as e:
        assert str(e) == "store failed"
    else:
        raise AssertionError("no exception")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting for init to reap it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_long_lines_span_many_reads():
    lines = []
    proc.run_lines(py("""
        import sys
        sys.stdout.write("a" * 1_000_000 + "\\n" + "b" * 70_000 + "\\nc\\n")
    """), timeout=60, on_line=lines.append)
    assert [len(l) for l in lines] == [1_000_000, 70_000, 1]
    assert lines[2] == "c"
