/* bw: LMbench's bandwidths (bw_pipe, bw_unix, bw_tcp, bw_mem rd/wr/cp,
 * bw_file_rd, bw_mmap_rd; McVoy & Staelin, USENIX ATC 1996, §5), written
 * here from their published definitions.  One sample is the time one pass
 * takes to move a fixed number of bytes; the section turns it into MB/s
 * (MB = 10^6 bytes).  Every pass checks that the data that arrived is the
 * data that was sent:
 *
 *   bw-pipe, bw-unix, bw-tcp  the measuring process asks a server process for
 *                 one pass (8 bytes naming it) and reads BW_IPC_BYTES back in
 *                 64 KiB chunks over a pipe, an AF_UNIX stream socket pair or
 *                 a TCP connection on 127.0.0.1; every chunk's first word is
 *                 its sequence number, the rest a fixed pattern, and the
 *                 reader sums each chunk's words: a sum other than the one
 *                 sent (pattern plus sequence number) fails the cell
 *   bw-mem rd     sums the 64-bit words of a BW_MEM_BYTES buffer: the sum
 *                 equals the closed form of the pattern it holds
 *   bw-mem wr     writes every word (word i = i + pass): after the pass the
 *                 buffer's sum equals the closed form (checked outside the
 *                 measured region)
 *   bw-mem cp     copies one buffer to another (one source word changed
 *                 before each pass): the copy's sum equals the source's
 *   bw-file-rd    pread() of a BW_FILE_BYTES file already in the page cache,
 *                 64 KiB at a time, each chunk's words summed: the file's
 *                 sum equals the closed form of what was written
 *   bw-mmap-rd    mmap() of the same file, its words summed, munmap(): the
 *                 same sum
 *
 * See docs/oslat.md for how each differs from LMbench's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oslat.h"

#define BW_CHUNK ((size_t)64 << 10)          /* LMbench's transfer unit: 64 KiB */
#define BW_WORDS (BW_CHUNK / sizeof(uint64_t))
#define BW_IPC_BYTES ((size_t)4 << 20)       /* bytes a pipe/socket pass moves */
#define BW_MEM_BYTES ((size_t)16 << 20)      /* bw-mem's buffer */
#define BW_FILE_BYTES ((size_t)16 << 20)     /* bw-file-rd's and bw-mmap-rd's file */
#define BW_TIMEOUT_S 5                       /* a stream not answered by then has timed out */
/* The pattern: word i holds i * BW_K (an odd constant, so that words differ). */
#define BW_K 0x9E3779B97F4A7C15ull

/* After a pass: one more in PASSES, and in WRONG when the sum GOT it left
 * is not WANT. */
#define BW_CHECK_PASS(GOT, WANT, WRONG, PASSES)                                          \
    do {                                                                                 \
        (WRONG) += (GOT) != (WANT);                                                      \
        (PASSES)++;                                                                      \
    } while (0)

/* The sum of words lo..hi-1 of the pattern, mod 2^64, in closed form: the
 * check does not reuse the code that is measured. */
static uint64_t bw_pattern_sum(uint64_t lo, uint64_t hi)
{
    /* sum of i for lo <= i < hi, computed so that the halving is exact. */
    uint64_t n = hi - lo, a = lo + hi - 1;
    uint64_t s = (n % 2 == 0) ? (n / 2) * a : n * (a / 2);
    return s * BW_K;
}

static void bw_fill(uint64_t *w, size_t words, uint64_t first)
{
    for (size_t i = 0; i < words; i++)
        w[i] = (first + i) * BW_K;
}

static inline __attribute__((always_inline)) uint64_t bw_sum(const uint64_t *w, size_t words)
{
    uint64_t s = 0;
    for (size_t i = 0; i < words; i++)
        s += w[i];
    return s;
}

static ssize_t bw_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0)
            return k;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

static ssize_t bw_write_full(int fd, const void *buf, size_t n)
{
    size_t put = 0;
    while (put < n) {
        ssize_t k = write(fd, (const char *)buf + put, n - put);
        if (k <= 0)
            return k;
        put += (size_t)k;
    }
    return (ssize_t)put;
}

/* ---- pipe, unix, tcp ---- */

enum bw_kind { BW_PIPE, BW_UNIX, BW_TCP };

