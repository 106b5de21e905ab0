/* Error feedback: what a biased codec drops is delayed, not lost. Feeding the
 * same vector g for T rounds, the sum of the decoded messages equals T*g minus
 * the final residual, and the residual stays bounded (so the average decoded
 * message tends to g) -- while without feedback top-k would never send the
 * small entries at all. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp_ef.h"

Test(compress_ef, nothing_is_lost_only_delayed)
{
    /* Contractive codecs: EF is for them. (With a high-variance unbiased codec
     * such as qsgd:2 the residual grows without bound: it needs no EF.) */
    const char *specs[] = {"topk:0.05", "sign", "stc:0.05", "natural", "bf16"};
    const size_t n = 400;
    const int T = 400;
    float g[400], sum[400], dec[400];
    srand(3);
    for (size_t i = 0; i < n; i++)
        g[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * (i < 20 ? 10.0f : 1.0f);
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        cmp_spec spec;
        char err[128];
        cr_assert_eq(cmp_spec_parse(&spec, specs[s], err, sizeof err), 0, "%s", err);
        cmp_ef ef;
        cr_assert_eq(cmp_ef_init(&ef, &spec, n), 0);
        uint8_t *msg = malloc(cmp_bound(&spec, n));
        memset(sum, 0, sizeof sum);
        double half_norm = 0;
        for (int t = 0; t < T; t++) {
            if (t == T / 2)
                for (size_t i = 0; i < n; i++)
                    half_norm += (double)ef.residual[i] * ef.residual[i];
            long len = cmp_ef_encode(&ef, g, (uint64_t)t, msg, cmp_bound(&spec, n));
            cr_assert_gt(len, 0);
            cr_assert_eq(cmp_decode(msg, (size_t)len, n, dec), 0);
            for (size_t i = 0; i < n; i++)
                sum[i] += dec[i];
        }
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            /* sum of messages + residual == T * g, up to float round-off */
            double identity = fabs(sum[i] + ef.residual[i] - T * g[i]);
            cr_assert_lt(identity, 1e-3 * T, "%s [%zu]: conservation off by %g", specs[s], i, identity);
            worst = fmax(worst, fabs(sum[i] / T - g[i]));
        }
        double end_norm = 0;
        for (size_t i = 0; i < n; i++)
            end_norm += (double)ef.residual[i] * ef.residual[i];
        /* Bounded, not growing with T: the dropped part is sent later, so the
         * average message tends to g (slowly for sign, whose contraction is
         * weak on vectors with outliers). */
        cr_assert_leq(sqrt(end_norm), 2.0 * sqrt(half_norm) + 1e-3, "%s: residual grows (%g -> %g)", specs[s],
                      sqrt(half_norm), sqrt(end_norm));
        if (strcmp(specs[s], "sign") != 0)
            cr_assert_lt(worst, 0.2, "%s: the average message is within %.3f of g, expected -> 0", specs[s], worst);
        cmp_ef_free(&ef);
        free(msg);
    }
}
