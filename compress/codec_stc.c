/* stc:FRACTION — Sparse Ternary Compression (Sattler et al., "Robust and
 * Communication-Efficient Federated Learning from Non-IID Data", 2019): the
 * exact top k = max(1, round(FRACTION n)) by magnitude, each sent as +mu or
 * -mu where mu is the mean magnitude of those k.
 *
 * Payload (compress/FORMAT.md, "stc"):
 *
 *   varint k | u8 b | f32 mu | k x (Rice(b) position gap, 1 sign bit), zero-padded to a byte
 *
 * The paper codes the gaps with Golomb parameter b* = 1 + floor(log2(log(phi - 1)
 * / log(1 - p))), p = k/n, the optimum for geometric gaps. Real top-k gaps
 * are not geometric (large gradients cluster by layer), so the encoder
 * instead takes the b that minimises the stream for the actual gaps
 * (cmp_select_rice, optimal over all b), so it is never longer than b*.
 * The sign rides right after its gap so the decoder makes one pass.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_select.h"

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

static int stc_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    if (args && strchr(args, ':')) {
        snprintf(err, errlen, "stc: unexpected option after FRACTION in 'stc:%s', usage: stc:FRACTION", args);
        return -EINVAL;
    }
    return cmp_select_fraction_parse("stc", args, &s->fraction, err, errlen);
}

static size_t stc_bound(const cmp_spec *s, size_t n)
{
    size_t k = cmp_select_k(s->fraction, n);
    return varint_len(k) + 1 + 4 + (size_t)((cmp_select_rice_bits_max(n, k) + k + 7) / 8);
}

/* The selection's workspace and what it chose (cmp_select_chosen_work):
 * the mean, the signs and cmp_encoded_sparse read the chosen values. */
static size_t stc_work(const cmp_spec *s, size_t n)
{
    return cmp_select_chosen_work(n, cmp_select_k(s->fraction, n));
}

/* The mean magnitude of the selected values. In double: k f32 magnitudes
 * cannot overflow it or lose the small ones, and a finite sum of floats has
 * a finite mean. */
static float stc_mu(const float *val, size_t k)
{
    double sum = 0;
    for (size_t j = 0; j < k; j++)
        sum += fabsf(val[j]);
    return (float)(sum / (double)k);
}

/* The message for the k selected positions idx (ascending) with their
 * values val. */
static long stc_write(const uint32_t *idx, const float *val, size_t k, size_t n, uint8_t *out, size_t cap)
{
    const size_t h = varint_len(k) + 1 + 4;
    float mu = stc_mu(val, k);
    /* Any NaN or inf in x is among the top k (they rank highest) and makes
     * the mean non-finite. */
    if (!isfinite(mu))
        return -EINVAL;

    uint64_t bits;
    int b = cmp_select_rice(idx, k, n, &bits);
    size_t vl = cmp_varint_put(out, k);
    out[vl] = (uint8_t)b;
    cmp_f32_put(out + vl + 1, mu);

    cmp_bitw w;
    cmp_bitw_init(&w, out + h, cap - h);
    uint32_t next = 0;
    for (size_t j = 0; j < k; j++) {
        uint32_t u;
        memcpy(&u, val + j, sizeof u);
        cmp_bitw_rice_then(&w, idx[j] - next, b, u >> 31, 1);
        next = idx[j] + 1;
    }
    long len = cmp_bitw_finish(&w);
    return len < 0 ? len : (long)h + len;
}

/* The message of x, or (x NULL) of the candidate list c. */
static long stc_select(const cmp_spec *s, const float *x, const cmp_list *c, size_t n, uint64_t seed, void *work,
                       uint8_t *out, size_t cap)
{
    size_t k = cmp_select_k(s->fraction, n);
    if (cap < varint_len(k) + 1 + 4)
        return -ENOSPC;
    if (k == 0) { /* n == 0: no selection, and work may be NULL */
        memset(out, 0, 6); /* k = 0, b = 0, mu = +0 */
        return 6;
    }
    /* The sampled threshold selects the same set as the exact search (a
     * pure function of x and k), in one collecting pass instead of two. */
    int rc = cmp_select_chosen(x, c, n, k, seed, 1, work);
    return rc < 0 ? rc : stc_write(cmp_chosen_idx(work, n), cmp_chosen_val(work, n, k), k, n, out, cap);
}

