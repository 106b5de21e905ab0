/* Counter-based random numbers for the stochastic codecs: the i-th draw of a
 * stream is a pure function of (seed, i), so encoders can vectorise, run in
 * any order, and randk's decoder can regenerate the sender's indices.
 *
 *   float u = cmp_rng_uniform(seed, i);   // [0, 1), 24 random bits
 *
 * The mixer is the splitmix64 finaliser (Stafford's variant 13) applied to a
 * Weyl sequence: fine statistical quality for rounding decisions, not crypto.
 */
#ifndef COMPRESS_CMP_RNG_H
#define COMPRESS_CMP_RNG_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t cmp_rng_at(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline float cmp_rng_uniform(uint64_t seed, uint64_t i)
{
    return (float)(cmp_rng_at(seed, i) >> 40) * (1.0f / 16777216.0f);
}

/* 32-bit draws for values [2 first, 2 (first + pairs)): value i gets the low
 * half of cmp_rng_at(seed, i / 2) for even i, the high half for odd i
 * (compress/FORMAT.md, "Random draws"). In cmp_rng.c, compiled as scalar code. */
void cmp_rng_fill32(uint64_t seed, uint64_t first, size_t pairs, uint32_t *r);

#endif
