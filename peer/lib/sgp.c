/* libsgp: the networked peer (peer/net/node.c) with the caller's own
 * training loop taking the local steps. See sgp.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"
#include "gossip/gsp_pool.h"
#include "peer/core/settings.h"
#include "peer/lib/sgp.h"
#include "peer/config/member.h"
#include "peer/net/node.h"
#include "peer/lib/handoff.h"

#define SGP_MAX_OPEN 1024 /* peers open at once in one process */

struct sgp_peer {
    member me;
    cmp_spec codec;
    outer_opts outer;
    node_config config;
    node_result result;
    handoff handoff;
    pthread_t thread;
    FILE *log;
    char loop_err[512]; /* node_run's, copied into handoff.err */
    char err[512];
    int busy;           /* a call is in progress (under registry_mu) */
};

/* Every open peer, so that a stale or foreign pointer is refused (-EBADF)
 * instead of dereferenced. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static sgp_peer *registry[SGP_MAX_OPEN];

static int registry_find(const sgp_peer *p)
{
    for (int i = 0; p && i < SGP_MAX_OPEN; i++)
        if (registry[i] == p)
            return i;
    return -1;
}

/* Start a call on p: -EBADF, -EBUSY, or 0 (end it with leave). */
static int enter(sgp_peer *p)
{
    pthread_mutex_lock(&registry_mu);
    int rc = registry_find(p) < 0 ? -EBADF : p->busy ? -EBUSY : 0;
    if (rc == 0)
        p->busy = 1;
    pthread_mutex_unlock(&registry_mu);
    return rc;
}

static void leave(sgp_peer *p)
{
    pthread_mutex_lock(&registry_mu);
    p->busy = 0;
    pthread_mutex_unlock(&registry_mu);
}

static int fail(sgp_peer *p, int rc, const char *fmt, const char *detail)
{
    snprintf(p->err, sizeof p->err, fmt, detail);
    return rc;
}

const char *sgp_version(void) { return SGP_VERSION; }

#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x) /* a number's macro as a string literal */

/* The size of a struct whose fields end at END: END and the padding after it. */
#define OPTIONS_SIZE_OF(end) (((end) + _Alignof(sgp_options) - 1) / _Alignof(sgp_options) * _Alignof(sgp_options))

/* sgp_options as 0.1.0 had it, up to `verbose`: its last field's end, and
 * its size with the padding after it. A program built with that header
 * calls the function sgp_options_init (below) and passes that size. */
#define OPTIONS_0_1_END (offsetof(sgp_options, verbose) + sizeof(int))
#define OPTIONS_0_1_SIZE OPTIONS_SIZE_OF(OPTIONS_0_1_END)

/* sgp_options as 0.2.0 had it, up to `outer` (its sgp_options_init is the
 * macro, so it passes this size itself). */
#define OPTIONS_0_2_END (offsetof(sgp_options, outer) + sizeof(const char *))
#define OPTIONS_0_2_SIZE OPTIONS_SIZE_OF(OPTIONS_0_2_END)
_Static_assert(OPTIONS_0_1_SIZE < OPTIONS_0_2_SIZE && OPTIONS_0_2_SIZE < sizeof(sgp_options),
               "each release's sgp_options has a size of its own: the size tells the header");

/* 0.3.0's struct ended at `overlap`; 0.4.0's gossip_threads sits in what was
 * its padding, so both have one size. A 0.3.0 program's struct had that
 * padding written by sgp_options_init (the library's defaults: 0), which
 * is what makes it safe to read as 0.4.0's. */
#define OPTIONS_0_3_END (offsetof(sgp_options, overlap) + sizeof(int))
_Static_assert(offsetof(sgp_options, gossip_threads) >= OPTIONS_0_3_END, "0.4.0's fields follow 0.3.0's");