struct bw_chan {
    int ctl;       /* the client asks for a pass here */
    int data;      /* and reads it here (the same descriptor for sockets) */
    pid_t server;
};

/* The server: for each pass asked for, BW_IPC_BYTES in chunks, each
 * chunk's word 0 its sequence number.  Sabotage: one word of each pass's
 * last chunk is changed. */
static void bw_serve(int ctl, int data, int sabotage)
{
    uint64_t *buf = aligned_alloc(64, BW_CHUNK);
    if (!buf)
        _exit(1);
    bw_fill(buf, BW_WORDS, 0);
    const size_t nch = BW_IPC_BYTES / BW_CHUNK;
    for (;;) {
        uint64_t pass;
        if (bw_read_full(ctl, &pass, sizeof pass) != (ssize_t)sizeof pass)
            _exit(0);
        for (size_t j = 0; j < nch; j++) {
            buf[0] = pass * nch + j;
            if (sabotage && j == nch - 1)
                buf[BW_WORDS - 1] ^= 1;
            if (bw_write_full(data, buf, BW_CHUNK) != (ssize_t)BW_CHUNK)
                _exit(0);
            if (sabotage && j == nch - 1)
                buf[BW_WORDS - 1] ^= 1;
        }
    }
}

static int bw_open(struct oslat *o, struct bw_chan *ch, enum bw_kind kind)
{
    int c_ctl = -1, c_data = -1, s_ctl = -1, s_data = -1, rc = 0;
    int p1[2] = {-1, -1}, p2[2] = {-1, -1};
    ch->ctl = ch->data = -1;
    ch->server = -1;
    switch (kind) {
    case BW_PIPE:
        if (pipe2(p1, O_CLOEXEC) != 0 || pipe2(p2, O_CLOEXEC) != 0)
            rc = -errno;
        c_ctl = p1[1];
        s_ctl = p1[0];
        s_data = p2[1];
        c_data = p2[0];
        break;
    case BW_UNIX:
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p1) != 0)
            rc = -errno;
        c_ctl = c_data = p1[0];
        s_ctl = s_data = p1[1];
        break;
    case BW_TCP: {
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(ls, (struct sockaddr *)&a, &al) != 0 || listen(ls, 1) != 0) {
            rc = -errno;
        } else {
            c_ctl = c_data = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (c_ctl < 0 || connect(c_ctl, (struct sockaddr *)&a, sizeof a) != 0 ||
                (s_ctl = s_data = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) < 0)
                rc = -errno;
        }
        if (ls >= 0)
            close(ls);
        break;
    }
    }
    if (rc == 0 && c_data >= 0) {
        struct timeval tv = {BW_TIMEOUT_S, 0};
        if (setsockopt(c_data, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 && kind != BW_PIPE)
            rc = -errno;
    }
    if (rc == 0) {
        ch->server = oslat_fork(o->server_cpu);
        if (ch->server < 0) {
            rc = (int)ch->server;
        } else if (ch->server == 0) {
            close(c_ctl);
            if (c_data != c_ctl)
                close(c_data);
            bw_serve(s_ctl, s_data, o->sabotage);
        }
    }
    /* The server's ends are the server's alone: its death is an end of file. */
    if (s_ctl >= 0)
        close(s_ctl);
    if (s_data >= 0 && s_data != s_ctl)
        close(s_data);
    ch->ctl = c_ctl;
    ch->data = c_data;
    return rc;
}

static void bw_close(struct bw_chan *ch)
{
    if (ch->ctl >= 0)
        close(ch->ctl);
    if (ch->data >= 0 && ch->data != ch->ctl)
        close(ch->data);
    ch->ctl = ch->data = -1;
    oslat_reap(ch->server);
}

/* One pass: ask for it, read it chunk by chunk, sum each chunk.  0, or -1
 * when a call failed or the stream ended; wrong chunks are counted. */
static inline __attribute__((always_inline)) int bw_recv(const struct bw_chan *ch, uint64_t *buf,
                                                         uint64_t pass, uint64_t base, long *wrong)
{
    const size_t nch = BW_IPC_BYTES / BW_CHUNK;
    if (write(ch->ctl, &pass, sizeof pass) != (ssize_t)sizeof pass)
        return -1;
    for (size_t j = 0; j < nch; j++) {
        if (bw_read_full(ch->data, buf, BW_CHUNK) != (ssize_t)BW_CHUNK)
            return -1;
        *wrong += bw_sum(buf, BW_WORDS) != base + pass * nch + j;
    }
    return 0;
}

