/* Model files; see modelfile.h and MODELFILE.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/store/modelfile.h"
#include "peer/store/safetensors.h"
#include "peer/store/version.h"
#include "peer/store/wholefile.h"

int modelfile_kind_parse(const char *text, modelfile_kind *kind)
{
    if (!strcmp(text, "safetensors"))
        *kind = MODELFILE_SAFETENSORS;
    else if (!strcmp(text, "raw"))
        *kind = MODELFILE_RAW;
    else
        return -EINVAL;
    return 0;
}

int modelfile_save(const char *path, const nn_model *m, const float *params, const char *data, const char *summary,
                   char *err, size_t errlen)
{
    if (!params)
        params = m->params;
    st_writer w;
    st_writer_init(&w);
    char shape[64], classes[16], count[32];
    snprintf(shape, sizeof shape, "%d,%d,%d", m->in_c, m->in_h, m->in_w);
    snprintf(classes, sizeof classes, "%d", m->n_classes);
    snprintf(count, sizeof count, "%zu", m->n_params);
    int rc = st_writer_meta(&w, "format", MODELFILE_FORMAT);
    rc = rc ? rc : st_writer_meta(&w, "sgp_version", STORE_SGP_VERSION);
    rc = rc ? rc : st_writer_meta(&w, "spec", m->spec);
    rc = rc ? rc : st_writer_meta(&w, "input_shape", shape);
    rc = rc ? rc : st_writer_meta(&w, "input", "float32 NCHW; image pixels as value/255 in [0, 1]");
    rc = rc ? rc : st_writer_meta(&w, "classes", classes);
    rc = rc ? rc : st_writer_meta(&w, "parameters", count);
    rc = rc ? rc : st_writer_meta(&w, "data", data && *data ? data : "embedded");
    if (summary)
        rc = rc ? rc : st_writer_meta(&w, "summary", summary);
    char name[64];
    size_t off, n;
    for (int v = 0; !rc && nn_model_view(m, v, name, sizeof name, &off, &n) == 0; v++) {
        int64_t dims[4];
        const int nd = nn_model_view_shape(m, v, dims);
        rc = st_writer_tensor(&w, name, dims, nd, params + off);
    }
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", path, rc == -ENOMEM ? "out of memory" : "the model does not fit the format");
    else
        rc = st_writer_save(&w, path, err, errlen);
    st_writer_free(&w);
    return rc;
}

int modelfile_save_raw(const char *path, const nn_model *m, const float *params, char *err, size_t errlen)
{
    return wholefile_write(path, params ? params : m->params, m->n_params * sizeof(float), 0644, 0, err, errlen);
}

int modelfile_write(modelfile_kind kind, const char *path, const nn_model *m, const float *params, const char *data,
                    const char *summary, char *err, size_t errlen)
{
    return kind == MODELFILE_RAW ? modelfile_save_raw(path, m, params, err, errlen)
                                 : modelfile_save(path, m, params, data, summary, err, errlen);
}

/* A positive int from metadata, 0 when absent; -EBADMSG when malformed. */
static int meta_int(const st_file *f, const char *key, int *v, const char *path, char *err, size_t errlen)
{
    const char *s = st_meta(f, key);
    *v = 0;
    if (!s)
        return 0;
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || end == s || x < 1 || x > 1 << 24) {
        snprintf(err, errlen, "%s: metadata %s is '%s', not a positive count", path, key, s);
        return -EBADMSG;
    }
    *v = (int)x;
    return 0;
}

static int arch_of(const st_file *f, const char *path, modelfile_arch *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    const char *spec = st_meta(f, "spec"), *shape = st_meta(f, "input_shape"), *data = st_meta(f, "data");
    if (spec && strlen(spec) >= sizeof a->spec) {
        snprintf(err, errlen, "%s: its model spec is longer than %zu characters", path, sizeof a->spec - 1);
        return -EBADMSG;
    }
    if (spec)
        snprintf(a->spec, sizeof a->spec, "%s", spec);
    if (data)
        snprintf(a->data, sizeof a->data, "%s", data);
    if (shape) {
        char tail;
        if (sscanf(shape, "%d,%d,%d%c", &a->c, &a->h, &a->w, &tail) != 3 || a->c < 1 || a->h < 1 || a->w < 1 ||
            a->c > 4096 || a->h > 65536 || a->w > 65536) {
            snprintf(err, errlen, "%s: metadata input_shape is '%s', not C,H,W", path, shape);
            return -EBADMSG;
        }
    }
    return meta_int(f, "classes", &a->classes, path, err, errlen);
}

/* The whole file, checked, and the architecture it records; f is freed on failure. */
static int open_file(const char *path, st_file *f, modelfile_arch *a, char *err, size_t errlen)
{
    int rc = st_read(path, MODELFILE_MAX_BYTES, f, err, errlen);
    if (rc == 0 && (rc = arch_of(f, path, a, err, errlen)) < 0)
        st_free(f);
    return rc;
}

