/* The dense and gathered vector loops of a compressed emit: see gsp_kernels.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gossip/gsp_kernels.h"

/* GCC on x86-64 also builds the difference's loops for AVX2, taken where
 * the CPU has it: lane l of a 256-bit register is lane l of the SSE2 pair,
 * so the same operations in the same order, the same floats bit for bit
 * (no FMA: AVX2 alone has none, and ISO C mode does not contract). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GSP_AVX2 1
#include <immintrin.h>
#endif

/* The norms below only choose between the codec and a whole (bf16) message:
 * float sums over blocks of BLK (vectorised, error ~BLK ulps at worst), added
 * up in double. */

/* One block of the difference: lane l of fa and fb sums the squares of v
 * and z at the positions = l mod LANES; v[j] is the block's j-th value.
 * Written with SSE2 where there is SSE2: GCC left the plain loop scalar,
 * its sums spilled to the stack, and it took a pass of memory's time three
 * times over. Same operations in the same order per lane either way, so the
 * same sums bit for bit. */
static void diff_block(const float *x, float inv, const float *restrict ref, float *restrict v, float fa[LANES],
                       float fb[LANES])
{
#if defined(__SSE2__)
    const __m128 s = _mm_set1_ps(inv);
    __m128 a0 = _mm_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    for (size_t i = 0; i < BLK; i += LANES) {
        const __m128 z0 = _mm_mul_ps(_mm_loadu_ps(x + i), s), z1 = _mm_mul_ps(_mm_loadu_ps(x + i + 4), s);
        const __m128 v0 = _mm_sub_ps(z0, _mm_loadu_ps(ref + i)), v1 = _mm_sub_ps(z1, _mm_loadu_ps(ref + i + 4));
        _mm_storeu_ps(v + i, v0), _mm_storeu_ps(v + i + 4, v1);
        a0 = _mm_add_ps(a0, _mm_mul_ps(v0, v0)), a1 = _mm_add_ps(a1, _mm_mul_ps(v1, v1));
        b0 = _mm_add_ps(b0, _mm_mul_ps(z0, z0)), b1 = _mm_add_ps(b1, _mm_mul_ps(z1, z1));
    }
    _mm_storeu_ps(fa, a0), _mm_storeu_ps(fa + 4, a1), _mm_storeu_ps(fb, b0), _mm_storeu_ps(fb + 4, b1);
#else
    for (size_t i = 0; i < BLK; i += LANES)
        for (int l = 0; l < LANES; l++) {
            const float zi = x[i + l] * inv, vi = zi - ref[i + l];
            v[i + l] = vi;
            fa[l] += vi * vi;
            fb[l] += zi * zi;
        }
#endif
}

#if GSP_AVX2
__attribute__((target("avx2"))) static void diff_block_avx2(const float *x, float inv, const float *restrict ref,
                                                            float *restrict v, float fa[LANES], float fb[LANES])
{
    const __m256 s = _mm256_set1_ps(inv);
    __m256 a = _mm256_setzero_ps(), b = a;
    for (size_t i = 0; i < BLK; i += LANES) {
        const __m256 z = _mm256_mul_ps(_mm256_loadu_ps(x + i), s), d = _mm256_sub_ps(z, _mm256_loadu_ps(ref + i));
        _mm256_storeu_ps(v + i, d);
        a = _mm256_add_ps(a, _mm256_mul_ps(d, d));
        b = _mm256_add_ps(b, _mm256_mul_ps(z, z));
    }
    _mm256_storeu_ps(fa, a), _mm256_storeu_ps(fb, b);
}

#endif

typedef void block_loop(const float *x, float inv, const float *restrict ref, float *restrict v, float fa[LANES],
                        float fb[LANES]);

/* The block loop for this CPU. */
static block_loop *block_for_cpu(void)
{
#if GSP_AVX2
    if (__builtin_cpu_supports("avx2"))
        return diff_block_avx2;
#endif
    return diff_block;
}

/* v[0..e-s) = z - ref over [s, e), at most BLK values, its squares added to
 * *a and *b: a whole block in lanes (with `block`), a shorter tail in order. */
