/* OpenBLAS controls. These functions come from OpenBLAS's own cblas.h; they
 * are the only OpenBLAS-specific calls in the project. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_blas.h"

void nn_blas_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

int nn_blas_threads(void) { return openblas_get_num_threads(); }

const char *nn_blas_core(void) { return openblas_get_corename(); }

const char *nn_blas_describe(void)
{
    static char line[256];
    snprintf(line, sizeof line, "%s; core %s; %d thread%s", openblas_get_config(), openblas_get_corename(),
             nn_blas_threads(), nn_blas_threads() == 1 ? "" : "s");
    return line;
}

int nn_blas_downgraded(void)
{
    static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    const char *core = openblas_get_corename();
    for (size_t i = 0; i < sizeof avx512_cores / sizeof *avx512_cores; i++)
        if (core && strcasecmp(core, avx512_cores[i]) == 0)
            return 0;
    return 1;
}