/* 0.4.0's (and 0.3.0's) struct ends at `gossip_threads`. */
#define OPTIONS_0_4_END (offsetof(sgp_options, gossip_threads) + sizeof(int))
#define OPTIONS_0_4_SIZE OPTIONS_SIZE_OF(OPTIONS_0_4_END)
_Static_assert(OPTIONS_0_2_SIZE < OPTIONS_0_4_SIZE && OPTIONS_0_4_SIZE < sizeof(sgp_options),
               "0.5.0's sgp_options has a size of its own");

void sgp_options_init_sized(sgp_options *o, size_t size)
{
    if (!o)
        return;
    peer_settings s;
    peer_settings_defaults(&s);
    sgp_options d = {.size = size, .id = -1, .dead_timeout = s.dead_timeout, .round_timeout = s.round_timeout,
                     .seed = s.train.seed, .local_steps = s.local_steps, .gather = -1};
    memcpy(o, &d, size < sizeof d ? size : sizeof d); /* never past the caller's struct */
}

/* 0.1.0's entry point, for programs built with its header (where it was a
 * function, not the macro): its struct is OPTIONS_0_1_SIZE bytes. */
void(sgp_options_init)(sgp_options *o) { sgp_options_init_sized(o, OPTIONS_0_1_SIZE); }

/* The caller's options as this version's struct: the fields its header had,
 * defaults for the rest. -EINVAL for a size no version of sgp.h had. */
static int options_of(const sgp_options *o, sgp_options *full)
{
    if (!o)
        return -EINVAL;
    size_t known; /* the bytes of fields the caller's header had */
    if (o->size == sizeof *o)
        known = sizeof *o;
    else if (o->size == OPTIONS_0_4_SIZE)
        known = OPTIONS_0_4_END;
    else if (o->size == OPTIONS_0_2_SIZE)
        known = OPTIONS_0_2_END;
    else if (o->size == OPTIONS_0_1_SIZE)
        known = OPTIONS_0_1_END;
    else
        return -EINVAL;
    sgp_options_init_sized(full, sizeof *full);
    memcpy(full, o, known);
    full->size = sizeof *full;
    return 0;
}

static int check_options(const sgp_options *o, const float *params, size_t n, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!o)
        why = "options not set up by sgp_options_init (their size is not one this library knows)";
    else if (!o->cluster)
        why = "no cluster file (options.cluster)";
    else if (o->rounds < 1)
        why = "options.rounds must be at least 1";
    else if (!params || n == 0)
        why = "no parameters";
    else if (n > CMP_MAX_N)
        why = "more than 2^31 - 1 parameters";
    else if (o->rounds_per_epoch < 0 || o->tau < 0 || o->tau > 1000 || o->step < 0 || o->step > 1 ||
             o->codec_warmup < 0 || o->checkpoint_every < 0 || o->round_deadline < 0)
        why = "an option is out of range (rounds_per_epoch, tau 0..1000, step 0..1, codec_warmup, "
              "checkpoint_every, round_deadline)";
    else if (o->local_steps < 1 || o->local_steps > 100000)
        why = "options.local_steps must be 1 to 100000";
    else if (o->overlap != 0 && o->overlap != 1)
        why = "options.overlap must be 0 or 1";
    else if (o->gossip_threads < 0 || o->gossip_threads > GSP_POOL_MAX)
        why = "options.gossip_threads must be 0 (the host's cores) to " TEXT_OF(GSP_POOL_MAX);
    else if (!(o->gather < 0 || o->gather <= 1)) /* (a NaN too) */
        why = "options.gather must be below 0 (push-sum) or an error-feedback decay of 0 to 1";
    else if (!(o->dead_timeout >= 0.01) || !(o->round_timeout >= 0.01))
        why = "dead_timeout and round_timeout must be at least 0.01 s";
    if (why)
        snprintf(err, errlen, "sgp_open: %s", why);
    return why ? -EINVAL : 0;
}

/* The network thread: the node's loop until the run ends or is stopped. */
static void *network_thread(void *arg)
{
    sgp_peer *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the caller's threads take its signals; EPIPE, not SIGPIPE */
    node_run(&p->config, NULL, NULL, &p->result, p->loop_err, sizeof p->loop_err);
    return NULL;
}

