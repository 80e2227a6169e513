/* Every mechanism, once.  X(c_identifier) -- the ops table is
 * isob_mech_<c_identifier>, defined in src/mechanisms/.  Order is the
 * listing order. */
X(direct)
X(ucontext)
X(uthread)
X(thread)
X(process_futex)
X(process_spin)
X(process_pipe)
X(process_socket)
X(seccomp)
X(mprotect)
X(mpk)
X(mpk_bridge)
X(wasm)
X(wasm_bounds)
X(test_crash)
X(test_hang)