static void diff_span(const float *x, float inv, const float *restrict ref, float *restrict v, size_t s, size_t e,
                      double *a, double *b, block_loop *block)
{
    float fa[LANES] = {0}, fb[LANES] = {0};
    if (e - s == BLK)
        block(x + s, inv, ref + s, v, fa, fb);
    else
        for (size_t i = s; i < e; i++) {
            const float zi = x[i] * inv;
            v[i - s] = zi - ref[i];
            fa[0] += v[i - s] * v[i - s];
            fb[0] += zi * zi;
        }
    double sa = *a, sb = *b; /* (in registers: through the pointers each add waited for the last one's store) */
    for (int l = 0; l < LANES; l++)
        sa += fa[l], sb += fb[l];
    *a = sa, *b = sb;
}

/* v = z - ref with ||v||^2 and ||z||^2, where z = x * inv (inv 1: x is the
 * model itself, x * 1.0f is x bit for bit); v NULL: the norms only. */
void gsp_diff_norms(const float *x, float inv, const float *restrict ref, float *restrict v, size_t n,
                    double *vv, double *zz)
{
    double a = 0, b = 0;
    float vb[BLK]; /* (v NULL: each block of v lives here only) */
    block_loop *block = block_for_cpu();
    for (size_t s0 = 0; s0 < n; s0 += GSP_CHUNK) { /* (chunk by chunk, as gsp_diff_collect adds them up) */
        const size_t s1 = n - s0 > GSP_CHUNK ? s0 + GSP_CHUNK : n;
        double ca = 0, cb = 0;
        for (size_t s = s0; s < s1; s += BLK)
            diff_span(x, inv, ref, v ? v + s : vb, s, s + BLK <= s1 ? s + BLK : s1, &ca, &cb, block);
        a += ca, b += cb;
    }
    *vv = a, *zz = b;
}

/* Bit l set where the key of v[l] (its magnitude's bits) is >= t, for 64
 * values: a vector compare per four (keys and t are below 2^31, so a signed
 * compare is exact, and key >= t is key > t - 1). */
static uint64_t key_mask(const float *v, uint32_t t)
{
    uint64_t m = 0;
#if defined(__SSE2__)
    const __m128i absm = _mm_set1_epi32(0x7fffffff), below = _mm_set1_epi32((int32_t)t - 1);
    for (int l = 0; l < 64; l += 4) {
        __m128i u = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(v + l)), absm);
        m |= (uint64_t)(unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(u, below))) << l;
    }
#else
    for (int l = 0; l < 64; l++)
        m |= (uint64_t)(cmp_list_key(v[l]) >= t) << l;
#endif
    return m;
}

/* A list that grows (a chunk's candidates, before they are put in order). */
static int list_grow(cmp_list *c)
{
    const size_t cap = c->cap ? 2 * c->cap : 1024;
    uint32_t *pos = realloc(c->pos, cap * sizeof *pos), *key = pos ? realloc(c->key, cap * sizeof *key) : NULL;
    if (pos)
        c->pos = pos;
    if (!key)
        return -ENOMEM;
    c->key = key, c->cap = cap;
    return 0;
}

/* The norms of gsp_diff_norms over [s0, s1) with v never stored: each block
 * of v lives in L1 only, long enough to append the values whose key
 * reaches t to c (grown when `grow`, else -ENOSPC once it is full). */
static int collect_span(const float *x, float inv, const float *restrict ref, size_t s0, size_t s1, double *vv,
                        double *zz, uint32_t t, cmp_list *c, int grow)
{
    float vb[BLK];
    double a = 0, b = 0;
    size_t m = c->m;
    block_loop *block = block_for_cpu();
    for (size_t s = s0; s < s1; s += BLK) {
        const size_t e = s + BLK <= s1 ? s + BLK : s1, len = e - s;
        diff_span(x, inv, ref, vb, s, e, &a, &b, block);
        for (size_t j = 0; j < len; j++) {
            uint64_t mask = j + 64 <= len ? key_mask(vb + j, t) : cmp_list_key(vb[j]) >= t;
            const size_t step = j + 64 <= len ? 64 : 1;
            for (; mask; mask &= mask - 1) {
                const size_t l = j + (size_t)__builtin_ctzll(mask);
                if (m == c->cap) {
                    if (!grow)
                        return -ENOSPC;
                    c->m = m;
                    if (list_grow(c) < 0)
                        return -ENOMEM;
                }
                c->pos[m] = (uint32_t)(s + l), c->key[m++] = cmp_list_bits(vb[l]);
            }
            j += step - 1;
        }
    }
    c->m = m;
    *vv = a, *zz = b;
    return 0;
}

