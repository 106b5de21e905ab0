/* Combining the peers' results; see launch_combine.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_model.h"
#include "peer/core/memory.h"
#include "peer/launch/launch_combine.h"
#include "peer/launch/launch_ledger.h"
#include "peer/store/json.h"
#include "peer/store/modelfile.h"
#include "peer/store/summary.h"
#include "peer/store/wholefile.h"

/* RUN/peerI.model (sgp peer --save-model) into m's parameters, then z. */
static int read_model(const char *dir, int i, nn_model *m, float *z, char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%.1024s/peer%d.model", dir, i);
    int rc = modelfile_init_params(path, m, err, errlen);
    if (rc == 0)
        memcpy(z, m->params, m->n_params * sizeof *z);
    return rc;
}

/* A peer whose model is not in the average: killed for good, or left. */
static int without(const launch_outcome *o, int i)
{
    return (o->absent && o->absent[i]) || (o->left && o->left[i]);
}

/* The model the peers trained, built from the first finished peer's file. */
static int first_model(const launch_outcome *o, const nn_dataset *test, nn_model *m, char *err, size_t errlen)
{
    int i = 0;
    while (i < o->n && without(o, i))
        i++;
    if (i == o->n) {
        snprintf(err, errlen, "no peer has a model (every one was killed or left)");
        return -ENOENT;
    }
    char path[1100];
    snprintf(path, sizeof path, "%.1024s/peer%d.model", o->run_dir, i);
    int rc = modelfile_load(path, NULL, NN_EVAL_ONLY, m, NULL, err, errlen);
    if (rc == 0 && (m->in_c != test->c || m->in_h != test->h || m->in_w != test->w || m->n_classes < test->n_classes)) {
        snprintf(err, errlen, "%s: a model for %dx%dx%d inputs, the test set is %dx%dx%d", path, m->in_c, m->in_h,
                 m->in_w, test->c, test->h, test->w);
        nn_model_free(m);
        rc = -EINVAL;
    }
    return rc;
}

/* RUN/peerI.json, which must be peer i's of this run. */
static int read_summary(const launch_outcome *o, int i, size_t dim, summary_peer *s, char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%.1024s/peer%d.json", o->run_dir, i);
    int rc = summary_peer_read(path, s, err, errlen);
    if (rc == 0 && (s->id != i || s->peers != o->n || s->parameters != (int64_t)dim)) {
        snprintf(err, errlen, "%s: peer %lld of %lld with %lld parameters, expected peer %d of %d with %zu", path,
                 (long long)s->id, (long long)s->peers, (long long)s->parameters, i, o->n, dim);
        rc = -ESTALE;
    }
    return rc;
}

typedef struct totals {
    int k; /* peers with a model */
    double acc_min, acc_sum, loss_max, loss_sum, bytes, rounds, wsum;
    double step, gossip, frame, wait, idle; /* the peers' time breakdowns, summed */
    double frame_pool;                      /* and their big frames' framing and crypto on the thread pool */
    int mem_peer;                           /* the peer with the largest peak RSS, and its memory by part */
    mem_parts mem;
} totals;

/* Pass 1: sum w z into acc (double), and the summaries' totals. */
static int sum_models(const launch_outcome *o, nn_model *m, float *z, double *acc, totals *t, char *err,
                      size_t errlen)
{
    const size_t dim = m->n_params;
    *t = (totals){.acc_min = 1, .rounds = INFINITY, .mem_peer = -1};
    for (int i = 0; i < o->n; i++) {
        if (without(o, i))
            continue;
        summary_peer s;
        int rc = read_summary(o, i, dim, &s, err, errlen);
        if (rc == 0)
            rc = read_model(o->run_dir, i, m, z, err, errlen);
        if (rc < 0)
            return rc;
        double w = s.weight > 0 ? s.weight : 1.0;
        for (size_t d = 0; d < dim; d++)
            acc[d] += w * z[d];
        t->k++, t->wsum += w;
        t->acc_min = fmin(t->acc_min, s.test_accuracy), t->acc_sum += s.test_accuracy;
        t->loss_max = fmax(t->loss_max, s.test_loss), t->loss_sum += s.test_loss;
        t->bytes += (double)s.bytes_sent, t->rounds = fmin(t->rounds, (double)s.rounds);
        t->step += s.step_seconds, t->gossip += s.gossip_seconds, t->frame += s.frame_seconds;
        t->wait += s.wait_seconds, t->idle += s.idle_seconds, t->frame_pool += s.frame_pool_seconds;
        if (t->mem_peer < 0 || (size_t)s.peak_rss_bytes > t->mem.peak_rss) {
            t->mem_peer = i;
            t->mem = (mem_parts){.model = (size_t)s.memory_model_bytes, .gossip = (size_t)s.memory_gossip_bytes,
                                 .codec = (size_t)s.memory_codec_bytes, .in_flight = (size_t)s.memory_in_flight_bytes,
                                 .data = (size_t)s.memory_data_bytes, .runtime = (size_t)s.memory_runtime_bytes,
                                 .rss = (size_t)s.rss_bytes, .peak_rss = (size_t)s.peak_rss_bytes};
        }
    }
    return 0;
}

