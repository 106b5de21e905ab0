/* The defaults every peer's settings start from. */
#include <string.h>

#include "peer/core/settings.h"

void peer_settings_defaults(peer_settings *s)
{
    memset(s, 0, sizeof *s); /* iid shards, tau 0, uncompressed, no outer step, derived deadline */
    train_opts_defaults(&s->train);
    s->local_steps = 1;
    s->dead_timeout = 5.0;
    s->round_timeout = 30.0;
}
