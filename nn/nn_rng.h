/* Deterministic random streams for nn/ (and anything that needs one).
 *
 *   nn_rng r;
 *   nn_rng_seed(&r, run_seed, stream_id);   // e.g. stream_id = peer id
 *   float u = nn_rng_uniform(&r);          // [0, 1)
 *   float g = nn_rng_normal(&r);           // N(0, 1)
 *
 * xoshiro256** seeded through splitmix64, so two streams that differ only in
 * stream_id are unrelated. Header-only: the generator is on every hot path
 * (dropout of samples, init, shuffles) and must inline.
 */
#ifndef NN_NN_RNG_H
#define NN_NN_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct nn_rng {
    uint64_t s[4];
} nn_rng;

static inline uint64_t nn_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void nn_rng_seed(nn_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t st = seed ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = nn_splitmix64(&st);
}

static inline uint64_t nn_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t nn_rng_next(nn_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = nn_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = nn_rng_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 24 random bits: exactly representable in float. */
static inline float nn_rng_uniform(nn_rng *r)
{
    return (float)(nn_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double nn_rng_uniform_d(nn_rng *r)
{
    return (double)(nn_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0; Lemire's multiply-shift, bias < n / 2^64. */
static inline uint64_t nn_rng_below(nn_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)nn_rng_next(r) * n) >> 64);
}

/* Standard normal by Box-Muller (one of the pair is discarded: simplicity over speed,
 * this is only used at initialisation). */
static inline double nn_rng_normal(nn_rng *r)
{
    double u1 = 1.0 - nn_rng_uniform_d(r); /* (0, 1]: log is finite */
    double u2 = nn_rng_uniform_d(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Gamma(shape, 1) by Marsaglia-Tsang; shape < 1 through the boost
 * Gamma(a) = Gamma(a+1) * U^(1/a). Used for Dirichlet shards. */
static inline double nn_rng_gamma(nn_rng *r, double shape)
{
    if (shape < 1.0) {
        double u = 1.0 - nn_rng_uniform_d(r);
        return nn_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = nn_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = 1.0 - nn_rng_uniform_d(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

#endif
