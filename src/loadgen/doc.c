/* The HTTP documents of `isob serve --http --doc-bytes N` and of what
 * `isob loadgen --doc-bytes N` checks (include/isobench/loadgen.h). */
#include <stdio.h>
#include <string.h>

#include "isobench/loadgen.h"

int isob_http_doc(size_t n, char *buf)
{
    if (n < ISOB_HTTP_DOC_BYTES || n > ISOB_HTTP_DOC_MAX)
        return -1;
    static const char tail[] = "</body></html>\n";
    int h = snprintf(buf, n + 1, "<html><body>isobench: %zu bytes", n);
    if (h < 0 || (size_t)h + sizeof tail - 1 > n)
        return -1;
    size_t fill = n - (size_t)h - (sizeof tail - 1);
    /* Letters that vary along the document, so that a reply cut or shifted
     * anywhere differs from it. */
    for (size_t i = 0; i < fill; i++)
        buf[(size_t)h + i] = (char)('a' + i % 26);
    memcpy(buf + (size_t)h + fill, tail, sizeof tail);  /* with its NUL */
    return 0;
}
