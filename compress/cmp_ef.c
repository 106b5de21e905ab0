/* Error feedback wrapper. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp_ef.h"

int cmp_ef_init(cmp_ef *ef, const cmp_spec *spec, size_t n)
{
    memset(ef, 0, sizeof *ef);
    size_t work = cmp_work_size(spec, n);
    ef->residual = calloc(n ? n : 1, sizeof(float));
    ef->v = malloc((n ? n : 1) * sizeof(float));
    ef->work = work ? malloc(work) : NULL;
    if (!ef->residual || !ef->v || (work && !ef->work)) {
        cmp_ef_free(ef);
        return -ENOMEM;
    }
    ef->spec = spec, ef->n = n;
    return 0;
}

long cmp_ef_encode(cmp_ef *ef, const float *x, uint64_t seed, uint8_t *out, size_t cap)
{
    const size_t n = ef->n;
    float *restrict v = ef->v, *restrict e = ef->residual;
    for (size_t i = 0; i < n; i++)
        v[i] = x[i] + e[i];
    long len = cmp_encode(ef->spec, v, n, seed, ef->work, out, cap);
    if (len < 0)
        return len;
    /* e = v - decode: subtract the message from v in place, then keep it. */
    if (cmp_decode_add(out, (size_t)len, n, -1.0f, v) < 0)
        return -EPROTO;
    memcpy(e, v, n * sizeof *e);
    return len;
}

void cmp_ef_free(cmp_ef *ef)
{
    if (!ef)
        return;
    free(ef->residual);
    free(ef->v);
    free(ef->work);
    memset(ef, 0, sizeof *ef);
}
