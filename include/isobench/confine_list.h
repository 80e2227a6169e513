/* Every confinement, once.  X(c_identifier) -- the table is
 * isob_confine_<c_identifier>, defined in src/confine/.  Order is the
 * listing order; none comes first, as the baseline of every other. */
X(none)
X(seccomp_allow)
X(seccomp_notify)
X(ptrace)
X(landlock)
X(userns)
