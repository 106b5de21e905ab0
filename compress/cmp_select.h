/* Exact top-k selection by magnitude and the position coding shared by the
 * sparse codecs (topk, stc).
 *
 *   size_t k = cmp_select_k(0.001, n);                 // max(1, round(0.001 n)); 0 when n == 0
 *   void *work = malloc(cmp_select_work(n));           // once, at init
 *   uint32_t *idx = malloc(k * sizeof *idx);
 *   cmp_select_topk(x, n, k, work, idx);               // idx[0] < idx[1] < ... < idx[k-1]
 *
 * "The k largest" is defined on |x| as the float's bit pattern with the sign
 * cleared, so the order is total: +0 == -0, inf ranks above every finite value
 * and NaN above inf. Ties at the threshold go to the lowest indices, so the
 * selected set is a pure function of (x, k): the sampled (DGC-style) variant
 * returns exactly the same indices as the exact one, only faster or slower.
 *
 * Both run in O(n) with no allocation: a radix select on the magnitude bits
 * (a 12-bit histogram pass, then the candidates in the threshold bucket are
 * refined in the workspace), never a sort.
 */
#ifndef COMPRESS_CMP_SELECT_H
#define COMPRESS_CMP_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "compress/cmp.h"

/* k = max(1, floor(fraction * n + 0.5)) for n >= 1 (round half up), capped at n; 0 for n == 0. */
size_t cmp_select_k(double fraction, size_t n);

/* Parses FRACTION, 0 < FRACTION <= 1, for the codec called `name`; a one-line message in err on -EINVAL. */
int cmp_select_fraction_parse(const char *name, const char *text, double *fraction, char *err, size_t errlen);

/* Workspace bytes for selecting from n values (any k <= n). */
size_t cmp_select_work(size_t n);

/* The k largest magnitudes of x[0..n), their indices ascending in idx_out[0..k).
 * 0, or -EINVAL if k > n or n >= 2^32. */
int cmp_select_topk(const float *x, size_t n, size_t k, void *work, uint32_t *idx_out);

/* The same result, with the threshold first estimated from a seeded sample
 * (Deep Gradient Compression, Lin et al. 2018): one pass collects everything
 * at or above the estimate and the exact selection runs on those candidates.
 * If the estimate was too high (fewer than k candidates) or too low (more than
 * fit in the workspace) it falls back to cmp_select_topk.
 *
 * For n >= 65536 and k < n (else it is cmp_select_topk) the sample is
 * stratified: m = max(n / 128, 8192) values, the j-th at
 * j s + floor(s cmp_rng_at(seed, j) / 2^64) with s = floor(n / m); the estimate
 * is the r-th largest of them, r = ceil(mu + 4 sqrt(mu) + 16), mu = k m / n
 * (the sample count expected above the true threshold, plus four standard
 * deviations), so that it undershoots the threshold all but always. */
int cmp_select_topk_sampled(const float *x, size_t n, size_t k, uint64_t seed, void *work, uint32_t *idx_out);

/* The same selection for a caller that computes x as it streams it and
 * never stores it (gossip's z - r): it evaluates a seeded sample, gets a
 * threshold key from it, and in one pass collects every value whose key
 * reaches the threshold into the workspace's candidate list (cmp_list,
 * compress/cmp.h); the top k of that list are the top k of x whenever it
 * holds at least k.
 *
 *   cmp_list c;
 *   if (cmp_select_stream(n, k, seed, work, &c) == 0) {    // -ENOTSUP: sampling does not pay, select from x
 *       for (size_t j = 0; j < c.m; j++)
 *           c.key[j] = cmp_list_bits(x[c.pos[j]]);          // the sample, positions ascending
 *       uint32_t t;
 *       cmp_select_stream_threshold(&c, n, k, work, &t);     // c.m = 0, ready to collect
 *       for (size_t i = 0; i < n; i++) {
 *           float x_i = value_at(i);                          // computed now, never stored
 *           if (cmp_list_key(x_i) >= t)                       // c.m == c.cap first: too many, select from x
 *               c.pos[c.m] = i, c.key[c.m++] = cmp_list_bits(x_i);
 *       }
 *       cmp_select_topk_list(&c, n, k, work, idx, val);      // -EAGAIN: fewer than k, select from x
 *   }
 *
 * The threshold is cmp_select_topk_sampled's estimate, the sample the
 * same. The list's keys are the values' bit patterns, sign included. */