/* Pass 2: the consensus distance, mean squared distance to the average over its squared norm. */
static int consensus_distance(const launch_outcome *o, nn_model *m, const float *avg, float *z, double *cd,
                              char *err, size_t errlen)
{
    const size_t dim = m->n_params;
    double sum = 0, norm = 0;
    int k = 0;
    for (int i = 0; i < o->n; i++) {
        if (without(o, i))
            continue;
        int rc = read_model(o->run_dir, i, m, z, err, errlen);
        if (rc < 0)
            return rc;
        for (size_t d = 0; d < dim; d++) {
            double e = (double)z[d] - avg[d];
            sum += e * e;
        }
        k++;
    }
    for (size_t d = 0; d < dim; d++)
        norm += (double)avg[d] * avg[d];
    *cd = norm > 0 && k ? sum / k / norm : 0;
    return 0;
}

/* mass: NULL when some finished peer's ledger could not be read. */
static void put_summary(json_obj *j, const launch_outcome *o, const totals *t, const nn_model *m, float acc,
                        float loss, double cd, const launch_mass *mass)
{
    json_str(j, "command", "launch");
    json_str(j, "run_dir", o->run_dir);
    json_int(j, "peers", o->n);
    json_int(j, "peers_finished", t->k);
    json_int(j, "faults_injected", o->faults);
    json_str(j, "model", m->spec);
    json_int(j, "parameters", (long long)m->n_params);
    json_num(j, "test_accuracy", acc);
    json_num(j, "test_loss", loss);
    json_num(j, "test_accuracy_min", t->acc_min);
    json_num(j, "test_accuracy_mean", t->acc_sum / t->k);
    json_num(j, "test_loss_max", t->loss_max);
    json_num(j, "test_loss_mean", t->loss_sum / t->k);
    if (nn_model_is_seq(m)) {
        json_int(j, "context", m->tokens);
        json_num(j, "test_bits_per_byte", nn_bits_per_byte(loss));
        json_num(j, "test_bits_per_byte_max", nn_bits_per_byte(t->loss_max));
    }
    json_num(j, "consensus_distance", cd);
    json_num(j, "bytes_sent", t->bytes);
    json_num(j, "rounds", t->rounds);
    json_num(j, "wall_seconds", o->wall_seconds);
    /* per peer, the mean over the finished ones */
    json_num(j, "step_seconds", t->step / t->k);
    json_num(j, "gossip_seconds", t->gossip / t->k);
    json_num(j, "frame_seconds", t->frame / t->k);
    json_num(j, "wait_seconds", t->wait / t->k);
    json_num(j, "idle_seconds", t->idle / t->k);
    json_num(j, "frame_pool_seconds", t->frame_pool / t->k);
    json_int(j, "memory_peer", t->mem_peer);
    mem_json(j, &t->mem);
    if (mass) {
        json_num(j, "weight_total", mass->held + mass->in_flight);
        json_num(j, "weight_in_flight", mass->in_flight);
        json_num(j, "weight_rescaled", mass->rescaled);
        json_num(j, "weight_adopted", mass->adopted);
    }
}

/* The average model to RUN/model.safetensors and --save-model, the summary in its metadata. */
static int save_average(const launch_outcome *o, const nn_model *m, const float *avg, const char *summary,
                        char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%.1024s/model.safetensors", o->run_dir);
    int rc = modelfile_save(path, m, avg, o->data, summary, err, errlen);
    if (rc == 0 && o->save_model)
        rc = modelfile_write(o->model_format, o->save_model, m, avg, o->data, summary, err, errlen);
    return rc;
}