static void peer_free(sgp_peer *p)
{
    handoff_free(&p->handoff);
    node_result_free(&p->result);
    if (p->log)
        fclose(p->log);
    member_close(&p->me);
    free(p);
}

static int configure(sgp_peer *p, const sgp_options *o, float *params, size_t n, char *err, size_t errlen)
{
    int rc;
    const char *codec = o->codec ? o->codec : "none";
    if (strcmp(codec, "exact") != 0) {
        char why[256];
        if (cmp_spec_parse(&p->codec, codec, why, sizeof why) < 0) {
            snprintf(err, errlen, "sgp_open: codec: %s", why);
            return -EINVAL;
        }
    }
    if (o->outer) {
        char why[256];
        if (outer_opts_parse(&p->outer, o->outer, why, sizeof why) < 0) {
            snprintf(err, errlen, "sgp_open: outer: %s", why);
            return -EINVAL;
        }
    }
    if ((rc = member_open(&p->me, o->cluster, o->id, o->key, err, errlen)) < 0)
        return rc == -ESRCH ? -EINVAL : rc;
    if (o->log && !(p->log = fopen(o->log, o->resume ? "a" : "w"))) {
        rc = -errno;
        snprintf(err, errlen, "sgp_open: cannot write %s: %s", o->log, strerror(-rc));
        return rc;
    }
    if ((rc = handoff_init(&p->handoff, params, n, o->rounds, o->rounds_per_epoch)) < 0) {
        snprintf(err, errlen, "sgp_open: %s", strerror(-rc));
        return rc;
    }
    node_config *c = &p->config;
    node_config_defaults(c);
    c->peer.train.seed = o->seed;
    c->cluster = &p->me.cluster, c->key = &p->me.key, c->peer.topology = &p->me.topology, c->id = p->me.id;
    c->peer.tau = o->tau;
    c->peer.local_steps = o->local_steps;
    c->peer.overlap = o->overlap;
    c->peer.gossip_threads = o->gossip_threads;
    c->peer.gather = o->gather >= 0, c->peer.gather_decay = o->gather >= 0 ? (float)o->gather : 0.0f;
    c->peer.outer = p->outer.lr > 0 ? &p->outer : NULL;
    c->peer.codec = strcmp(codec, "exact") ? &p->codec : NULL;
    c->peer.step = o->step, c->peer.codec_warmup = o->codec_warmup;
    c->peer.dead_timeout = o->dead_timeout, c->peer.round_timeout = o->round_timeout, c->peer.round_deadline = o->round_deadline;
    c->checkpoint = o->checkpoint, c->checkpoint_every = o->checkpoint_every, c->resume = o->resume;
    c->log = p->log;
    c->progress = o->verbose ? stderr : NULL;
    c->stepper = handoff_stepper(&p->handoff);
    return 0;
}

int sgp_open(sgp_peer **peer, const sgp_options *o, float *params, size_t n, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || errlen == 0)
        err = scratch, errlen = sizeof scratch;
    err[0] = 0;
    if (!peer) {
        snprintf(err, errlen, "sgp_open: no place for the peer (peer is NULL)");
        return -EINVAL;
    }
    *peer = NULL;
    sgp_options full;
    int rc = check_options(options_of(o, &full) == 0 ? &full : NULL, params, n, err, errlen);
    if (rc < 0)
        return rc;
    sgp_peer *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "sgp_open: out of memory");
        return -ENOMEM;
    }
    if ((rc = configure(p, &full, params, n, err, errlen)) < 0) {
        peer_free(p);
        return rc;
    }
    pthread_mutex_lock(&registry_mu);
    int slot = -1;
    for (int i = 0; slot < 0 && i < SGP_MAX_OPEN; i++)
        if (!registry[i])
            slot = i;
    if (slot >= 0)
        registry[slot] = p;
    pthread_mutex_unlock(&registry_mu);
    if (slot < 0) {
        snprintf(err, errlen, "sgp_open: %d peers are open in this process already", SGP_MAX_OPEN);
        peer_free(p);
        return -EMFILE;
    }
    if ((rc = -pthread_create(&p->thread, NULL, network_thread, p)) < 0) {
        snprintf(err, errlen, "sgp_open: cannot start the network thread: %s", strerror(-rc));
        goto undo;
    }
    rc = handoff_round(&p->handoff, params, 0); /* the cluster is up and round 0 (or the resumed round) may start */
    if (rc == HANDOFF_HANDED)
        return *peer = p, 0;
    if (rc == HANDOFF_ENDED) {
        rc = -ECANCELED;
        snprintf(err, errlen, "sgp_open: the run ended before its first round");
    } else
        snprintf(err, errlen, "sgp_open: %s", p->handoff.err);
    pthread_join(p->thread, NULL);
