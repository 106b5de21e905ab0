/* Properties every registered codec must have, whatever it is: bound never
 * exceeded, exact-length messages (every strict prefix is rejected), corrupt
 * input never crashes, decode_add adds alpha times decode, and messages carry
 * what they need (decoding needs only the bytes). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"

static const char *const specs[] = {"none",      "fp16",     "bf16",        "topk:0.01",   "topk:0.3:sampled",
                                    "randk:0.1", "qsgd:4",   "qsgd:255",    "terngrad",    "natural",
                                    "sign",      "stc:0.01", "sketch:0.01", "sketch:0.5:1", "sparseloco:4:16", "sparseloco:64",
                                    "sparseloco:1:1", "sparseloco:7:7", "sparseloco:4:16:whole", "sparseloco:3:8:stat"};
#define N_SPECS (sizeof specs / sizeof *specs)

static float *random_vector(size_t n, unsigned seed)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    srand(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * (i % 17 == 0 ? 100.0f : 1.0f);
    return x;
}

typedef struct encoded {
    cmp_spec spec;
    uint8_t *msg;
    long len;
    size_t bound;
} encoded;

static void encode(encoded *e, const char *text, const float *x, size_t n)
{
    char err[128];
    cr_assert_eq(cmp_spec_parse(&e->spec, text, err, sizeof err), 0, "%s: %s", text, err);
    e->bound = cmp_bound(&e->spec, n);
    e->msg = malloc(e->bound);
    void *work = malloc(cmp_work_size(&e->spec, n) + 1);
    e->len = cmp_encode(&e->spec, x, n, 12345, work, e->msg, e->bound);
    free(work);
    cr_assert_geq(e->len, 2, "%s n=%zu: encode failed (%ld)", text, n, e->len);
    cr_assert_leq((size_t)e->len, e->bound, "%s n=%zu: %ld bytes > bound %zu", text, n, e->len, e->bound);
}

Test(compress_all, bound_holds_and_round_trip_decodes)
{
    const size_t sizes[] = {0, 1, 7, 4096, 1000000};
    for (size_t s = 0; s < N_SPECS; s++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t n = sizes[k];
            float *x = random_vector(n, (unsigned)(s * 31 + k)), *y = malloc((n ? n : 1) * sizeof *y);
            encoded e;
            encode(&e, specs[s], x, n);
            cr_assert_eq(cmp_decode(e.msg, (size_t)e.len, n, y), 0, "%s n=%zu", specs[s], n);
            for (size_t i = 0; i < n; i++)
                cr_assert(isfinite(y[i]), "%s n=%zu: value %zu not finite", specs[s], n, i);
            cr_assert_eq(cmp_decode(e.msg, (size_t)e.len, n + 1, y), -EBADMSG, "%s: n is checked", specs[s]);
            free(e.msg), free(x), free(y);
        }
}

Test(compress_all, every_strict_prefix_is_rejected)
{
    const size_t n = 300;
    float *x = random_vector(n, 7), *y = malloc(n * sizeof *y);
    for (size_t s = 0; s < N_SPECS; s++) {
        encoded e;
        encode(&e, specs[s], x, n);
        for (long cut = 0; cut < e.len; cut++) {
            uint8_t *copy = malloc((size_t)cut + 1); /* exact size: ASan catches any overread */
            memcpy(copy, e.msg, (size_t)cut);
            cr_assert_eq(cmp_decode(copy, (size_t)cut, n, y), -EBADMSG, "%s: %ld of %ld bytes accepted", specs[s],
                         cut, e.len);
            free(copy);
        }
        free(e.msg);
    }
    free(x), free(y);
}

Test(compress_all, corrupt_bytes_never_crash)
{
    const size_t n = 500;
    float *x = random_vector(n, 9), *y = malloc(n * sizeof *y);
    srand(4);
    for (size_t s = 0; s < N_SPECS; s++) {
        encoded e;
        encode(&e, specs[s], x, n);
        int rejected = 0;
        for (int trial = 0; trial < 2000; trial++) {
            uint8_t *copy = malloc((size_t)e.len);
            memcpy(copy, e.msg, (size_t)e.len);
            for (int f = 0; f < 1 + trial % 4; f++)
                copy[rand() % e.len] ^= (uint8_t)(1u << (rand() % 8));
            int rc = cmp_decode(copy, (size_t)e.len, n, y);
            cr_assert(rc == 0 || rc == -EBADMSG, "%s: decode returned %d", specs[s], rc);
            rejected += rc == -EBADMSG;
            free(copy);
        }
        cr_assert_gt(rejected, 0, "%s: not one corruption detected in 2000", specs[s]);
        free(e.msg);
    }
    free(x), free(y);
}

Test(compress_all, decode_add_adds_alpha_times_decode)
{
    const size_t n = 1000;
    float *x = random_vector(n, 11), *base = random_vector(n, 12);
    float *y = malloc(n * sizeof *y), *d = malloc(n * sizeof *d);
    for (size_t s = 0; s < N_SPECS; s++) {
        encoded e;
        encode(&e, specs[s], x, n);
        cr_assert_eq(cmp_decode(e.msg, (size_t)e.len, n, d), 0);
        memcpy(y, base, n * sizeof *y);
        cr_assert_eq(cmp_decode_add(e.msg, (size_t)e.len, n, -0.5f, y), 0);
        for (size_t i = 0; i < n; i++)
            cr_assert_float_eq(y[i], base[i] + -0.5f * d[i], 1e-5f * (1 + fabsf(base[i]) + fabsf(d[i])), "%s [%zu]",
                               specs[s], i);
        free(e.msg);
    }
    free(x), free(base), free(y), free(d);
}

Test(compress_all, unknown_codec_and_bad_header_are_rejected)
{
    cmp_spec s;
    char err[256];
    cr_assert_eq(cmp_spec_parse(&s, "zstd", err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "zstd") && strstr(err, "topk"), "the message lists the codecs: %s", err);
    uint8_t bad_id[] = {0xee, 0x01, 0x00, 0x00, 0x80, 0x3f};
    float y[1];
    cr_assert_eq(cmp_decode(bad_id, sizeof bad_id, 1, y), -EBADMSG);
    uint8_t overlong_n[] = {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    cr_assert_eq(cmp_decode(overlong_n, sizeof overlong_n, 1, y), -EBADMSG);
}
