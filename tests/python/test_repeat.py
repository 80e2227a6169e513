"""`run --repeat N`: fresh processes, a shuffled and recorded order, the
repetition stored per result, and the store migration that added it."""

import sqlite3

from isobench import store as store_mod
from isobench.store import Store

MECHS = ("direct", "thread", "process-futex")


def switch_calls(isobench):
    return [c for c in isobench.isob_calls() if c[0] == "switch"]


def run_repeat(isobench, *extra):
    args = ["run", "switch", "--json", "-q"] + [a for m in MECHS for a in ("-m", m)]
    return isobench.json(*args, "--repeat", "3", *extra)


def test_each_repetition_is_a_fresh_process(isobench):
    doc, p = run_repeat(isobench, "--seed", "5")
    assert p.returncode == 0, p.stderr
    calls = switch_calls(isobench)
    assert len(calls) == 3 * len(MECHS)
    for rep in range(3):
        assert sorted(c[2] for c in calls[rep * 3:rep * 3 + 3]) == sorted(MECHS)
    reps = [r["repetition"] for r in doc["results"]]
    assert sorted(set(reps)) == [1, 2, 3]
    assert len(doc["results"]) == 3 * len(MECHS) * 4  # 2 placements x 2 payloads
    assert doc["options"]["repeat"] == 3 and doc["options"]["seed"] == 5
    # The jobs table records the order the jobs ran in.
    jobs = doc["jobs"]
    assert [j["seq"] for j in jobs] == list(range(1, 10))
    assert [j["mechanism"] for j in jobs] == [c[2] for c in calls]
    assert [j["repetition"] for j in jobs] == [1] * 3 + [2] * 3 + [3] * 3
    assert all(j["status"] == "done" and j["started"] <= j["finished"] for j in jobs)
    by_job = {j["job_id"]: j for j in jobs}
    for r in doc["results"]:
        job = by_job[r["job_id"]]
        assert (job["mechanism"], job["repetition"]) == (r["mechanism"], r["repetition"])
        # Each result was measured inside its job's time.
        assert job["started"] <= r["started"] <= r["finished"] <= job["finished"]


def test_order_is_seeded(isobench, tmp_path):
    run_repeat(isobench, "--seed", "5")
    first = [c[2] for c in switch_calls(isobench)]
    isobench.argv_log.unlink()
    run_repeat(isobench, "--seed", "5", "--db", str(tmp_path / "other.sqlite"))
    assert [c[2] for c in switch_calls(isobench)] == first


def test_plan_shuffles_mechanisms_per_repetition():
    from isobench.measure import runner
    from isobench.measure.driver import Benchmark, Catalog

    catalog = Catalog((), (Benchmark("switch", "", True), Benchmark("pingpong", "", False)))
    mechs = [f"m{i}" for i in range(6)]
    plan = runner.plan(catalog, ["switch", "pingpong"], mechs, repeat=4, seed=3)
    jobs = list(plan)
    assert jobs == list(runner.plan(catalog, ["switch", "pingpong"], mechs, repeat=4, seed=3))
    assert jobs == list(plan)  # iterating again gives the same jobs
    assert len(jobs) == len(plan) == 4 * (6 + 1)
    orders = [tuple(j.mechanism for j in jobs if j.repetition == r and j.mechanism)
              for r in range(1, 5)]
    assert all(sorted(o) == mechs for o in orders)
    assert len(set(orders)) > 1  # shuffled, not sorted; a different order per repetition
    # Benchmarks keep their order within a repetition; pingpong runs once per repetition.
    assert [j.benchmark for j in jobs[:7]] == ["switch"] * 6 + ["pingpong"]
    assert list(runner.plan(catalog, ["switch"], mechs, repeat=1, seed=3)) == [
        runner.Job("switch", m) for m in mechs]


def test_the_plan_is_lazy():
    from isobench.measure import runner
    from isobench.measure.driver import Benchmark, Catalog

    catalog = Catalog((), (Benchmark("switch", "", True),))
    mechs = [f"m{i}" for i in range(10)]
    plan = runner.plan(catalog, ["switch"], mechs, repeat=10**15, seed=1)
    # Counted, not listed: a list of 10**16 jobs would not fit in memory.
    assert len(plan) == 10**16
    first = next(iter(plan))
    assert first.repetition == 1 and first.repeat == 10**15


def test_a_random_seed_is_recorded(isobench):
    doc, _ = run_repeat(isobench)
    assert isinstance(doc["options"]["seed"], int)


def test_one_repetition_keeps_the_order_given(isobench):
    doc, _ = isobench.json("run", "switch", "--json", "-q", "-m", "thread", "-m", "direct")
    assert [c[2] for c in switch_calls(isobench)] == ["thread", "direct"]
    assert {r["repetition"] for r in doc["results"]} == {1}
    assert doc["options"]["repeat"] == 1