undo:
    pthread_mutex_lock(&registry_mu);
    registry[slot] = NULL;
    pthread_mutex_unlock(&registry_mu);
    peer_free(p);
    return rc;
}

int sgp_step(sgp_peer *p, float *params, size_t n)
{
    int rc = enter(p);
    if (rc < 0)
        return rc;
    if (!params || n != p->handoff.stepper.dim) {
        char want[32];
        snprintf(want, sizeof want, "%zu", p->handoff.stepper.dim);
        rc = fail(p, -EINVAL, "sgp_step: params must be %s floats", want);
    } else if ((rc = handoff_round(&p->handoff, params, 1)) < 0)
        fail(p, rc, "%s", p->handoff.err);
    else
        rc = rc == HANDOFF_ENDED ? SGP_DONE : 0;
    leave(p);
    return rc;
}

int sgp_status_get(sgp_peer *p, sgp_status *s)
{
    int rc = enter(p);
    if (rc < 0)
        return rc;
    if (!s)
        rc = fail(p, -EINVAL, "%s", "sgp_status_get: s is NULL");
    else {
        node_status ns;
        handoff_status(&p->handoff, &ns);
        *s = (sgp_status){.id = ns.id, .peers = ns.peers, .round = ns.round, .start_round = ns.start_round, .local_steps = ns.local_steps,
                          .weight = ns.weight, .neighbours = ns.neighbours,
                          .neighbours_alive = ns.neighbours_alive, .bytes_sent = ns.bytes_sent,
                          .bytes_received = ns.bytes_received, .messages_sent = ns.messages_sent,
                          .messages_absorbed = ns.messages_absorbed, .late_marks = ns.late_marks,
                          .catch_ups = ns.catch_ups, .neighbours_lost = ns.neighbours_lost,
                          .checkpoints = ns.checkpoints, .done = ns.ended};
    }
    leave(p);
    return rc;
}

int sgp_checkpoint(sgp_peer *p)
{
    int rc = enter(p);
    if (rc < 0)
        return rc;
    if (!p->config.checkpoint)
        rc = fail(p, -EINVAL, "%s", "sgp_checkpoint: the peer was opened without options.checkpoint");
    else if ((rc = handoff_checkpoint(&p->handoff)) < 0)
        fail(p, rc, "sgp_checkpoint: %s", rc == -ESHUTDOWN ? "the run is over" : strerror(-rc));
    leave(p);
    return rc;
}

int sgp_close(sgp_peer *p)
{
    pthread_mutex_lock(&registry_mu);
    int slot = registry_find(p);
    int rc = slot < 0 ? -EBADF : p->busy ? -EBUSY : 0;
    if (rc == 0)
        registry[slot] = NULL;
    pthread_mutex_unlock(&registry_mu);
    if (rc < 0)
        return rc;
    handoff_stop(&p->handoff);
    pthread_join(p->thread, NULL);
    rc = p->handoff.rc < 0 ? p->handoff.rc : 0;
    peer_free(p);
    return rc;
}

const char *sgp_error(const sgp_peer *p)
{
    pthread_mutex_lock(&registry_mu);
    int open = registry_find(p) >= 0;
    pthread_mutex_unlock(&registry_mu);
    return open ? p->err : "not an open sgp peer";
}
