/* What the gradient-check suites share (tests/unit/test_nn_grad.c,
 * tests/unit/test_nn_seq.c): a relative error with a floor, the normwise
 * error of a float output against a double reference, a dot product, random
 * and garbage buffers (backward kernels overwrite their outputs, so garbage
 * there shows an entry that was skipped or accumulated), and a widening copy
 * for the double-precision references. */
#ifndef TESTS_NN_CHECK_H
#define TESTS_NN_CHECK_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "nn/nn_rng.h"

#define GARBAGE 1234.5f

/* |a-b| / (|a|+|b|), with a floor so entries that are ~0 on both sides compare
 * absolutely instead of dividing noise by noise. */
static inline double relerr(double a, double b)
{
    double d = fabs(a) + fabs(b);
    return fabs(a - b) / (d > 1e-3 ? d : 1e-3);
}

/* Normwise relative error of a float kernel's output against the double
 * reference: max |got - want| / max |want|. */
static inline double max_err_f(const float *got, const double *want, size_t n)
{
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]), a = fabs(want[i]);
        diff = d > diff ? d : diff;
        scale = a > scale ? a : scale;
    }
    return diff / scale;
}

static inline double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline float *rand_floats(nn_rng *r, size_t n, float lo, float hi)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * nn_rng_uniform(r);
    return v;
}

static inline float *garbage(size_t n)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = GARBAGE;
    return v;
}

static inline double *to_double(const float *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

#endif
