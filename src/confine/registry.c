/* The one list of confinements: include/isobench/confine_list.h. */
#include <stdio.h>
#include <string.h>

#include "isobench/confine.h"

#define X(id) extern const struct isob_confinement isob_confine_##id;
#include "isobench/confine_list.h"
#undef X

const struct isob_confinement *const isob_confinements[] = {
#define X(id) &isob_confine_##id,
#include "isobench/confine_list.h"
#undef X
    NULL,
};

const struct isob_confinement *isob_confine_find(const char *name)
{
    for (const struct isob_confinement *const *c = isob_confinements; *c; c++)
        if (strcmp((*c)->name, name) == 0)
            return *c;
    return NULL;
}

int isob_confine_parse(const char *spec, const struct isob_confinement **out, int *variant,
                       char *why, size_t len)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (nlen == 0 || nlen >= sizeof name) {
        snprintf(why, len, "'%s' is not a confinement (see isob list)", spec);
        return -EINVAL;
    }
    memcpy(name, spec, nlen);
    name[nlen] = 0;
    const struct isob_confinement *c = isob_confine_find(name);
    if (!c) {
        snprintf(why, len, "unknown confinement '%s' (see isob list)", name);
        return -EINVAL;
    }
    *out = c;
    *variant = -1;
    if (!colon)
        return 0;
    for (int i = 0; c->variants[i]; i++) {
        if (strcmp(c->variants[i], colon + 1) == 0) {
            *variant = i;
            return 0;
        }
    }
    char all[128] = "";
    for (int i = 0; c->variants[i]; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "", c->variants[i]);
    snprintf(why, len, "confinement %s has no variant '%s' (%s)", name, colon + 1, all);
    return -EINVAL;
}
