/* The dense and gathered vector loops of a compressed emit: see gsp_kernels.h. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gossip/gsp_kernels.h"

/* The norms below only choose between the codec and a whole (bf16) message:
 * float sums over blocks of BLK (vectorised, error ~BLK ulps at worst), added
 * up in double. */

/* One block of diff_norms: lane l of fa and fb sums the squares of v and z
 * at the positions = l mod LANES. Written with SSE2 where there is SSE2:
 * GCC left the plain loop scalar, its sums spilled to the stack, and it took
 * a pass of memory's time three times over. Same operations in the same
 * order per lane either way, so the same sums bit for bit. Returns i + BLK. */
static size_t diff_block(const float *x, float inv, const float *restrict ref, float *restrict v, size_t i,
                         float fa[LANES], float fb[LANES])
{
#if defined(__SSE2__)
    const __m128 s = _mm_set1_ps(inv);
    __m128 a0 = _mm_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    for (const size_t e = i + BLK; i < e; i += LANES) {
        const __m128 z0 = _mm_mul_ps(_mm_loadu_ps(x + i), s), z1 = _mm_mul_ps(_mm_loadu_ps(x + i + 4), s);
        const __m128 v0 = _mm_sub_ps(z0, _mm_loadu_ps(ref + i)), v1 = _mm_sub_ps(z1, _mm_loadu_ps(ref + i + 4));
        _mm_storeu_ps(v + i, v0), _mm_storeu_ps(v + i + 4, v1);
        a0 = _mm_add_ps(a0, _mm_mul_ps(v0, v0)), a1 = _mm_add_ps(a1, _mm_mul_ps(v1, v1));
        b0 = _mm_add_ps(b0, _mm_mul_ps(z0, z0)), b1 = _mm_add_ps(b1, _mm_mul_ps(z1, z1));
    }
    _mm_storeu_ps(fa, a0), _mm_storeu_ps(fa + 4, a1), _mm_storeu_ps(fb, b0), _mm_storeu_ps(fb + 4, b1);
#else
    for (const size_t e = i + BLK; i < e; i += LANES)
        for (int l = 0; l < LANES; l++) {
            const float zi = x[i + l] * inv, vi = zi - ref[i + l];
            v[i + l] = vi;
            fa[l] += vi * vi;
            fb[l] += zi * zi;
        }
#endif
    return i;
}

/* v = z - ref with ||v||^2 and ||z||^2, where z = x * inv (inv 1: x is the
 * model itself, x * 1.0f is x bit for bit). With `give` (the one out-edge of
 * a round, straight from x: z = x / w is never stored), x also gives up
 * moved times the reference as it stands (as split_x does), block by block
 * while the block is in L1: a separate plain loop, since a double update in
 * the lanes loop keeps the compiler from vectorising either. */
void gsp_diff_norms(const float *x, float inv, const float *restrict ref, float *restrict v, size_t n,
                    double *vv, double *zz, float *give, double moved)
{
    double a = 0, b = 0;
    for (size_t i = 0; i < n;) {
        const size_t s = i, e = i + BLK <= n ? i + BLK : n;
        float fa[LANES] = {0}, fb[LANES] = {0};
        if (e - i == BLK)
            i = diff_block(x, inv, ref, v, i, fa, fb);
        for (; i < e; i++) {
            const float zi = x[i] * inv;
            v[i] = zi - ref[i];
            fa[0] += v[i] * v[i];
            fb[0] += zi * zi;
        }
        for (int l = 0; l < LANES; l++)
            a += fa[l], b += fb[l];
        if (give)
            for (size_t j = s; j < e; j++)
                give[j] = (float)((double)give[j] - moved * (double)ref[j]);
    }
    *vv = a, *zz = b;
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
