/* Directed, possibly time-varying communication graphs for push-sum.
 *
 *   topo t = {0};
 *   parse_error e;
 *   if (topo_load(&t, "topologies/exp8.topo", &e) < 0)
 *       fprintf(stderr, "%s\n", parse_error_text(&e, err, sizeof err));   // "FILE:LINE: ..."
 *   // or: topo_generate(&t, "exponential", 8, NULL, &e);
 *   topo_out out;
 *   topo_route(&t, r, peer, alive, &out);       // round r's live out-neighbours and weights
 *   for (int k = 0; k < out.n; k++) ... send out.weight[k] * x to out.peer[k] ...
 *   ... keep out.keep * x ...
 *   topo_free(&t);
 *
 * A topology is a schedule of P phases; round r uses phase r mod P. Each phase
 * lists directed edges src -> dst with an optional mixing weight. Without
 * weights a sender with d out-neighbours keeps 1/(d+1) and sends 1/(d+1) on
 * each edge (uniform mixing). With weights, every sender's weights, its kept
 * share included (written as the self-edge i -> i), sum to 1.
 *
 * The file format is topologies/FORMAT.md. No I/O beyond reading the file in
 * topo_load, no clock, no globals: randomness (the random generator) comes
 * from the seed parameter.
 */
#ifndef TOPOLOGIES_TOPO_H
#define TOPOLOGIES_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "topologies/parse_error.h"

#define TOPO_MAX_PEERS 65536
#define TOPO_MAX_OUT 64 /* out-degree of one peer in one phase (its kept share not counted) */
#define TOPO_MAX_PHASES 4096
/* Bounds on what one topology may cost in memory, whatever the input says:
 * the per-phase CSR offsets take n_phases * (n_peers + 1) entries. */
#define TOPO_MAX_PEER_PHASES (1L << 22)
#define TOPO_MAX_EDGES (1L << 22)

typedef struct topo_edge {
    int src, dst;
    double weight; /* < 0: uniform (the phase has no explicit weights) */
} topo_edge;

typedef struct topo {
    int n_peers;
    int n_phases;
    int weighted;      /* explicit weights (all phases), else uniform mixing */
    size_t *phase_at;  /* n_phases + 1 offsets into edges; phase p is edges[phase_at[p] .. phase_at[p+1]) */
    topo_edge *edges;  /* sorted by (phase, src, dst); self-edges only when weighted */
    /* Derived at load: per phase, CSR of out-edges by src and of in-edges by dst. */
    size_t *out_at, *in_at; /* n_phases * (n_peers + 1) offsets */
    int *in_src;            /* sources, grouped like in_at */
    int max_out, max_in;    /* largest out-/in-degree of a peer in one phase (self-edges not counted) */
    char kind[64];     /* generator name and parameters, or "explicit" */
} topo;

/* The routed out-neighbours of one peer in one round. keep + sum(weight) == 1. */
typedef struct topo_out {
    int n;
    int peer[TOPO_MAX_OUT];
    double weight[TOPO_MAX_OUT];
    double keep;
} topo_out;

/* Parse and validate a .topo file (or text already in memory, with name used in
 * messages). Returns 0, or -EBADMSG / -EINVAL / -ENOENT / -ENOMEM with e filled.
 * t is overwritten, not freed first; on failure it is left zeroed. e may be
 * NULL. Explicit weights within 1e-6 of summing to 1 are rescaled so that each
 * sender's shares sum to 1 to double round-off (mass is conserved). */
int topo_load(topo *t, const char *path, parse_error *e);
int topo_parse(topo *t, const char *text, size_t len, const char *name, parse_error *e);