def test_text_output_shows_spread_between_repetitions(isobench):
    p = isobench("run", "switch", "-q", "-m", "direct", "--repeat", "2", "--seed", "1", "--wide")
    assert p.returncode == 0
    assert "Repetitions (fresh processes" in p.stdout
    assert "CV between" in p.stdout and "repetition values" in p.stdout
    assert p.stdout.rstrip().splitlines()[-1].startswith("results stored in")


def test_aggregates_are_stored_as_geometric_means(isobench):
    doc, _ = isobench.json("run", "switch", "--json", "-q", "-m", "direct", "-m", "thread")
    assert doc["aggregates"] is not None
    assert all(a["method"] == "geometric-mean" for a in doc["aggregates"])


def test_migration_from_version_1(tmp_path):
    db = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(store_mod.MIGRATIONS[1] + "PRAGMA user_version = 1;")
    conn.execute("INSERT INTO runs (started, argv, status, environment) "
                 "VALUES ('2024-01-01', '[]', 'ok', '{}')")
    conn.execute("INSERT INTO results (run_id, benchmark, mechanism, params, status, n, dropped)"
                 " VALUES (1, 'switch', 'direct', '{}', 'ok', 0, 0)")
    conn.commit()
    conn.close()
    with Store.open(db, create=True) as s:
        assert s.results(1)[0]["repetition"] == 1
        run = s.run(1)
        assert (run["options"], run["aggregates"]) == (None, None)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION


def test_reading_commands_upgrade_a_version_1_store(isobench, tmp_path):
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(store_mod.MIGRATIONS[1] + "PRAGMA user_version = 1;")
    conn.execute("INSERT INTO runs (started, argv, status, environment) "
                 "VALUES ('2024-01-01', '[]', 'ok', '{}')")
    conn.commit()
    conn.close()
    p = isobench("show", "--db", str(db))
    assert p.returncode == 0, p.stderr
    version = sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0]
    assert version == store_mod.SCHEMA_VERSION


def test_migration_from_version_2_keeps_batched_and_adds_its_pairs(tmp_path):
    db = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(store_mod.MIGRATIONS[1] + store_mod.MIGRATIONS[2]
                       + "PRAGMA user_version = 2;")
    conn.execute("INSERT INTO runs (started, argv, status, environment) "
                 "VALUES ('2024-01-01', '[]', 'ok', '{}')")
    conn.execute("INSERT INTO results (run_id, benchmark, mechanism, params, status, reason, n,"
                 " dropped, batched) VALUES (1, 'switch', 'direct', '{}', 'failed', 'x', 0, 0,"
                 " 9.5)")
    conn.commit()
    conn.close()
    with Store.open(db, create=True) as s:
        r = s.results(1)[0]
        # The pairs of a result stored before version 3 were never kept.
        assert (r["batched"], r["batched_reps"]) == (9.5, None)
        assert s.load_result(r["result_id"]).batched_reps == ()


def test_default_repeat_gives_an_interval_and_quick_says_fewer(isobench):
    from isobench.measure import runner
    doc, p = json_as_is(isobench, "run", "switch", "--json", "-q", "-m", "direct")
    assert p.returncode == 0, p.stderr
    assert doc["options"]["repeat"] == runner.DEFAULT_REPEAT == 5
    assert {r["repetition"] for r in doc["results"]} == set(range(1, 6))
    doc, p = json_as_is(isobench, "run", "switch", "--json", "-q", "--quick", "-m", "direct")
    assert doc["options"]["repeat"] == runner.QUICK_REPEAT == 3
    assert "--quick: 3" in isobench("run", "--help").stdout


def json_as_is(isobench, *args):
    import json
    p = isobench.as_is(*args)
    return json.loads(p.stdout), p


def test_a_benchmark_may_have_its_own_number_of_repetitions():
    from isobench.measure import runner
    from isobench.measure.driver import Benchmark, Catalog

    catalog = Catalog((), (Benchmark("switch", "", True), Benchmark("refmon", "", False)))
    assert runner.BENCHMARK_REPEAT["refmon"] == 10  # lwC's figure: 10 repetitions
    plan = runner.plan(catalog, ["switch", "refmon"], ["a", "b"], repeat=3, seed=1,
                       repeat_by_benchmark={"refmon": 10})
    jobs = list(plan)
    assert len(jobs) == len(plan) == 3 * 2 + 10
    refmon = [j for j in jobs if j.benchmark == "refmon"]
    assert [j.repetition for j in refmon] == list(range(1, 11))
    assert all(j.repeat == 10 and j.mechanism is None for j in refmon)
    switch = [j for j in jobs if j.benchmark == "switch"]
    assert sorted({j.repetition for j in switch}) == [1, 2, 3]
    assert all(j.repeat == 3 for j in switch)
    assert plan.repeat_of("refmon") == 10 and plan.repeat_of("switch") == 3