int modelfile_arch_read(const char *path, modelfile_arch *a, char *err, size_t errlen)
{
    st_file f;
    int rc = open_file(path, &f, a, err, errlen);
    if (rc == 0)
        st_free(&f);
    return rc;
}

static void shape_text(const int64_t *dims, int nd, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < nd && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (k < cap)
        snprintf(out + k, cap - k, "]");
}

/* Every view of m from f, checked, into params; then no tensor left over. */
static int copy_params(const st_file *f, const char *path, const nn_model *m, float *params, char *err, size_t errlen)
{
    char name[64];
    size_t off, n;
    int v = 0;
    for (; nn_model_view(m, v, name, sizeof name, &off, &n) == 0; v++) {
        const st_tensor *t = st_find(f, name);
        if (!t) {
            snprintf(err, errlen, "%s: no tensor %s, which model '%s' has (another model?)", path, name, m->spec);
            return -ENOENT;
        }
        int64_t dims[4];
        const int nd = nn_model_view_shape(m, v, dims);
        int same = t->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = t->dims[d] == dims[d];
        if (!same) {
            char want[96], got[96];
            shape_text(dims, nd, want, sizeof want);
            shape_text(t->dims, t->ndim, got, sizeof got);
            snprintf(err, errlen, "%s: tensor %s has shape %s, model '%s' needs %s", path, name, got, m->spec, want);
            return -EBADMSG;
        }
        if (t->dtype != ST_F32) {
            snprintf(err, errlen, "%s: tensor %s is %s; sgp reads F32", path, name, st_dtype_name(t->dtype));
            return -EBADMSG;
        }
        memcpy(params + off, t->data, n * sizeof(float));
    }
    if (f->n_tensors != v) {
        for (int i = 0; i < f->n_tensors; i++) {
            int known = 0;
            for (int u = 0; !known && nn_model_view(m, u, name, sizeof name, &off, &n) == 0; u++)
                known = !strcmp(name, f->tensors[i].name);
            if (!known) {
                snprintf(err, errlen, "%s: tensor %s is not in model '%s' (another model?)", path,
                         f->tensors[i].name, m->spec);
                break;
            }
        }
        return -EBADMSG;
    }
    return 0;
}

/* A file that records an architecture must record m's. */
static int arch_matches(const modelfile_arch *a, const char *path, const nn_model *m, char *err, size_t errlen)
{
    if (a->spec[0] && strcmp(a->spec, m->spec)) {
        snprintf(err, errlen, "%s: a model of '%s', this run's is '%s'", path, a->spec, m->spec);
        return -EINVAL;
    }
    if ((a->c && (a->c != m->in_c || a->h != m->in_h || a->w != m->in_w)) || (a->classes && a->classes != m->n_classes)) {
        snprintf(err, errlen, "%s: a model for %dx%dx%d inputs and %d classes, this run's data is %dx%dx%d with %d",
                 path, a->c, a->h, a->w, a->classes, m->in_c, m->in_h, m->in_w, m->n_classes);
        return -EINVAL;
    }
    return 0;
}

int modelfile_init_params(const char *path, nn_model *m, char *err, size_t errlen)
{
    st_file f;
    modelfile_arch a;
    int rc = open_file(path, &f, &a, err, errlen);
    if (rc < 0)
        return rc;
    rc = arch_matches(&a, path, m, err, errlen);
    if (rc == 0)
        rc = copy_params(&f, path, m, m->params, err, errlen);
    st_free(&f);
    return rc;
}

int modelfile_load(const char *path, const char *spec, int max_batch, nn_model *m, modelfile_arch *arch, char *err,
                   size_t errlen)
{
    st_file f;
    modelfile_arch a;
    int rc = open_file(path, &f, &a, err, errlen);
    if (rc < 0)
        return rc;
    if (arch)
        *arch = a;
    if (rc == 0 && !spec && !a.spec[0]) {
        snprintf(err, errlen, "%s: records no model spec (give --model SPEC)", path);
        rc = -EINVAL;
    }
    if (rc == 0 && (!a.c || !a.classes)) {
        snprintf(err, errlen, "%s: records no input_shape and classes in its metadata", path);
        rc = -EINVAL;
    }
    if (rc == 0) {
        rc = nn_model_init(m, spec ? spec : a.spec, a.c, a.h, a.w, a.classes, max_batch, 1, err, errlen);
        if (rc == 0 && spec)
            a.spec[0] = 0; /* the caller's spec stands; the tensors still have to fit it */
        if (rc == 0)
            rc = arch_matches(&a, path, m, err, errlen);
        if (rc == 0)
            rc = copy_params(&f, path, m, m->params, err, errlen);
        if (rc < 0)
            nn_model_free(m);
    }
    st_free(&f);
    return rc;
}