typedef struct collect_job {
    const float *x, *ref;
    float inv;
    uint32_t t;
    cmp_list *lists;
    double *norms; /* two a chunk */
    int *rc;
} collect_job;

static void collect_chunk(void *arg, size_t s, size_t e)
{
    const collect_job *a = arg;
    const size_t i = s / GSP_CHUNK;
    a->rc[i] = collect_span(a->x, a->inv, a->ref, s, e, &a->norms[2 * i], &a->norms[2 * i + 1], a->t, &a->lists[i], 1);
}

int gsp_diff_collect(const float *x, float inv, const float *restrict ref, size_t n, double *vv, double *zz,
                     uint32_t t, cmp_list *c, gsp_pool *pool)
{
    const size_t chunks = gsp_chunks(n);
    if (chunks == 1)
        return collect_span(x, inv, ref, 0, n, vv, zz, t, c, 0);
    if (gsp_pool_threads(pool) == 1) { /* chunk after chunk straight into c, their norms added as below */
        double a = 0, b = 0;
        for (size_t s = 0; s < n; s += GSP_CHUNK) {
            double ca, cb;
            const int r = collect_span(x, inv, ref, s, n - s > GSP_CHUNK ? s + GSP_CHUNK : n, &ca, &cb, t, c, 0);
            if (r < 0)
                return r;
            a += ca, b += cb;
        }
        *vv = a, *zz = b;
        return 0;
    }
    /* Each chunk into a list of its own, then in order into c; the norms
     * added in chunk order (what a pool of any size computes). */
    cmp_list *lists = calloc(chunks, sizeof *lists);
    double *norms = calloc(2 * chunks, sizeof *norms);
    int *rc = calloc(chunks, sizeof *rc), err = lists && norms && rc ? 0 : -ENOMEM;
    if (!err) {
        collect_job job = {.x = x, .ref = ref, .inv = inv, .t = t, .lists = lists, .norms = norms, .rc = rc};
        gsp_pool_spans(pool, n, collect_chunk, &job);
    }
    double a = 0, b = 0;
    size_t m = c->m;
    for (size_t i = 0; !err && i < chunks; i++) {
        if ((err = rc[i]) < 0)
            break;
        if (lists[i].m > c->cap - m) {
            err = -ENOSPC;
            break;
        }
        memcpy(c->pos + m, lists[i].pos, lists[i].m * sizeof *c->pos);
        memcpy(c->key + m, lists[i].key, lists[i].m * sizeof *c->key);
        m += lists[i].m;
        a += norms[2 * i], b += norms[2 * i + 1];
    }
    for (size_t i = 0; lists && i < chunks; i++)
        free(lists[i].pos), free(lists[i].key);
    free(lists), free(norms), free(rc);
    if (err < 0)
        return err;
    c->m = m;
    *vv = a, *zz = b;
    return 0;
}

/* x += m * r in double, rounded to float once per value. Elementwise, so
 * every vector width gives the same floats: a CPU with AVX2 converts twice
 * as many values an instruction (the loop is bound by the conversions, not
 * by memory, on SSE2). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
void gsp_add_scaled(float *restrict x, const float *restrict r, size_t n, double m)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)x[i] + m * (double)r[i]);
}

/* <v, c> and ||c||^2 at c's non-zeros (idx NULL: c dense, n values). */
void gsp_dot_norm(const float *v, const uint32_t *idx, const float *c, size_t n, double *vc, double *cc)
{
    double a[4] = {0}, b[4] = {0};
    for (size_t j = 0; j < n; j++) {
        if (idx && j + PREFETCH < n) /* the positions are scattered over a v far bigger than the cache */
            __builtin_prefetch(&v[idx[j + PREFETCH]]);
        const float vi = v[idx ? idx[j] : j];
        a[j & 3] += (double)vi * c[j];
        b[j & 3] += (double)c[j] * c[j];
    }
    *vc = (a[0] + a[1]) + (a[2] + a[3]);
    *cc = (b[0] + b[1]) + (b[2] + b[3]);
}
