/* The run's starting model drawn ahead on libuv's thread pool (node_state.h):
 * an edge that starts after the peer's copy of it went (a neighbour that
 * restarts, a route around a lost one) would otherwise draw it in the loop,
 * seconds at 100M parameters during which no heartbeat goes out and the
 * neighbours take this peer for dead. An in-neighbour disconnected is one
 * that may come back with a new incarnation, so that is when a draw is made
 * ahead: one copy of the model, held until an edge takes it
 * (gsp_origin_ahead). A caller's starting parameters (libsgp), which
 * nothing can draw again, are kept in a file beside the checkpoint instead
 * of a copy in memory, and read back the same way. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer/net/node_state.h"
#include "peer/store/wholefile.h"

/* A caller's starting parameters (libsgp: nothing draws them again) from
 * the file node_origin_file wrote. */
static int read_origin(void *ctx, float *dst)
{
    const node *n = ctx;
    const int fd = open(n->origin_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    const size_t want = n->origin_dim * sizeof(float);
    size_t got = 0;
    while (got < want) {
        const ssize_t r = pread(fd, (char *)dst + got, want - got, (off_t)got);
        if (r <= 0) {
            const int e = r < 0 ? errno : EIO;
            close(fd);
            return -e;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

int node_origin_file(node *n, const float *x0, size_t dim, int edges)
{
    const gsp_peer *g = engine_gossip(n->e);
    if (!g->origin_copy || g->origin != g->origin_copy) /* (no origin, or one it does not own: nothing to save) */
        return -EINVAL;
    const char *ckpt = n->c->checkpoint;
    const size_t len = strlen(ckpt) + sizeof ".origin";
    if (!(n->origin_path = malloc(len)))
        return -ENOMEM;
    snprintf(n->origin_path, len, "%s.origin", ckpt);
    const int fd = open(n->origin_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : wholefile_fd_write(fd, x0, dim * sizeof(float));
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        rc = -errno;
    n->origin_dim = dim;
    if (rc == 0)
        rc = engine_set_origin_fill(n->e, read_origin, n, edges);
    if (rc < 0) {
        if (fd >= 0)
            unlink(n->origin_path);
        free(n->origin_path);
        n->origin_path = NULL;
    }
    return rc;
}

void node_origin_file_remove(node *n)
{
    if (n->origin_path)
        unlink(n->origin_path);
    free(n->origin_path);
    n->origin_path = NULL;
}

static void draw(uv_work_t *w)
{
    node *n = w->data;
    n->origin_buf = malloc((n->origin_dim ? n->origin_dim : 1) * sizeof(float));
    if (n->origin_buf && n->origin_fill(n->origin_ctx, n->origin_buf) < 0) { /* (the loop's next edge finds out) */
        free(n->origin_buf);
        n->origin_buf = NULL;
    }
}

static void drawn(uv_work_t *w, int status)
{
    node *n = w->data;
    n->origin_busy = 0;
    if (status == 0 && !n->closed && n->origin_buf)
        engine_origin_ahead(n->e, n->origin_buf); /* (freed there if no longer wanted) */
    else
        free(n->origin_buf);
    n->origin_buf = NULL;
}

/* Whether an in-neighbour that was connected is not (and not because it is
 * done): a process that restarts drops its connections, and back with a new
 * incarnation its edge starts again. (One that is only silent keeps its
 * incarnation when it wakes, and on a busy machine silences are often
 * false: no draw for those.) */
static int in_neighbour_lost(const gsp_pace *p)
{
    for (int j = 0; j < p->n_nb; j++)
        if (p->nb[j].is_in && !p->nb[j].done && p->nb[j].ever_up && !p->nb[j].connected)
            return 1;
    return 0;
}

void node_origin_ahead(node *n)
{
    const gsp_peer *g = engine_gossip(n->e);
    const gsp_pace *p = engine_pace(n->e);
    if (n->closed || n->origin_busy || !gsp_origin_ahead_wanted(g) || !in_neighbour_lost(p))
        return;
    if (engine_rounds_done(n->e) || g->round + 1 >= p->c.total_rounds)
        return; /* (in the last round a neighbour lost is finishing, not coming back for a new edge) */
    n->origin_busy = 1;
    /* (the worker gets its own copy: the loop ends g's fill if a draw differs from the origin) */
    n->origin_fill = g->origin_fill, n->origin_ctx = g->origin_ctx, n->origin_dim = g->dim;
    n->origin_work.data = n;
    uv_queue_work(&n->loop, &n->origin_work, draw, drawn);
    node_event(n, "drawing the run's starting model ahead, for edges that start again", -1, NULL);
}
