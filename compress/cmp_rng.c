/* The stochastic codecs' block RNG fill. */
#include "compress/cmp_rng.h"

/* The generator runs best as scalar code (two 64-bit multiplies, which
 * SSE2 lacks: GCC's vector emulation of them is slower than the scalar
 * loop), so it fills a small buffer that the codecs' vectorised passes read. */
#if defined(__GNUC__) && !defined(__clang__)
#define CMP_SCALAR __attribute__((optimize("no-tree-vectorize")))
#else
#define CMP_SCALAR
#endif

CMP_SCALAR void cmp_rng_fill32(uint64_t seed, uint64_t first, size_t pairs, uint32_t *r)
{
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
    for (size_t p = 0; p < pairs; p++) {
        uint64_t w = cmp_rng_at(seed, first + p);
        r[2 * p] = (uint32_t)w;
        r[2 * p + 1] = (uint32_t)(w >> 32);
    }
}