static long stc_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                       size_t cap)
{
    return stc_select(s, x, NULL, n, seed, work, out, cap);
}

static long stc_encode_list(const cmp_spec *s, const cmp_list *c, size_t n, void *work, uint8_t *out, size_t cap)
{
    return stc_select(s, NULL, c, n, 0, work, out, cap);
}

/* The header: k, Rice parameter b, mu; *h is where the positions start. */
static int stc_header(const uint8_t *in, size_t len, size_t n, uint64_t *k, int *b, float *mu, size_t *h)
{
    size_t used;
    if (cmp_varint_get(in, len, &used, k) < 0 || *k > n || len - used < 5 || in[used] > 31)
        return -EBADMSG;
    *b = in[used];
    *mu = cmp_f32_get(in + used + 1);
    /* mu is a mean magnitude: finite and +0 or above, so a message has one form. */
    if (!isfinite(*mu) || signbit(*mu))
        return -EBADMSG;
    *h = used + 5;
    return 0;
}

static int stc_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    uint64_t k;
    int b;
    float mu;
    size_t h;
    /* Validate the whole message first so a bad one leaves dst untouched. */
    if (stc_header(in, len, n, &k, &b, &mu, &h) < 0 || cmp_select_pos_read(in + h, len - h, k, b, 1, n, NULL) < 0)
        return -EBADMSG;
    float v[2] = {alpha * mu, -(alpha * mu)};
    cmp_bitr r;
    cmp_bitr_init(&r, in + h, len - h);
    uint64_t next = 0, g, sign;
    for (size_t j = 0; j < k; j++) {
        if (cmp_bitr_rice(&r, b, &g) < 0 || g >= n - next || cmp_bitr_bits(&r, 1, &sign) < 0)
            return -EBADMSG;
        next += g;
        dst[next] += v[sign];
        next++;
    }
    return 0;
}

static long stc_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap)
{
    uint64_t k;
    int b;
    float mu;
    size_t h;
    if (stc_header(in, len, n, &k, &b, &mu, &h) < 0)
        return -EBADMSG;
    if (k > cap)
        return -ENOSPC;
    if (cmp_select_pos_read(in + h, len - h, k, b, 1, n, idx) < 0)
        return -EBADMSG;
    for (size_t j = 0; j < k; j++) {
        val[j] = idx[j] >> 31 ? -mu : mu;
        idx[j] &= 0x7fffffffu;
    }
    return (long)k;
}

static long stc_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx,
                               float *val, size_t cap)
{
    size_t k = cmp_select_k(s->fraction, n);
    if (k > cap)
        return -ENOSPC;
    if (k == 0)
        return 0;
    (void)x;
    const uint32_t *sel = cmp_chosen_idx(work, n);
    const float *sv = cmp_chosen_val(work, n, k);
    const float mu = stc_mu(sv, k);
    for (size_t j = 0; j < k; j++) {
        idx[j] = sel[j];
        val[j] = signbit(sv[j]) ? -mu : mu;
    }
    return (long)k;
}

const cmp_ops cmp_stc = {
    .name = "stc",
    .id = 9,
    .usage = "stc:FRACTION  sparse ternary: the max(1, round(FRACTION*n)) largest magnitudes as +-mean "
             "magnitude, Rice-coded positions + 1 sign bit each",
    .parse = stc_parse,
    .bound = stc_bound,
    .work = stc_work,
    .encode = stc_encode,
    .decode_add = stc_decode_add,
    .decode_sparse = stc_decode_sparse,
    .encoded_sparse = stc_encoded_sparse,
    .encode_list = stc_encode_list,
};
