/* test-crash and test-hang: mechanisms that misbehave on purpose, so that
 * the tests can prove a crash or a hang inside a compartment is contained
 * and every other result of the run is kept.  They behave like `direct`
 * until the first call that carries a payload of 64 bytes or more (in the
 * switch benchmark: after the payload-0 results), then crash or hang.
 * Listed only with ISOBENCH_TEST_MECHANISMS=1. */
#include <signal.h>
#include <unistd.h>

#include "isobench/mechanism.h"

extern const struct isob_mechanism isob_mech_direct;

/* Payload size at which the faulty mechanisms stop behaving. */
#define FAULTY_TRIGGER_BYTES 64

static int faulty_trigger(struct isob_comp *c, unsigned entry)
{
    return entry == ISOB_ENTRY_SINK && isob_mech_direct.shared(c)->len >= FAULTY_TRIGGER_BYTES;
}

static int faulty_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    return isob_mech_direct.create(spec, out);
}

static long crash_call(struct isob_comp *c, unsigned entry)
{
    if (faulty_trigger(c, entry))
        raise(SIGSEGV); /* what a buggy compartment's stray store would bring */
    return isob_mech_direct.call(c, entry);
}

static long hang_call(struct isob_comp *c, unsigned entry)
{
    if (faulty_trigger(c, entry))
        for (;;)
            pause();
    return isob_mech_direct.call(c, entry);
}

static struct isob_msg *faulty_shared(struct isob_comp *c) { return isob_mech_direct.shared(c); }
static void faulty_destroy(struct isob_comp *c) { isob_mech_direct.destroy(c); }

const struct isob_mechanism isob_mech_test_crash = {
    .name = "test-crash",
    .summary = "TEST ONLY: like direct, then a SIGSEGV on the first payload call",
    .props = ISOB_TEST_ONLY,
    .probe = isob_probe_always,
    .create = faulty_create,
    .call = crash_call,
    .shared = faulty_shared,
    .destroy = faulty_destroy,
};

const struct isob_mechanism isob_mech_test_hang = {
    .name = "test-hang",
    .summary = "TEST ONLY: like direct, then hangs forever on the first payload call",
    .props = ISOB_TEST_ONLY,
    .probe = isob_probe_always,
    .create = faulty_create,
    .call = hang_call,
    .shared = faulty_shared,
    .destroy = faulty_destroy,
};