/* Generators, by name (exact edges in topologies/FORMAT.md; L = max(1, ceil(log2 n))):
 * "ring" (i -> i+1), "exponential" (one-peer, L phases: i -> i + 2^p),
 * "n-peer-exponential" ("out=K": i -> i + 2^((p+j) mod L), j < K),
 * "bipartite-exponential" (n even: i -> i + 1, then i + 1 + 2^p),
 * "torus" ("rows=R cols=C", default near-square: right and down neighbours),
 * "complete", "star" ("center=C"), "random" ("out=K seed=S phases=P").
 * params: NULL or "key=value key=value"; kind may carry them too
 * ("random out=2"). t->kind records every parameter, defaults included.
 * Returns 0, or -EINVAL (unknown kind, bad parameter, limits) / -ENOMEM. */
int topo_generate(topo *t, const char *kind, int n_peers, const char *params, parse_error *e);

/* Checks done by topo_load/topo_generate, exposed for tests: ids in range, no
 * duplicate edges, weights summing to 1 per sender, union of the phases
 * strongly connected. Reads only n_peers, n_phases, weighted, phase_at and
 * edges (which must be sorted). Returns 0 or -EINVAL (line 0), -ENOMEM. */
int topo_validate(const topo *t, parse_error *e);

/* Out-neighbours of `peer` in round `round`, routed around dead peers
 * (alive == NULL: everybody is alive). Routing rule: an out-edge whose target
 * is dead is redirected to the next live peer after it (target+1, target+2, ...
 * mod n) that is neither the sender nor already a target this round, and keeps
 * the dead target's weight; if there is none, the weight is kept by the
 * sender. Mass is never sent to a peer known to be dead. Shares are those of
 * the schedule (uniform 1/(d+1) with d the scheduled degree), so routing
 * moves mass, never rescales it. O(d) plus the scan past dead peers. */
void topo_route(const topo *t, long round, int peer, const uint8_t *alive, topo_out *out);

/* The live in-neighbours of `peer` in round `round` as scheduled (NOT
 * rerouted: a message rerouted to a peer is absorbed whenever it comes, nobody
 * waits for it). This is whose round-r messages a peer with staleness bound
 * tau waits for before round r + tau + 1. O(in-degree): in-lists are
 * precomputed per phase. Writes at most max ids (ascending) and returns how
 * many it wrote; max >= t->max_in never drops one (the generators keep
 * max_in <= TOPO_MAX_OUT; an explicit file may reach n_peers - 1). */
int topo_in(const topo *t, long round, int peer, const uint8_t *alive, int *in, int max);

/* How many distinct peers `peer` sends to (*n_out) and hears from (*n_in) over
 * all phases: the edges its push-sum state will hold. 0, or -ENOMEM. */
int topo_degree(const topo *t, int peer, int *n_out, int *n_in);

/* Rounds of pure push-sum averaging (uniform or the topology's weights, all
 * peers alive) until every peer's de-biased vector z_i is within relative
 * error tol of the true average, max_i ||z_i - avg|| / ||avg||, starting from
 * seeded random vectors of dimension dim. Returns 0 and *rounds, or -ETIMEDOUT
 * if max_rounds pass first. Analysis of the schedule, not the gossip code. */
int topo_mix_rounds(const topo *t, int dim, uint64_t seed, double tol, long max_rounds, long *rounds);

/* Write t as a .topo file (the generator line when it came from one, else
 * explicit phases), with `comment` as a leading # comment (may be NULL).
 * Returns 0 or -EIO. */
int topo_write(const topo *t, FILE *f, const char *comment);
/* Graphviz: one digraph, edges labelled with the rounds (phases) they are active in. */
int topo_write_dot(const topo *t, FILE *f);

/* A remark on a valid topology that the user should know, e.g. the
 * exponential graph on a peer count that is not a power of two. Writes it to
 * buf and returns 1, or returns 0 when there is nothing to say. */
int topo_note(const topo *t, char *buf, size_t cap);

/* The shortest text that reads back as exactly w: a short decimal ("0.25"),
 * a fraction ("1/3"), else 17 significant digits. */
void topo_format_weight(double w, char *buf, size_t cap);

void topo_free(topo *t);

#endif
