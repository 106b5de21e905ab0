/* Parsing of the shared gossip options. */
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/gossip_opts.h"
#include "gossip/gsp_pool.h"

void gossip_opts_defaults(gossip_opts *o)
{
    memset(o, 0, sizeof *o);
    o->codec_text = "none";
    o->outer_text = "none";
}

int gossip_opts_parse(gossip_opts *o, peer_settings *s, const char *cmd, int c, const char *arg)
{
    switch (c) {
    case GOPT_SHARD:
        if (strcmp(arg, "iid") == 0) {
            s->shard_alpha = 0;
            return 0;
        }
        if (strncmp(arg, "dirichlet:", 10) == 0)
            return cli_double(cmd, "--shard dirichlet:ALPHA", arg + 10, 1e-6, 1e6, &s->shard_alpha);
        return cli_usage(cmd, "--shard expects iid or dirichlet:ALPHA, got '%s'", arg);
    case GOPT_TAU:
        return cli_int(cmd, "--tau", arg, 0, 1000, &s->tau);
    case GOPT_CODEC:
        o->codec_text = arg, o->codec_given = 1;
        return 0;
    case GOPT_STEP:
        return cli_double(cmd, "--step", arg, 1e-6, 1, &s->step);
    case GOPT_CWARM:
        return cli_double(cmd, "--codec-warmup", arg, 0, 1e6, &s->codec_warmup);
    case GOPT_LOCAL:
        o->local_given = 1;
        return cli_int(cmd, "--local-steps", arg, 1, 100000, &s->local_steps);
    case GOPT_OUTER:
        o->outer_text = arg;
        return 0;
    case GOPT_ALONE:
        return cli_double(cmd, "--alone-wait", arg, 0, 1e6, &s->alone_wait);
    case GOPT_OVERLAP:
        s->overlap = 1;
        return 0;
    case GOPT_GATHER: {
        double d;
        int rc = cli_double(cmd, "--gather", arg, 0, 1, &d);
        s->gather = rc == 0, s->gather_decay = (float)d, o->gather_given = 1;
        return rc;
    }
    case GOPT_RECIPE:
        if (strcmp(arg, "lm") != 0)
            return cli_usage(cmd, "--recipe expects lm, got '%s'", arg);
        o->recipe = arg;
        return 0;
    case GOPT_GTHREADS:
        return cli_int(cmd, "--gossip-threads", arg, 0, GSP_POOL_MAX, &s->gossip_threads);
    }
    return CLI_NOT_MINE;
}

int gossip_opts_check(gossip_opts *o, peer_settings *s, const char *cmd)
{
    char err[256];
    if (o->recipe) { /* (what was given beside it stays) */
        if (!o->codec_given)
            o->codec_text = GOSSIP_RECIPE_LM_CODEC;
        if (!o->gather_given)
            s->gather = 1, s->gather_decay = GOSSIP_RECIPE_LM_DECAY;
        if (!o->local_given)
            s->local_steps = GOSSIP_RECIPE_LM_LOCAL;
    }
    if (strcmp(o->codec_text, "exact") != 0 && cmp_spec_parse(&o->codec, o->codec_text, err, sizeof err) < 0)
        return cli_usage(cmd, "--codec: %s", err);
    if (outer_opts_parse(&o->outer, o->outer_text, err, sizeof err) < 0)
        return cli_usage(cmd, "--outer %s", err);
    s->codec = strcmp(o->codec_text, "exact") == 0 ? NULL : &o->codec;
    s->outer = &o->outer;
    return 0;
}
