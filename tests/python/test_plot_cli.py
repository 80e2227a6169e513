"""`isobench plot RUN --config LABEL -o FILE`: the raw samples of one
configuration (ECDF per repetition and pooled, histogram), in the format of
FILE's suffix; bad input is one line with exit code 2 and writes nothing."""

import pytest

from conftest import assert_one_error_line
from fixture_runs import fixture, load_doc, with_repetitions

SWITCH_THREAD = "switch thread payload=0 placement=same-cpu"


@pytest.fixture
def stored(isobench):
    assert isobench("run", "switch", "-q", "-m", "direct", "-m", "thread").returncode == 0
    return isobench


@pytest.mark.parametrize("ext, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml"),
                                        ("pdf", b"%PDF-")])
def test_plot_writes_the_file_in_its_format(stored, tmp_path, ext, magic):
    out = tmp_path / f"thread.{ext}"
    p = stored("plot", "latest", "--config", SWITCH_THREAD, "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes().lstrip()[:len(magic)] == magic
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"{out}: samples of run 1, {SWITCH_THREAD} variant=")
    assert "ECDF of each repetition" in p.stdout


@pytest.mark.parametrize("config, out, needle", [
    ("switch thread", "x.svg", "matches 4 configurations of run 1; add the mechanism or "
                               "params to pick one (payload: 0|64; placement: "
                               "cross-cpu|same-cpu)"),
    ("switch nope payload=0", "x.svg", "matches no configuration of run 1 (its mechanisms: "
                                       "direct, thread;"),
    ("kv thread", "x.svg", "matches no configuration of run 1 (its benchmarks: switch;"),
    ("payload=0", "x.svg", "give the benchmark, the mechanism and params as k=v"),
    (SWITCH_THREAD, "x.gif", "name a file ending in .png, .svg or .pdf"),
    (SWITCH_THREAD, "no-such-folder/x.svg", "no folder"),
])
def test_plot_refuses_bad_input_with_one_line(stored, tmp_path, config, out, needle):
    p = stored("plot", "--config", config, "-o", str(tmp_path / out))
    assert needle in assert_one_error_line(p)
    assert not (tmp_path / out).exists()


def test_plot_needs_a_run_and_a_store(isobench, tmp_path):
    line = assert_one_error_line(isobench("plot", "--config", SWITCH_THREAD,
                                          "-o", str(tmp_path / "x.svg")))
    assert "no store" in line
    isobench("run", "switch", "-q", "-m", "direct")
    assert "no run 7" in assert_one_error_line(isobench(
        "plot", "7", "--config", SWITCH_THREAD, "-o", str(tmp_path / "x.svg")))


def test_find_config_prefers_the_exact_params(tmp_path):
    """A label with every param of one configuration picks it even where
    other configurations also match its words (a subset of their params)."""
    from isobench.analysis import summary
    from isobench.errors import UsageError
    from isobench.render.kit import plots
    doc = summary.build(load_doc(tmp_path, fixture("clean_run")))
    for c in doc["configs"]:
        assert plots.find_config(doc, plots.config_text(c)) is c
    with pytest.raises(UsageError, match="matches no configuration"):
        plots.find_config(doc, "switch mpk payload=999")


def _samples_of(tmp_path, run, benchmark, mechanism):
    from isobench.analysis import summary
    data = load_doc(tmp_path, run)
    doc = summary.build(data)
    c = next(c for c in doc["configs"] if c["benchmark"] == benchmark
             and c["mechanism"] == mechanism)
    cfg = next(x for x in data.configs if list(x.key) == list(c["key"]))
    return c, sorted(((r["repetition"], cfg.rep_samples[r["result_id"]]) for r in cfg.results),
                     key=lambda t: t[0])


def test_samples_plot_draws_every_repetition_and_the_headline(tmp_path):
    from isobench.render.kit import plots
    c, reps = _samples_of(tmp_path, with_repetitions(fixture("clean_run"), 3), "switch", "mpk")
    p = plots.samples_plot(c, reps)
    ecdf, hist = p.figure.axes
    labels = ecdf.get_legend_handles_labels()[1]
    assert [l.split(" (")[0] for l in labels[:4]] == ["repetition 1", "repetition 2",
                                                       "repetition 3", "pooled"]
    assert f"headline ({c['headline']['source']})" in labels
    # The pooled ECDF ends at 1 and counts every sample.
    pooled = ecdf.get_lines()[3]
    assert pooled.get_ydata()[-1] == 1.0
    assert labels[3] == f"pooled (n={sum(len(x) for _, x in reps):,})"
    assert sum(patch.get_height() for patch in hist.patches) > 0
    plots.pyplot().close(p.figure)


def test_samples_plot_says_when_the_headline_is_outside_the_samples(tmp_path):
    """A headline below every sample (as a batched estimate of a short region
    is, the samples carrying the region's own overhead) is said on the plot
    and in its caption."""
    from isobench.render.kit import plots
    c, reps = _samples_of(tmp_path, with_repetitions(fixture("clean_run"), 3), "switch", "mpk")
    low = {**c, "headline": {**c["headline"], "value": c["headline"]["value"] / 10,
                             "ns": None, "interval": None, "source": "batched"}}
    p = plots.samples_plot(low, reps)
    assert p.figure.axes[1].get_title(loc="left") == "headline outside the samples' p5..p95"
    assert "outside p5..p95 of its own samples: it is the batched estimate" in p.caption
    plots.pyplot().close(p.figure)
    inside = plots.samples_plot(c, reps)
    assert inside.figure.axes[1].get_title(loc="left") == "" and "outside" not in inside.caption
    plots.pyplot().close(inside.figure)


def test_samples_plot_without_samples_says_so(tmp_path):
    from isobench.render.kit import plots
    c, _ = _samples_of(tmp_path, fixture("clean_run"), "switch", "mpk")
    p = plots.samples_plot(c, [(1, [])])
    assert p.figure is None and "no stored samples" in p.note
