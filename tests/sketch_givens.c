/* The givens of the usage sketches in the headers' comments: the variables
 * a sketch uses without declaring them, by header (a line `//@ HEADER`
 * opens its section). tests/check_sketches.sh compiles each header's
 * sketches after its section; what comes before the first section is given
 * to every sketch. Not a program: it is never compiled on its own. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char err[256];
extern int rc;

//@ compress/bitio.h
extern uint8_t *out, *in;
extern size_t cap, len;
extern uint64_t value, gap;
extern int k;

//@ compress/cmp.h
extern const cmp_spec *s;
extern const float *x;
extern float *dst;
extern size_t n, cap;
extern uint64_t seed;
extern void *work;
extern uint8_t *out;
extern long len;

//@ compress/cmp_ef.h
extern cmp_spec spec;
extern const float *g;
extern size_t n, cap;
extern uint64_t seed;
extern uint8_t *out;

//@ compress/cmp_rng.h
extern uint64_t seed, i;

//@ compress/cmp_select.h
extern const float *x;
extern float *val;
extern uint32_t *idx;
extern size_t n, k;
extern void *work;
extern uint64_t seed;
float value_at(size_t i);

//@ gossip/gsp.h
extern int id, n_peers, tau;
extern size_t dim;
extern const float *x0;
extern cmp_spec spec;
extern uint64_t seed;
extern float step;
extern topo t;
extern const uint8_t *alive;

//@ gossip/gsp_gather.h
extern int id, n_peers;
extern size_t dim;
extern const float *x0;
extern cmp_spec sparseloco;
extern uint64_t seed;

//@ gossip/gsp_pool.h
#include "gossip/gsp.h"
extern gsp_peer g;

//@ gossip/gsp_pace.h
extern gsp_pace_config config;
extern gsp_peer g;
extern int id, q, done, max, n_inbox;
extern long r;
extern double now;
extern int lost[];
extern const gsp_msg *inbox;
extern const uint8_t *busy;
extern topo_out out;
extern gsp_msg msgs[TOPO_MAX_OUT];

//@ nn/nn_batch.h
extern nn_dataset train;
extern uint64_t seed, peer_id;

//@ nn/nn_layers.h
extern const float *x, *W, *b, *dy;
extern float *y, *dW, *db, *dx;
extern int B, in, out;

//@ nn/nn_model.h
#include "nn/nn_optim.h"
extern uint64_t seed;
extern const float *x;
extern const int *y;
extern int B, correct;
extern nn_sgd opt;
extern float lr;

//@ nn/nn_optim.h
#include "nn/nn_model.h"
extern nn_model m;
extern long step, steps_per_epoch;

//@ nn/nn_rng.h
extern uint64_t run_seed, stream_id;

//@ nn/nn_seq.h
#include "nn/nn_layers.h"
extern const float *ids, *Wte, *Wpe, *Wqkv, *bqkv, *datt;
extern float *x, *qkv, *att, *dqkv, *dx, *dWpe, *dWte;
extern int B, T, C, H, vocab;

//@ nn/nn_vmath.h
extern int i, n;
extern const float *x;
extern float *y;

//@ peer/cmd/cli.h
extern const char *cmd;
extern char **argv;

//@ peer/cmd/gossip_opts.h
#include "peer/cmd/cli.h"
extern peer_settings settings;
extern const char *cmd;
extern int argc;
extern char **argv;

//@ peer/cmd/train_cli.h
#include "peer/cmd/cli.h"
extern int argc;
extern char **argv;

//@ peer/config/cluster.h
#include "topologies/topo.h"
extern sec_hs hs;
extern uint32_t me;
extern sec_keypair kp, keys[];
extern topo t;
extern parse_error te;
extern int n;
extern FILE *f;

//@ peer/config/credential.h
#include <time.h>
extern const uint8_t peer_pk[32], admit_pk[32];

//@ peer/config/keyfile.h
#include "peer/config/cluster.h"
extern sec_hs hs;
extern cluster c;
extern uint8_t cid[SEC_CLUSTER_ID_BYTES];

//@ peer/config/member.h
#include "peer/net/node.h"

//@ peer/core/engine.h
extern peer_settings settings;
extern round_plan plan;
extern int id;
extern const nn_dataset *train;
extern const float *x0;
extern size_t dim;
extern uint64_t incarnation;
extern double now;
extern nn_model model;
int send_frame(const engine_send *s);

//@ peer/core/settings.h
#include "topologies/topo.h"
extern topo t;

//@ peer/core/local_step.h
extern train_opts opts;
extern nn_dataset shard;
extern int peer_id, batch_size;
extern size_t n_params;
extern nn_model model;
extern gsp_peer gossip_peer;
extern float lr;

//@ peer/core/memory.h
#include "peer/core/round.h"
extern round_peer rp;
extern nn_model model;
extern nn_dataset train;

//@ peer/core/outer.h
extern size_t dim;
extern gsp_peer g;

//@ peer/core/reference.h
enum { N = 8 };
extern peer_settings settings;
extern round_plan plan;
extern const nn_dataset *train;
extern nn_model model;
extern int i;
extern float z[];

//@ peer/core/round.h
extern peer_settings settings;
extern const nn_dataset *train;
extern int id, n_peers, local_steps;
extern const float *x0;
extern size_t dim;
extern double now;
extern nn_model model;
extern gsp_msg msg;
extern round_nack_fn nack;
extern void *ctx;
extern const uint8_t *busy;

//@ peer/launch/launch.h
extern char **argv_for_each_peer;
extern int n;

//@ peer/launch/launch_faults.h
extern int n_peers;
extern const long *rounds;
extern const pid_t *pids;
extern double now;
extern fault_restart_fn restart;
extern void *ctx;

//@ peer/launch/launch_hosts.h
extern int n;

//@ peer/launch/launch_ledger.h
extern const uint8_t *absent;

//@ peer/launch/launch_prepare.h
extern launch_host *where;

//@ peer/launch/launch_ssh.h
extern launch_host *where;
extern int n, i;
extern char **peer_argv;

//@ peer/lib/sgp.h
extern float *params;
extern size_t n;
void my_optimizer_step(float *params, size_t n);

//@ peer/net/net.h
extern uv_loop_t *loop;
extern cluster c;
extern int my_id, n_nb, j;
extern const int *nb;
extern sec_keypair kp;
extern void *ctx;
extern const uint8_t *msg;
extern size_t len;

//@ peer/net/net_addr.h
#include <uv.h>
extern const cluster *c;
extern int id, my_id;
extern uv_connect_t req;
extern uv_tcp_t tcp;
extern uv_connect_cb on_connect;
extern struct sockaddr_storage from;

//@ peer/net/node.h
extern nn_dataset train, test;

//@ peer/lib/handoff.h
extern size_t dim;
extern long rounds, rounds_per_epoch;
extern float *x0;
extern node_config c;
extern node_result result;

//@ peer/sim/sim.h
extern nn_dataset train, test;

//@ peer/sim/sim_dst.h
extern uint64_t seed;

//@ peer/sim/sim_queue.h
#include "peer/sim/sim_engine.h"
extern double t;
extern int peer;
extern long msg_slot;

//@ peer/store/ckpt.h
extern size_t d;
extern nn_optimizer opt;
extern nn_batcher batches;
extern gsp_peer g;

//@ peer/store/json.h
extern FILE *log_file;
extern const char *text;
extern size_t len;
extern double acc;
extern char model[64];
typedef struct my_struct { int64_t round; } my_struct;

//@ peer/store/modelfile.h
extern nn_model m;
extern const char *summary_json;

//@ peer/store/progress.h
extern long done, total;

//@ peer/store/roundlog.h
extern FILE *log_file;
extern const char *line;

//@ peer/store/safetensors.h
extern const int64_t dims[2];
extern const float *data;
extern size_t max_bytes;

//@ peer/store/version.h
#include "peer/store/safetensors.h"
extern st_writer w;

//@ peer/store/wholefile.h
extern char *text, *buf;
extern const uint8_t *secret;
extern size_t len, n;

//@ peer/wire/sec.h
#include "peer/config/cluster.h"
#include "peer/config/keyfile.h"
extern cluster c;
extern uint8_t cid[SEC_CLUSTER_ID_BYTES];
extern const uint8_t *in;
extern size_t len, have, cap;
extern uint8_t *msg, *frame, *buf;

//@ peer/wire/wire.h
extern size_t dim;
extern const cmp_spec *codec;
extern gsp_msg msgs[TOPO_MAX_OUT];
extern int k, peer, self;
extern const uint8_t *plain;
extern size_t plain_len;
extern gsp_peer gsp;

//@ tests/exact_copy.h
extern const uint8_t *msg;
extern size_t len;
int decode(const uint8_t *in, size_t len);

//@ tests/sgp_run.h
extern char *argv[];

//@ topologies/topo.h
extern long r;
extern int peer;
extern const uint8_t *alive;

//@ topologies/parse_error.h
#include "topologies/topo.h"
extern topo t;
extern const char *path;

//@ topologies/topo_impl.h
extern topo *t;
extern int n, phases, weighted;
extern size_t n_edges;
extern parse_error *e;

//@ topologies/topo_lex.h
extern const char *text;
extern size_t len;
