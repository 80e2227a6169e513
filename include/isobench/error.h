/* One error rule for the whole API: functions return 0 (or a value) on
 * success and a negative errno on failure; isob_strerror names it. */
#ifndef ISOBENCH_ERROR_H
#define ISOBENCH_ERROR_H

#include <errno.h>

const char *isob_strerror(long err);
/* The errno's name ("EPERM"), which says more in a verdict than its text;
 * "errno N" where the C library has no name for it.  Sign ignored. */
const char *isob_errno_name(long err);

#endif
