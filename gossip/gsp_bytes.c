/* What a peer and its messages hold: bytes by part, the codec scratch the
 * simulator's peers share, messages copied to be kept (gsp.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"
#include "gossip/gsp_gather.h"
#include "gossip/gsp_internal.h"

/* Fixed part of a message on the wire: src, dst, round, seq, kind, w_total,
 * gain, lengths (peer/wire/WIRE.md frames it; this is what the simulator counts). */
#define GSP_HEADER_BYTES 48

int gsp_share_scratch(gsp_peer *g, gsp_scratch *s)
{
    if (!g->codec || g->scratch)
        return -EINVAL;
    const size_t work = cmp_work_size(g->codec, g->dim);
    if (!s->sp_idx) { /* the first: s takes this peer's */
        *s = (gsp_scratch){.v = g->v, .work = g->work, .sp_idx = g->sp_idx, .sp_val = g->sp_val,
                           .sp_cap = g->sp_cap, .work_bytes = work, .dim = g->dim};
    } else {
        if (s->dim != g->dim || s->sp_cap != g->sp_cap || s->work_bytes != work)
            return -EINVAL;
        free(g->v), free(g->work), free(g->sp_idx), free(g->sp_val);
        g->work = s->work, g->sp_idx = s->sp_idx, g->sp_val = s->sp_val;
    }
    g->v = NULL; /* the difference, where it is needed at all, is s->v (diff_buf) */
    g->scratch = s;
    return 0;
}

size_t gsp_scratch_bytes(const gsp_scratch *s)
{
    return (s->v ? s->dim * sizeof(float) : 0) +
           (s->sp_idx ? s->work_bytes + s->sp_cap * (sizeof *s->sp_idx + sizeof *s->sp_val) : 0);
}

void gsp_scratch_free(gsp_scratch *s)
{
    free(s->v), free(s->work), free(s->sp_idx), free(s->sp_val);
    memset(s, 0, sizeof *s);
}

int gsp_sync_dense(size_t dim, size_t n_corr)
{
    return n_corr > dim / 3 * 2 + (dim % 3 * 2) / 3; /* 12 n > 8 dim, without overflow */
}

size_t gsp_sync_bytes(size_t dim, size_t n_corr)
{
    return dim * sizeof(float) + sizeof(uint32_t) +
           (gsp_sync_dense(dim, n_corr) ? dim * sizeof(double) : n_corr * (sizeof(uint32_t) + sizeof(double)));
}

size_t gsp_msg_bytes(const gsp_msg *m)
{
    switch (m->kind) {
    case GSP_DELTA:
    case GSP_GATHER:
        return GSP_HEADER_BYTES + m->payload_len;
    case GSP_SYNC:
        return GSP_HEADER_BYTES + gsp_sync_bytes(m->dim, m->n_corr);
    case GSP_RAW:
        break;
    }
    return GSP_HEADER_BYTES + m->dim * sizeof(double);
}

void gsp_bytes(const gsp_peer *g, size_t *state, size_t *codec)
{
    const size_t n = g->dim ? g->dim : 1, fv = n * sizeof(float), dv = n * sizeof(double);
    size_t st = (g->x ? fv : 0) + (g->z && g->z_written ? fv : 0) + (g->origin_copy ? fv : 0) + (g->origin_drawn ? fv : 0);
    size_t cs = (g->c ? fv : 0) + g->select_bytes;
    if (!g->scratch)
        cs += (g->v ? fv : 0) + (g->work ? cmp_work_size(g->codec, g->dim) : 0) +
              g->sp_cap * (sizeof *g->sp_idx + sizeof *g->sp_val);
    for (int k = 0; k <= TOPO_MAX_OUT; k++)
        cs += (g->msg_buf[k] ? gsp_msg_room(g) : 0) +
              g->sync_corr[k].cap * (sizeof *g->sync_corr[k].idx + sizeof *g->sync_corr[k].val);
    for (int k = 0; k < g->n_out + g->n_in; k++) {
        const gsp_edge *e = k < g->n_out ? &g->out[k] : &g->in[k - g->n_out];
        st += (e->x ? dv : 0) + (e->ref ? fv : 0) + (size_t)e->cap_log * sizeof *e->log;
        for (int j = 0; j < e->n_log; j++)
            st += e->log[j].cap * ((e->log[j].old ? sizeof(float) : 0) + (e->log[j].idx ? sizeof(uint32_t) : 0));
    }
    st += g->spare.cap * (sizeof(float) + sizeof(uint32_t));
    *state = st + (size_t)(g->cap_out + g->cap_in) * sizeof(gsp_edge) + gsp_gather_bytes(g);
    *codec = cs;
}

/* The bytes of each of a message's arrays, doubles first (so that one
 * allocation keeps them aligned in this order). */
static void msg_parts(const gsp_msg *m, size_t b[5])
{
    b[0] = m->x_total ? m->dim * sizeof(double) : 0;
    b[1] = m->corr ? m->n_corr * sizeof(double) : 0;
    b[2] = m->ref ? m->dim * sizeof(float) : 0;
    b[3] = m->corr_idx ? m->n_corr * sizeof(uint32_t) : 0;
    b[4] = m->payload ? m->payload_len : 0;
}

size_t gsp_msg_owned_bytes(const gsp_msg *m)
{
    if (!m->owned)
        return 0;
    size_t b[5];
    msg_parts(m, b);
    return b[0] + b[1] + b[2] + b[3] + b[4];
}

/* dst = src, n doubles or floats, and whether every one is finite, in one
 * pass. */
static int copy_doubles(double *restrict dst, const double *restrict src, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= gsp_not_finite_d(src[i]), dst[i] = src[i];
    return !bad;
}

static int copy_floats(float *restrict dst, const float *restrict src, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= gsp_not_finite(src[i]), dst[i] = src[i];
    return !bad;
}

int gsp_msg_copy(gsp_msg *dst, const gsp_msg *src)
{
    size_t b[5];
    msg_parts(src, b);
    uint8_t *mem = malloc(b[0] + b[1] + b[2] + b[3] + b[4] + 1), *at = mem;
    if (!mem)
        return -ENOMEM;
    *dst = *src;
    const void *from[5] = {src->x_total, src->corr, src->ref, src->corr_idx, src->payload};
    void *to[5];
    int finite = 1;
    for (int k = 0; k < 5; k++) {
        if (!b[k])
            to[k] = (void *)(uintptr_t)from[k]; /* (empty: as it was) */
        else if (k < 2)
            finite &= copy_doubles((double *)(void *)at, from[k], b[k] / sizeof(double)), to[k] = at;
        else if (k == 2)
            finite &= copy_floats((float *)(void *)at, from[k], b[k] / sizeof(float)), to[k] = at;
        else
            to[k] = memcpy(at, from[k], b[k]);
        at += b[k];
    }
    dst->finite = finite;
    dst->x_total = to[0], dst->corr = to[1], dst->ref = to[2], dst->corr_idx = to[3], dst->payload = to[4];
    dst->owned = mem;
    return 0;
}

void gsp_msg_free(gsp_msg *m)
{
    if (!m)
        return;
    free(m->owned);
    m->owned = NULL;
    m->x_total = NULL, m->corr = NULL;
    m->ref = NULL, m->corr_idx = NULL;
    m->payload = NULL;
}
