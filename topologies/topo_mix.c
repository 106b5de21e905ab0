/* How fast a schedule averages: pure push-sum in double precision, all peers
 * alive, no gradients. This analyses the schedule only; the gossip code
 * (gossip/) has its own tests of the same property. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_impl.h"

/* max_i ||x_i / w_i - avg|| / ||avg|| */
static double rel_error(int n, int dim, const double *x, const double *w, const double *avg, double avg_norm)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0))
            return INFINITY;
        double s = 0;
        for (int d = 0; d < dim; d++) {
            double z = x[(size_t)i * dim + d] / w[i] - avg[d];
            s += z * z;
        }
        if (s > worst)
            worst = s;
    }
    return sqrt(worst) / avg_norm;
}

int topo_mix_rounds(const topo *t, int dim, uint64_t seed, double tol, long max_rounds, long *rounds)
{
    if (!t || !t->out_at || t->n_phases < 1 || dim < 1 || !(tol > 0) || max_rounds < 0 || !rounds)
        return -EINVAL;
    const int n = t->n_peers;
    const size_t len = (size_t)n * (size_t)dim;
    double *x = malloc(len * sizeof *x), *nx = malloc(len * sizeof *nx);
    double *w = malloc((size_t)n * sizeof *w), *nw = malloc((size_t)n * sizeof *nw);
    double *avg = calloc((size_t)dim, sizeof *avg);
    int rc = -ENOMEM;
    if (!x || !nx || !w || !nw || !avg)
        goto out;

    /* Mean 1 per coordinate keeps ||avg|| away from 0, so the relative error
     * measures disagreement, not a ratio of two tiny numbers. */
    uint64_t s = seed;
    for (size_t k = 0; k < len; k++)
        x[k] = 1.0 + topo_rng_normal(&s);
    for (int i = 0; i < n; i++) {
        w[i] = 1;
        for (int d = 0; d < dim; d++)
            avg[d] += x[(size_t)i * dim + d];
    }
    double avg_norm = 0;
    for (int d = 0; d < dim; d++) {
        avg[d] /= n;
        avg_norm += avg[d] * avg[d];
    }
    avg_norm = sqrt(avg_norm);
    if (!(avg_norm > 0))
        avg_norm = 1;

    rc = -ETIMEDOUT;
    if (rel_error(n, dim, x, w, avg, avg_norm) <= tol) {
        *rounds = 0;
        rc = 0;
        goto out;
    }
    for (long r = 0; r < max_rounds; r++) {
        /* All sends of a round are applied at once: a synchronous round. */
        memset(nx, 0, len * sizeof *nx);
        memset(nw, 0, (size_t)n * sizeof *nw);
        for (int i = 0; i < n; i++) {
            topo_out o;
            topo_route(t, r, i, NULL, &o);
            const double *xi = x + (size_t)i * dim;
            double *dst = nx + (size_t)i * dim;
            for (int d = 0; d < dim; d++)
                dst[d] += o.keep * xi[d];
            nw[i] += o.keep * w[i];
            for (int k = 0; k < o.n; k++) {
                dst = nx + (size_t)o.peer[k] * dim;
                for (int d = 0; d < dim; d++)
                    dst[d] += o.weight[k] * xi[d];
                nw[o.peer[k]] += o.weight[k] * w[i];
            }
        }
        double *tmp = x;
        x = nx, nx = tmp;
        tmp = w, w = nw, nw = tmp;
        if (rel_error(n, dim, x, w, avg, avg_norm) <= tol) {
            *rounds = r + 1;
            rc = 0;
            break;
        }
    }
out:
    free(x), free(nx), free(w), free(nw), free(avg);
    return rc;
}
