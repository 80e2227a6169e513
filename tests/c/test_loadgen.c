/* The reply checks of isob loadgen (include/isobench/loadgen.h): whole,
 * partial, wrong and overlong replies, for memcached and HTTP; and the
 * open loop's schedule arithmetic. */
#include <stdint.h>
#include <string.h>

#include "isobench/loadgen.h"
#include "tap.h"

#define WANT "VALUE key_00000001 0 3\r\nabc\r\nEND\r\n"
#define OK_HTTP "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: 45\r\nConnection: keep-alive\r\n\r\n" ISOB_HTTP_DOC

static int exact(const char *buf, size_t len, size_t *used, char *why)
{
    return isob_lg_check_exact(buf, len, WANT, strlen(WANT), used, why, 200);
}

static void t_exact_reply(void)
{
    char why[200] = "";
    size_t used = 0;
    CHECK_EQ_LONG(exact(WANT, strlen(WANT), &used, why), ISOB_LG_OK);
    CHECK_EQ_LONG(used, strlen(WANT));
    /* Every prefix is incomplete, never wrong. */
    for (size_t n = 0; n < strlen(WANT); n++)
        CHECK_EQ_LONG(exact(WANT, n, &used, why), ISOB_LG_INCOMPLETE);
    /* More than one reply: the first is used, the rest left. */
    char two[256];
    snprintf(two, sizeof two, "%s%s", WANT, WANT);
    CHECK_EQ_LONG(exact(two, strlen(two), &used, why), ISOB_LG_OK);
    CHECK_EQ_LONG(used, strlen(WANT));
}

static void t_exact_wrong(void)
{
    char why[200] = "";
    size_t used = 0;
    CHECK_EQ_LONG(exact("END\r\n", 5, &used, why), ISOB_LG_BAD);  /* a miss */
    CHECK(strstr(why, "byte 0") != NULL);
    CHECK_EQ_LONG(exact("VALUE key_00000001 0 3\r\nabd", 27, &used, why), ISOB_LG_BAD);
    CHECK(strstr(why, "byte 26") != NULL);
    CHECK_EQ_LONG(exact("SERVER_ERROR out of memory\r\n", 28, &used, why), ISOB_LG_BAD);
    CHECK(strstr(why, "SERVER_ERROR") != NULL);
}

static int http(const char *buf, size_t len, size_t *used, int *ka, char *why)
{
    return isob_lg_check_http(buf, len, ISOB_HTTP_DOC, ISOB_HTTP_DOC_BYTES, used, ka, why, 200);
}

static void t_http_reply(void)
{
    char why[200] = "";
    size_t used = 0;
    int ka = 0;
    CHECK_EQ_LONG(http(OK_HTTP, strlen(OK_HTTP), &used, &ka, why), ISOB_LG_OK);
    CHECK_EQ_LONG(used, strlen(OK_HTTP));
    CHECK_EQ_LONG(ka, 1);
    for (size_t n = 0; n < strlen(OK_HTTP); n++)
        CHECK_EQ_LONG(http(OK_HTTP, n, &used, &ka, why), ISOB_LG_INCOMPLETE);
    const char *closing = "HTTP/1.1 200 OK\r\ncontent-length: 45\r\n\r\n" ISOB_HTTP_DOC;
    CHECK_EQ_LONG(http(closing, strlen(closing), &used, &ka, why), ISOB_LG_OK);
    CHECK_EQ_LONG(ka, 0);
}

static void t_http_wrong(void)
{
    char why[200] = "";
    size_t used = 0;
    int ka = 0;
    const char *cases[] = {
        "HTTP/1.0 404 Not Found\r\nContent-Length: 45\r\n\r\n" ISOB_HTTP_DOC,
        "HTTP/1.0 200 OK\r\n\r\n" ISOB_HTTP_DOC,                         /* no length */
        "HTTP/1.0 200 OK\r\nContent-Length: 44\r\n\r\n" ISOB_HTTP_DOC,   /* wrong length */
        "HTTP/1.0 200 OK\r\nContent-Length: 45\r\n\r\n<html><body>isobench: 45 bytez</body></html>\n",
        "SSH-2.0-OpenSSH\r\n",
    };
    const char *words[] = {"status", "Content-Length", "Content-Length 44", "body", "not an HTTP"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        why[0] = 0;
        CHECK_EQ_LONG(http(cases[i], strlen(cases[i]), &used, &ka, why), ISOB_LG_BAD);
        if (!strstr(why, words[i]))
            fprintf(stderr, "# case %zu: %s\n", i, why);
        CHECK(strstr(why, words[i]) != NULL);
    }
}

/* The logarithm against values known to double precision. */
static void t_ln(void)
{
    static const struct { double x, ln; } known[] = {
        {1.0, 0.0}, {2.0, 0.69314718055994531}, {0.5, -0.69314718055994531},
        {10.0, 2.30258509299404568}, {1e-9, -20.7232658369464112},
        {0.36787944117144233, -1.0}, {1.0 / 9007199254740992.0, -36.7368005696771014},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        double d = isob_lg_ln(known[i].x) - known[i].ln;
        CHECK(d < 1e-12 && d > -1e-12);
    }
}

/* Fixed gaps are the mean itself; Poisson gaps are exponential with that
 * mean: over 200,000 draws the mean within 1% (its standard error is
 * 0.22%), the share above the mean within 0.01 of e^-1 (standard error
 * 0.0011) and the standard deviation within 2% of the mean, as an
 * exponential's is. */
static void t_gaps(void)
{
    uint64_t rng = 12345;
    CHECK(isob_lg_gap(1000.0, 0, &rng) == 1000.0);
    CHECK(rng == 12345);  /* fixed gaps draw nothing */
    const int n = 200000;
    double mean = 1e6, sum = 0, sq = 0;
    int above = 0;
    for (int i = 0; i < n; i++) {
        double g = isob_lg_gap(mean, 1, &rng);
        CHECK(g >= 0);
        sum += g;
        sq += g * g;
        above += g > mean;
    }
    double m = sum / n, var = sq / n - m * m;
    CHECK(m > 0.99 * mean && m < 1.01 * mean);
    double share = (double)above / n;
    CHECK(share > 0.36787944 - 0.01 && share < 0.36787944 + 0.01);
    CHECK(var > 0.98 * 0.98 * mean * mean && var < 1.02 * 1.02 * mean * mean);
}

int main(void)
{
    TAP_CASE(t_exact_reply);
    TAP_CASE(t_exact_wrong);
    TAP_CASE(t_http_reply);
    TAP_CASE(t_http_wrong);
    TAP_CASE(t_ln);
    TAP_CASE(t_gaps);
    return tap_done();
}
