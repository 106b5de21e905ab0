/* The BLAS behind nn/: thread count and what OpenBLAS picked.
 *
 *   nn_blas_set_threads(1);            // one peer, one core
 *   printf("%s\n", nn_blas_describe()); // "OpenBLAS 0.3.21 ... core SkylakeX, 1 thread"
 */
#ifndef NN_NN_BLAS_H
#define NN_NN_BLAS_H

void nn_blas_set_threads(int n);
int nn_blas_threads(void);
/* OpenBLAS's kernel choice ("Haswell", "SkylakeX", ...). */
const char *nn_blas_core(void);
/* 1 when this CPU has AVX-512 but OpenBLAS runs a kernel set without it
 * (typically because OPENBLAS_CORETYPE=Haswell was forced): sgemm then runs at
 * lower speed (up to about half on large products). The caller decides what to say; nn/ does not print. */
int nn_blas_downgraded(void);
/* One line for logs: configuration, core and threads. Static buffer. */
const char *nn_blas_describe(void);

#endif