static int bw_ipc(struct oslat *o, const struct oslat_prim *p)
{
    enum bw_kind kind = !strcmp(p->name, "bw-pipe") ? BW_PIPE : !strcmp(p->name, "bw-unix") ? BW_UNIX
                                                                                             : BW_TCP;
    uint64_t *buf = aligned_alloc(64, BW_CHUNK);
    if (!buf)
        return -ENOMEM;
    memset(buf, 0, BW_CHUNK);
    struct bw_chan ch;
    int rc = bw_open(o, &ch, kind);
    if (rc) {
        bw_close(&ch);
        free(buf);
        return rc;
    }
    struct oslat_cell c;
    rc = oslat_cell_open(&c, o, p, "64K chunks");
    if (rc) {
        bw_close(&ch);
        free(buf);
        return rc;
    }
    /* Word 0 of each chunk is its sequence number, so the rest sums to: */
    const uint64_t base = bw_pattern_sum(1, BW_WORDS);
    uint64_t pass = 0;
    long wrong = 0, failed = 0, passes = 0;
    int r_ = 0;
/* After a pass whose receive returned R: counted in FAILED (which stops
 * the cell C) or in PASSES. */
#define BW_POST(R, C, FAILED, PASSES)                                                    \
    do {                                                                                 \
        if ((R) != 0) {                                                                  \
            (FAILED)++;                                                                  \
            (C).stop = 1;                                                                \
        } else {                                                                         \
            (PASSES)++;                                                                  \
        }                                                                                \
    } while (0)
    OSLAT_WARM(&c, pass++, r_ = bw_recv(&ch, buf, pass, base, &wrong),
               BW_POST(r_, c, failed, passes));
    OSLAT_EACH(&c, pass++, r_ = bw_recv(&ch, buf, pass, base, &wrong),
               BW_POST(r_, c, failed, passes));
#undef BW_POST
    bw_close(&ch);
    const size_t nch = BW_IPC_BYTES / BW_CHUNK;
    oslat_param(&c, "bytes", "%zu", BW_IPC_BYTES);
    oslat_param(&c, "chunk_bytes", "%zu", BW_CHUNK);
    oslat_param(&c, "passes", "%ld", passes);
    oslat_param(&c, "chunks_checked", "%llu", (unsigned long long)passes * nch);
    oslat_param(&c, "wrong_chunks", "%ld", wrong);
    if (failed)
        oslat_fail(&c, "%ld passes failed (the server ended, a call erred or timed out)", failed);
    if (wrong)
        oslat_fail(&c, "%ld of %llu chunks arrived with a checksum other than the one sent", wrong,
                   (unsigned long long)passes * nch);
    oslat_cell_close(&c);
    free(buf);
    return 0;
}

/* ---- memory ---- */

enum bw_mem_op { BW_RD, BW_WR, BW_CP };

static inline __attribute__((always_inline)) void bw_write_words(uint64_t *w, size_t words,
                                                                 uint64_t pass)
{
    for (size_t i = 0; i < words; i++)
        w[i] = i + pass;
}

static inline __attribute__((always_inline)) void bw_copy_words(uint64_t *restrict dst,
                                                                const uint64_t *restrict src,
                                                                size_t words)
{
    for (size_t i = 0; i < words; i++)
        dst[i] = src[i];
}

