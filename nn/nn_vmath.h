/* Elementwise functions written for GCC's vectoriser: libm's expf and erff
 * are calls per element, and in a GPT step they cost more than a quarter of
 * the time (GELU's erf and exp, the softmax's exp). Accuracy is stated per
 * function; both are checked against libm in tests/unit/test_nn_seq.c.
 *
 *   for (i = 0; i < n; i++) y[i] = nn_vexp_neg(x[i]);   // x <= 0
 */
#ifndef NN_NN_VMATH_H
#define NN_NN_VMATH_H

#include <stdint.h>
#include <string.h>

/* exp(x) for x <= 0 (a max-subtracted softmax, a Gaussian), written so that
 * GCC vectorises the loops that call it: round-to-nearest by the 1.5 * 2^23
 * trick, Cody-Waite reduction, Cephes' degree-6 polynomial (about 1 ulp), 2^n
 * from the exponent bits. Below -87.3 (where exp < 2^-126) the result is
 * masked to exactly 0 with integer operations: a float compare-and-select
 * there lets GCC branch around the arithmetic, and then it cannot vectorise
 * the loop (the float operations "could trap"). */
static inline float nn_vexp_neg(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    const float t = x * 1.44269504088896341f + magic;
    const float n = t - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const uint32_t sb = (tb - 0x4B400000u + 127u) << 23; /* (n + 127) << 23; n in [-126, 0] where kept */
    float s;
    memcpy(&s, &sb, sizeof s);
    const float e = p * s;
    uint32_t eb;
    memcpy(&eb, &e, sizeof eb);
    eb &= -(uint32_t)(x > -87.3f);
    float out;
    memcpy(&out, &eb, sizeof out);
    return out;
}

/* erf(z) to within 1.5e-7 (Abramowitz and Stegun 7.1.26: 1 - t P(t) exp(-z^2)
 * with t = 1 / (1 + p |z|)), and exp(-z^2) itself in *gauss, which GELU's
 * derivative needs too: one exponential serves both. */
static inline float nn_verf(float z, float *gauss)
{
    const float a = z < 0 ? -z : z;
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float e = nn_vexp_neg(-a * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float r = 1.0f - p * t * e;
    *gauss = e;
    return z < 0 ? -r : r;
}

#endif
