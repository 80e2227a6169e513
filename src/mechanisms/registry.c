/* The one list of mechanisms: include/isobench/mechanism_list.h. */
#include <stdlib.h>
#include <string.h>

#include "isobench/mechanism.h"

#define X(id) extern const struct isob_mechanism isob_mech_##id;
#include "isobench/mechanism_list.h"
#undef X

const struct isob_mechanism *const isob_mechanisms[] = {
#define X(id) &isob_mech_##id,
#include "isobench/mechanism_list.h"
#undef X
    NULL,
};

int isob_mechanism_listed(const struct isob_mechanism *m)
{
    if (!(m->props & ISOB_TEST_ONLY))
        return 1;
    const char *e = getenv("ISOBENCH_TEST_MECHANISMS");
    return e && strcmp(e, "1") == 0;
}

const struct isob_mechanism *isob_mechanism_find(const char *name)
{
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++)
        if (strcmp((*m)->name, name) == 0 && isob_mechanism_listed(*m))
            return *m;
    return NULL;
}