int cmp_select_stream(size_t n, size_t k, uint64_t seed, void *work, cmp_list *c);
/* The estimate from the c->m sampled keys; then c->m = 0. -ENOTSUP when k
 * is too large a share of n to estimate from a sample. */
int cmp_select_stream_threshold(cmp_list *c, size_t n, size_t k, void *work, uint32_t *t);
/* The k largest magnitudes of the list: positions ascending into idx_out,
 * their values into val_out (NULL: not wanted). -EAGAIN if the list holds
 * fewer than k. */
int cmp_select_topk_list(const cmp_list *c, size_t n, size_t k, void *work, uint32_t *idx_out, float *val_out);

/* The top-k codecs' (topk, stc) workspace: the selection's, then the k
 * positions they chose and the k values at them (gathered once: x is far
 * bigger than the cache, and the message and the sender's view read them).
 * cmp_select_chosen selects into it from x (with the sampled or the exact
 * search: the same set) or, x NULL, from the list c; cmp_chosen_idx and
 * cmp_chosen_val read what the last selection chose. */
size_t cmp_select_chosen_work(size_t n, size_t k);
int cmp_select_chosen(const float *x, const cmp_list *c, size_t n, size_t k, uint64_t seed, int sampled, void *work);
static inline const uint32_t *cmp_chosen_idx(const void *work, size_t n)
{
    return (const uint32_t *)((const uint8_t *)work + cmp_select_work(n));
}
static inline const float *cmp_chosen_val(const void *work, size_t n, size_t k)
{
    return (const float *)(cmp_chosen_idx(work, n) + k);
}

/* Positions idx[0..k) (ascending, < n) travel as gaps g_0 = idx_0,
 * g_j = idx_j - idx_{j-1} - 1, each Golomb-Rice coded with parameter b
 * (g >> b in unary, then the b low bits): 1 + b + (g >> b) bits.
 *
 * Returns the b in [0, 31] that minimises sum_j (1 + b + (g_j >> b)) (the
 * smallest such b on ties) and stores that sum in *bits. The search covers
 * b = 0 .. b0 + 1 with b0 = cmp_select_rice_b0(n, k); beyond b0 + 1 the sum
 * provably only grows, so this is the optimum for the actual gaps. */
int cmp_select_rice(const uint32_t *idx, size_t k, size_t n, uint64_t *bits);

/* Reads (and checks) a position stream of len bytes: k Rice(b) gaps, each
 * followed by `extra` raw bits (stc's sign bit), giving positions below n;
 * then zero bits to the byte boundary and nothing after. With idx NULL it
 * only checks; else idx[j] is the j-th position, ascending, and with
 * extra = 1 its bit lands in bit 31 of idx[j] (positions are below
 * CMP_MAX_N < 2^31). 0 or -EBADMSG (idx may then hold part of the stream).
 * Takes O(len + k) time whatever the input. */
int cmp_select_pos_read(const uint8_t *in, size_t len, size_t k, int b, int extra, size_t n, uint32_t *idx);

/* floor(log2((n - k) / k)) when n - k >= k, else 0 (0 for k == 0): the Rice
 * parameter for the mean gap, used by the bounds. */
int cmp_select_rice_b0(size_t n, size_t k);

/* Largest sum_j (1 + b + (g_j >> b)) over all position sets, for b = b0:
 * k (1 + b0) + ((n - k) >> b0). The optimal b never needs more. */
uint64_t cmp_select_rice_bits_max(size_t n, size_t k);

#endif
