/* Every mechanism, once.  X(c_identifier) -- the ops table is
 * isob_mech_<c_identifier>, defined in src/mechanisms/.  Order is the
 * listing order. */
X(direct)
X(ucontext)
X(thread)
X(process_futex)
X(test_crash)
X(test_hang)
