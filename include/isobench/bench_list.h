/* Every benchmark, once.  X(c_identifier) -- the bench record is
 * isob_bench_<c_identifier>, defined in src/benches/.  Order is the
 * listing order of `isob list` and `isob list --json`.  Adding a benchmark
 * is its file, one line here, and its sources in meson.build. */
X(switch)
X(pingpong)
X(kv)
X(oslat)
X(worksweep)
X(cpuwork)
X(memops)
X(pipeio)
X(scale)
X(delegate)
X(sched)
X(lwc_switch)
X(lwc_create)
X(refmon)
X(lwc_sign)
X(inspect)
X(vmcall)
