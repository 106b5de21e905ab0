/* Messages of a value-by-value codec (bf16: an edge's first message and a
 * lagging reference's; fp16, bf16 or none as the run's codec) made and read
 * a block at a time: neither end ever holds the difference z - r or the
 * decoded values whole, only the message itself. The floats are those of
 * the whole-vector way (write v, encode it, decode it into c, move the
 * reference by c): the same expressions, value by value, and the one sum
 * (<v, c>, ||c||^2) in gsp_dot_norm's order. */
#include "gossip/gsp_internal.h"
#include "gossip/gsp_kernels.h"
#include "gossip/gsp_pool.h"

long gsp_values_encode(const cmp_spec *s, const float *src, float inv, const float *ref, size_t n, uint8_t *buf,
                       size_t cap, cmp_values *mv, double *vc, double *cc)
{
    const long len = cmp_values_begin(s, n, buf, cap, mv);
    if (len < 0)
        return len;
    float v[BLK], c[BLK];
    double a[4] = {0}, b[4] = {0}; /* (BLK is a multiple of 4: lane i & 3 is the position's j & 3) */
    for (size_t s0 = 0; s0 < n; s0 += BLK) {
        const size_t m = n - s0 < BLK ? n - s0 : BLK;
        for (size_t i = 0; i < m; i++) {
            const float zi = src[s0 + i] * inv;
            v[i] = zi - ref[s0 + i];
        }
        cmp_values_write(mv, buf, s0, v, m);
        cmp_values_read(mv, buf, s0, m, c);
        for (size_t i = 0; i < m; i++) {
            a[i & 3] += (double)v[i] * c[i];
            b[i & 3] += (double)c[i] * c[i];
        }
    }
    *vc = (a[0] + a[1]) + (a[2] + a[3]);
    *cc = (b[0] + b[1]) + (b[2] + b[3]);
    return len;
}

int gsp_values_finite(const cmp_values *mv, const uint8_t *msg, size_t n)
{
    float c[BLK];
    for (size_t s0 = 0; s0 < n; s0 += BLK) {
        const size_t m = n - s0 < BLK ? n - s0 : BLK;
        cmp_values_read(mv, msg, s0, m, c);
        if (!gsp_floats_finite(c, m))
            return 0;
    }
    return 1;
}

typedef struct values_job {
    const cmp_values *mv;
    const uint8_t *msg;
    float *ref, *x, *old;
    float gain;
    double xm;
    int give, sender;
} values_job;

/* One span of a message's move, a block at a time: the sender's (as
 * gsp_edge_move's dense loop: x gives up the old reference when `give`,
 * then takes xm times the change) or the receiver's (the reference moves,
 * then x takes xm times it, as absorb's sweep). Value by value, so the
 * pool's chunks compute what one pass would. */
static void values_span(void *arg, size_t s, size_t e)
{
    const values_job *a = arg;
    float *restrict ref = a->ref, *restrict x = a->x, c[BLK];
    for (size_t s0 = s; s0 < e; s0 += BLK) {
        const size_t m = e - s0 < BLK ? e - s0 : BLK;
        cmp_values_read(a->mv, a->msg, s0, m, c);
        if (!a->sender) {
            for (size_t i = 0; i < m; i++)
                ref[s0 + i] += a->gain * c[i];
            gsp_add_scaled(x + s0, ref + s0, m, a->xm);
            continue;
        }
        if (a->old)
            memcpy(a->old + s0, ref + s0, m * sizeof(float));
        for (size_t i = 0; i < m; i++) {
            const size_t j = s0 + i;
            const float before = ref[j];
            if (a->give)
                x[j] = (float)((double)x[j] + a->xm * (double)before);
            ref[j] += a->gain * c[i];
            if (x)
                x[j] = (float)((double)x[j] + a->xm * ((double)ref[j] - (double)before));
        }
    }
}

void gsp_values_move(gsp_edge *e, const cmp_values *mv, const uint8_t *msg, size_t n, float gain, float *x,
                     double xm, float *old, int give, struct gsp_pool *pool)
{
    values_job a = {.mv = mv, .msg = msg, .ref = e->ref, .x = x, .old = old, .gain = gain, .xm = xm,
                    .give = give, .sender = 1};
    gsp_pool_spans(pool, n, values_span, &a);
}

void gsp_values_absorb(gsp_peer *g, gsp_edge *e, const cmp_values *mv, const uint8_t *msg, float gain, double xm)
{
    values_job a = {.mv = mv, .msg = msg, .ref = e->ref, .x = g->x, .gain = gain, .xm = xm};
    gsp_pool_spans(g->pool, g->dim, values_span, &a);
}