int launch_combine(const launch_outcome *o, const char *summary, FILE *out, char *err, size_t errlen)
{
    nn_dataset train = {0}, test = {0};
    nn_model m = {0};
    int rc = nn_data_load(o->data, o->context, &train, &test, err, errlen);
    if (rc == 0)
        rc = first_model(o, &test, &m, err, errlen);
    const size_t dim = m.n_params;
    float *z = rc == 0 ? malloc(dim * sizeof *z) : NULL, *avg = rc == 0 ? malloc(dim * sizeof *avg) : NULL;
    double *acc = rc == 0 ? calloc(dim, sizeof *acc) : NULL, cd = 0;
    if (rc == 0 && (!z || !avg || !acc)) {
        snprintf(err, errlen, "out of memory for the average of %zu parameters", dim);
        rc = -ENOMEM;
    }
    totals t = {0};
    if (rc == 0)
        rc = sum_models(o, &m, z, acc, &t, err, errlen);
    float loss = 0, accuracy = 0;
    if (rc == 0) {
        for (size_t d = 0; d < dim; d++) /* sum x / sum w, as sgp sim reports it: x_i = w_i z_i */
            avg[d] = (float)(acc[d] / t.wsum);
        rc = consensus_distance(o, &m, avg, z, &cd, err, errlen);
    }
    launch_mass mass;
    char why[1200];
    const int have_mass = rc == 0 && launch_ledger(o->run_dir, o->n, o->absent, &mass, why, sizeof why) == 0;
    if (rc == 0) {
        nn_model_evaluate(&m, avg, &test, &loss, &accuracy);
        if (test.text)
            fprintf(out,
                    "validation loss %.4f (%.4f bits/byte, next byte %.2f%%) average model of %d peers, peers worst "
                    "%.4f (%.4f bits/byte) mean %.4f; consensus distance %.2e\n",
                    loss, nn_bits_per_byte(loss), 100 * accuracy, t.k, t.loss_max, nn_bits_per_byte(t.loss_max),
                    t.loss_sum / t.k, cd);
        else
            fprintf(out,
                    "test accuracy %.2f%% (average model of %d peers), peers min %.2f%% mean %.2f%%; consensus "
                    "distance %.2e\n",
                    100 * accuracy, t.k, 100 * t.acc_min, 100 * t.acc_sum / t.k, cd);
        fprintf(out, "%.0f rounds, %.1f MB sent, %.1f wall s, %d faults injected; run directory %s\n", t.rounds,
                t.bytes / 1e6, o->wall_seconds, o->faults, o->run_dir);
        fprintf(out, "time per peer: local step %.2f s, gossip %.2f s, framing and crypto %.2f s, waiting %.2f s, "
                "idle %.2f s", t.step / t.k, t.gossip / t.k, t.frame / t.k, t.wait / t.k, t.idle / t.k);
        if (t.frame_pool / t.k >= 0.005) /* (frames of 4 MiB or more: whole models, dense codecs at scale) */
            fprintf(out, "; beside them, big frames' framing and crypto on the thread pool %.2f s", t.frame_pool / t.k);
        fputc('\n', out);
        if (t.mem_peer >= 0) {
            fprintf(out, "peer %d (the largest) ", t.mem_peer);
            mem_print(out, &t.mem, 1);
        }
        if (!have_mass)
            fprintf(out, "push-sum weight not known: %s\n", why);
        else
            fprintf(out, "push-sum weight %.9g of the %d finished peers (%.3g of it in flight at the end)\n",
                    mass.held + mass.in_flight, t.k, mass.in_flight);
        if (have_mass && (mass.rescaled != 0 || mass.adopted != 0))
            fprintf(out,
                    "comebacks: %+.3g by resumes' rescaling, -%.3g of shares taken as a baseline on in-edges "
                    "(gossip/GUARANTEES.md, \"Mass at comebacks\")\n",
                    mass.rescaled, mass.adopted);
    }
    json_obj j;
    if (rc == 0 && summary) {
        json_open(&j, summary);
        put_summary(&j, o, &t, &m, accuracy, loss, cd, have_mass ? &mass : NULL);
        if ((rc = json_close(&j)) < 0)
            snprintf(err, errlen, "%s", j.err);
    }
    if (rc == 0) {
        json_open(&j, "-");
        put_summary(&j, o, &t, &m, accuracy, loss, cd, have_mass ? &mass : NULL);
        char *text = json_close_text(&j);
        rc = save_average(o, &m, avg, text, err, errlen);
        free(text);
        if (rc == 0)
            fprintf(out, "average model in %s/model.safetensors%s%s (sgp eval --model-file FILE)\n", o->run_dir,
                    o->save_model ? " and " : "", o->save_model ? o->save_model : "");
    }
    free(z), free(avg), free(acc);
    nn_model_free(&m);
    nn_dataset_free(&train), nn_dataset_free(&test);
    return rc;
}
