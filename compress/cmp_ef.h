/* Error feedback around any codec: what compression drops this time is kept
 * and added to the next input (Seide et al. 2014; Karimireddy et al. 2019), so
 * over many rounds nothing is lost, only delayed.
 *
 *   cmp_ef ef = {0};
 *   cmp_ef_init(&ef, &spec, n);                        // residual, decode scratch, workspace
 *   long len = cmp_ef_encode(&ef, g, seed, out, cap);  // encodes g + residual, keeps the new residual
 *   cmp_ef_free(&ef);
 *
 * Compressed push-sum (gossip/) does not need this wrapper: its reference
 * scheme already keeps the compression error in the sender's x. It is for
 * compressing a stream of updates directly (e.g. gradients, or a codec study).
 */
#ifndef COMPRESS_CMP_EF_H
#define COMPRESS_CMP_EF_H

#include "compress/cmp.h"

typedef struct cmp_ef {
    const cmp_spec *spec;
    size_t n;
    float *residual; /* e: what was dropped so far */
    float *v;        /* g + e, then the decoded message */
    void *work;
} cmp_ef;

int cmp_ef_init(cmp_ef *ef, const cmp_spec *spec, size_t n);
/* Encodes x + residual; residual = (x + residual) - decode(message). */
long cmp_ef_encode(cmp_ef *ef, const float *x, uint64_t seed, uint8_t *out, size_t cap);
void cmp_ef_free(cmp_ef *ef);

#endif
