/* What the compress tests share: an encoder with its buffers (enc), the
 * order of "which entries topk, stc and sketch send" for reference
 * selections (by_mag over g_x), and the checks of a decoder on any message (the sparse decoder agrees with the
 * dense one, and a refused message leaves the destination untouched). */
#ifndef TESTS_COMPRESS_CHECK_H
#define TESTS_COMPRESS_CHECK_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"

static uint32_t key(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}

/* The vector by_mag orders positions of. */
static const float *g_x;

/* Larger magnitude first (as the key order of cmp_select.h), then lower index. */
static int by_mag(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ki = key(g_x[i]), kj = key(g_x[j]);
    if (ki != kj)
        return ki > kj ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int by_index(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return i < j ? -1 : i > j;
}

typedef struct enc {
    cmp_spec s;
    uint8_t *buf;
    void *work;
    size_t cap;
    long len;
} enc;

static void enc_spec(enc *e, const char *spec, size_t n)
{
    char err[160];
    int rc = cmp_spec_parse(&e->s, spec, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", spec, err);
    e->cap = cmp_bound(&e->s, n);
    e->buf = malloc(e->cap);
    e->work = malloc(cmp_work_size(&e->s, n) + 1);
}

static long enc_run(enc *e, const float *x, size_t n, uint64_t seed)
{
    e->len = cmp_encode(&e->s, x, n, seed, e->work, e->buf, e->cap);
    return e->len;
}

static void enc_free(enc *e)
{
    free(e->buf);
    free(e->work);
}

/* cmp_decode_sparse against cmp_decode: the same messages refused, and the
 * same values, at ascending positions, with zeros everywhere else. */
static void sparse_agrees(const uint8_t *in, size_t len, size_t n, int rc_dense)
{
    uint32_t *idx = malloc((n + 1) * sizeof *idx);
    float *val = malloc((n + 1) * sizeof *val), *dense = malloc((n + 1) * sizeof *dense);
    long k = cmp_decode_sparse(in, len, n, idx, val, n);
    const cmp_ops *ops = len ? cmp_find_id(in[0]) : NULL;
    if (!ops || !ops->decode_sparse)
        cr_assert(k == -ENOTSUP || (k == -EBADMSG && rc_dense < 0), "not sparse: %ld", k);
    else if (rc_dense < 0)
        cr_assert_eq(k, -EBADMSG, "a message cmp_decode refuses: %ld", k);
    else {
        cr_assert_geq(k, 0, "a message cmp_decode takes: %ld", k);
        cr_assert_eq(cmp_decode(in, len, n, dense), 0);
        for (long j = 0; j < k; j++) {
            cr_assert(j == 0 || idx[j] > idx[j - 1], "positions ascending");
            cr_assert_lt(idx[j], n);
            cr_assert(dense[idx[j]] == val[j], "value at %u", idx[j]); /* (the dense decode adds to +0: -0 is +0 there) */
            dense[idx[j]] = 0.0f;
        }
        for (size_t i = 0; i < n; i++)
            cr_assert(dense[i] == 0.0f, "non-zero at %zu missing from the sparse list", i);
        if (k > 0)
            cr_assert_eq(cmp_decode_sparse(in, len, n, idx, val, (size_t)k - 1), -ENOSPC);
    }
    free(idx);
    free(val);
    free(dense);
}

/* decode_add into a copy of sentinel: 0 or -EBADMSG, dst untouched on
 * -EBADMSG, and the sparse decoder agrees. */
static int decode_checked(const uint8_t *in, size_t len, size_t n, float *dst, const float *sentinel)
{
    memcpy(dst, sentinel, n * sizeof *dst);
    int rc = cmp_decode_add(in, len, n, 0.5f, dst);
    cr_assert(rc == 0 || rc == -EBADMSG, "rc %d", rc);
    if (rc < 0)
        cr_assert_arr_eq(dst, sentinel, n * sizeof *dst, "a rejected message changed dst");
    sparse_agrees(in, len, n, rc);
    return rc;
}

#endif