static int bw_mem(struct oslat *o, const struct oslat_prim *p)
{
    static const char *const labels[] = {"rd", "wr", "cp"};
    const size_t words = BW_MEM_BYTES / sizeof(uint64_t);
    /* Broken on purpose: each pass leaves out the last word. */
    const size_t n = o->sabotage ? words - 1 : words;
    uint64_t *a = aligned_alloc(64, BW_MEM_BYTES), *b = aligned_alloc(64, BW_MEM_BYTES);
    if (!a || !b) {
        free(a);
        free(b);
        return -ENOMEM;
    }
    bw_fill(a, words, 0);
    memset(b, 0, BW_MEM_BYTES);
    const uint64_t pat = bw_pattern_sum(0, words);
    for (int op = BW_RD; op <= BW_CP; op++) {
        struct oslat_cell c;
        int rc = oslat_cell_open(&c, o, p, labels[op]);
        if (rc) {
            free(a);
            free(b);
            return rc;
        }
        long wrong = 0, passes = 0;
        uint64_t pass = 0, got = 0, src_sum = pat;
        /* sum of (i + pass) for i < words */
        const uint64_t idx = (words % 2 == 0) ? (words / 2) * (words - 1) : words * ((words - 1) / 2);
        switch (op) {
        case BW_RD:
            OSLAT_WARM(&c, (void)0, got = bw_sum(a, n), BW_CHECK_PASS(got, pat, wrong, passes));
            OSLAT_EACH(&c, (void)0, got = bw_sum(a, n), BW_CHECK_PASS(got, pat, wrong, passes));
            break;
        case BW_WR:
            OSLAT_WARM(&c, pass++, bw_write_words(b, n, pass),
                       BW_CHECK_PASS(bw_sum(b, words), idx + words * pass, wrong, passes));
            OSLAT_EACH(&c, pass++, bw_write_words(b, n, pass),
                       BW_CHECK_PASS(bw_sum(b, words), idx + words * pass, wrong, passes));
            break;
        case BW_CP:
            /* The source's last word changes before each pass, so that every
             * copy differs from the last one. */
/* Before a copy: the next pass number into PASS, added to the last of
 * the WORDS words of SRC, whose sum SUM follows. */
#define BW_CP_PRE(PASS, SRC, WORDS, SUM)                                                \
    do {                                                                                \
        (PASS)++;                                                                       \
        (SUM) -= (SRC)[(WORDS) - 1];                                                    \
        (SRC)[(WORDS) - 1] += (PASS);                                                   \
        (SUM) += (SRC)[(WORDS) - 1];                                                    \
    } while (0)
            OSLAT_WARM(&c, BW_CP_PRE(pass, a, words, src_sum), bw_copy_words(b, a, n),
                       BW_CHECK_PASS(bw_sum(b, words), src_sum, wrong, passes));
            OSLAT_EACH(&c, BW_CP_PRE(pass, a, words, src_sum), bw_copy_words(b, a, n),
                       BW_CHECK_PASS(bw_sum(b, words), src_sum, wrong, passes));
#undef BW_CP_PRE
            /* Back to the pattern for any later cell. */
            bw_fill(a, words, 0);
            break;
        }
        oslat_param(&c, "bytes", "%zu", BW_MEM_BYTES);
        oslat_param(&c, "passes", "%ld", passes);
        oslat_param(&c, "wrong_passes", "%ld", wrong);
        if (wrong)
            oslat_fail(&c, "%ld of %ld passes left a sum other than the one expected", wrong, passes);
        oslat_cell_close(&c);
    }
    free(a);
    free(b);
    return 0;
}

/* ---- file ---- */

/* The pattern file of BW_FILE_BYTES, written, then read once so that it is
 * in the page cache.  The descriptor, or -errno. */
static int bw_file(struct oslat *o, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", o->dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    unlink(path);
    uint64_t *buf = aligned_alloc(64, BW_CHUNK);
    int rc = buf ? 0 : -ENOMEM;
    for (size_t off = 0; rc == 0 && off < BW_FILE_BYTES; off += BW_CHUNK) {
        bw_fill(buf, BW_WORDS, off / sizeof(uint64_t));
        if (bw_write_full(fd, buf, BW_CHUNK) != (ssize_t)BW_CHUNK)
            rc = -EIO;
    }
    for (size_t off = 0; rc == 0 && off < BW_FILE_BYTES; off += BW_CHUNK)
        if (pread(fd, buf, BW_CHUNK, (off_t)off) != (ssize_t)BW_CHUNK)
            rc = -EIO;
    free(buf);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* One pass of pread()s; the sum of what was read, or 0 when a read fell short. */
static inline __attribute__((always_inline)) uint64_t bw_file_pass(int fd, uint64_t *buf, size_t shift)
{
    uint64_t s = 0;
    for (size_t off = 0; off < BW_FILE_BYTES; off += BW_CHUNK) {
        if (pread(fd, buf, BW_CHUNK, (off_t)(off + shift)) != (ssize_t)BW_CHUNK)
            return 0;
        s += bw_sum(buf, BW_WORDS);
    }
    return s;
}

/* One mmap(), sum, munmap(); 0 when the map failed. */
static inline __attribute__((always_inline)) uint64_t bw_map_pass(int fd, size_t skip)
{
    const uint64_t *w = mmap(NULL, BW_FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (w == MAP_FAILED)
        return 0;
    uint64_t s = bw_sum(w, BW_FILE_BYTES / sizeof(uint64_t) - skip);
    munmap((void *)w, BW_FILE_BYTES);
    return s;
}

static int bw_file_rd(struct oslat *o, const struct oslat_prim *p)
{
    const int map = !strcmp(p->name, "bw-mmap-rd");
    int fd = bw_file(o, map ? "bw-mmap-file" : "bw-read-file");
    if (fd < 0)
        return fd;
    uint64_t *buf = aligned_alloc(64, BW_CHUNK);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, map ? "map+sum+unmap" : "64K chunks");
    if (rc) {
        free(buf);
        close(fd);
        return rc;
    }
    const uint64_t want = bw_pattern_sum(0, BW_FILE_BYTES / sizeof(uint64_t));
    /* Broken on purpose: reads start one word late (read) or leave out the
     * last word (map). */
    const size_t shift = o->sabotage ? sizeof(uint64_t) : 0, skip = o->sabotage ? 1 : 0;
    uint64_t got = 0;
    long wrong = 0, passes = 0;
    if (map) {
        OSLAT_WARM(&c, (void)0, got = bw_map_pass(fd, skip), BW_CHECK_PASS(got, want, wrong, passes));
        OSLAT_EACH(&c, (void)0, got = bw_map_pass(fd, skip), BW_CHECK_PASS(got, want, wrong, passes));
    } else {
        OSLAT_WARM(&c, (void)0, got = bw_file_pass(fd, buf, shift),
                   BW_CHECK_PASS(got, want, wrong, passes));
        OSLAT_EACH(&c, (void)0, got = bw_file_pass(fd, buf, shift),
                   BW_CHECK_PASS(got, want, wrong, passes));
    }
    oslat_fs_where(&c, fd);
    oslat_param(&c, "bytes", "%zu", BW_FILE_BYTES);
    if (!map)
        oslat_param(&c, "chunk_bytes", "%zu", BW_CHUNK);
    oslat_param(&c, "passes", "%ld", passes);
    oslat_param(&c, "wrong_passes", "%ld", wrong);
    if (wrong)
        oslat_fail(&c, "%ld of %ld passes read a sum other than the file's", wrong, passes);
    oslat_cell_close(&c);
    free(buf);
    close(fd);
    return 0;
}

const struct oslat_prim oslat_bw[] = {
    {.name = "bw-pipe", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "bandwidth of a pipe between two processes, 64 KiB chunks (bw_pipe)",
     OSLAT_CALLS(SYS_read, SYS_write), .run = bw_ipc},
    {.name = "bw-unix", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "bandwidth of an AF_UNIX stream socket pair, 64 KiB chunks (bw_unix)",
     OSLAT_CALLS(SYS_read, SYS_write), .run = bw_ipc},
    {.name = "bw-tcp", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "bandwidth of a TCP connection on 127.0.0.1, 64 KiB chunks (bw_tcp)",
     OSLAT_CALLS(SYS_read, SYS_write), .run = bw_ipc},
    {.name = "bw-mem", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_NONE,
     .summary = "memory bandwidth: sum (rd), write (wr), copy (cp) a 16 MiB buffer (bw_mem)",
     .run = bw_mem},
    {.name = "bw-file-rd", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_EACH,
     .summary = "read() of a page-cache-resident 16 MiB file in 64 KiB chunks, summed (bw_file_rd)",
     OSLAT_CALLS(SYS_pread64), .run = bw_file_rd},
    {.name = "bw-mmap-rd", .family = "bw", .table = "BW", .traps = OSLAT_TRAPS_EACH,
     .summary = "mmap() of a page-cache-resident 16 MiB file, summed, munmap() (bw_mmap_rd)",
     OSLAT_CALLS(SYS_mmap, SYS_munmap), .run = bw_file_rd},
    {.name = NULL},
};
