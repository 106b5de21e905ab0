/* Model files: the safetensors reader and writer (peer/store/safetensors.h)
 * and sgp's model files on top (peer/store/modelfile.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn_model.h"
#include "peer/store/modelfile.h"
#include "peer/store/safetensors.h"

/* Every layer kind that has parameters, in a residual network. */
#define EVERY_KIND "conv:4:3:stride=2:pad=1,gn:2,gelu,res(conv:4:3:pad=1,gn:4,tanh),avgpool,fc:6,ln,relu,fc"

static void build(nn_model *m, const char *spec, int c, int h, int w, int k, uint64_t seed)
{
    char err[256];
    cr_assert_eq(nn_model_init(m, spec, c, h, w, k, 8, seed, err, sizeof err), 0, "%s", err);
}

static char *temp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/sgp-modelfile-%d-%s", (int)getpid(), name);
    return path;
}

/* A file from a header text and data bytes, parsed; the error text in err. */
static int parse_text(const char *header, const void *data, size_t data_len, st_file *f, char *err, size_t errlen)
{
    const size_t n = strlen(header), len = 8 + n + data_len;
    char *buf = malloc(len);
    cr_assert(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    if (data_len)
        memcpy(buf + 8 + n, data, data_len);
    return st_parse(buf, len, "t.safetensors", f, err, errlen);
}

Test(peer_modelfile, every_layer_kind_round_trips_bit_for_bit)
{
    nn_model a = {0}, b = {0};
    build(&a, EVERY_KIND, 1, 9, 9, 5, 7);
    char err[512], *path = temp_path("every.safetensors");
    cr_assert_eq(modelfile_save(path, &a, NULL, "csv:x,y", "{\"test_accuracy\": 0.5}", err, sizeof err), 0, "%s", err);
    modelfile_arch arch;
    cr_assert_eq(modelfile_load(path, NULL, 8, &b, &arch, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(b.spec, a.spec);
    cr_assert_str_eq(arch.data, "csv:x,y");
    cr_assert(b.in_c == 1 && b.in_h == 9 && b.in_w == 9 && b.n_classes == 5);
    cr_assert_eq(b.n_params, a.n_params);
    cr_assert_eq(memcmp(a.params, b.params, a.n_params * sizeof(float)), 0, "parameters differ after a round trip");

    /* the same answers on the same inputs */
    float x[2 * 81];
    for (int i = 0; i < 2 * 81; i++)
        x[i] = (float)((i * 37) % 101) / 101.0f;
    float pa[10], pb[10];
    int la[2], lb[2];
    nn_model_predict(&a, x, 2, la, pa);
    nn_model_predict(&b, x, 2, lb, pb);
    cr_assert_eq(memcmp(pa, pb, sizeof pa), 0);
    cr_assert(la[0] == lb[0] && la[1] == lb[1]);

    /* shapes in PyTorch's layout, names as nn_model_view gives them */
    st_file f;
    cr_assert_eq(st_read(path, 1 << 20, &f, err, sizeof err), 0, "%s", err);
    const st_tensor *t = st_find(&f, "conv1.weight");
    cr_assert(t && t->ndim == 4 && t->dims[0] == 4 && t->dims[1] == 1 && t->dims[2] == 3 && t->dims[3] == 3);
    t = st_find(&f, "fc1.weight");
    cr_assert(t && t->ndim == 2 && t->dims[0] == 6 && t->dims[1] == 4);
    t = st_find(&f, "ln1.weight");
    cr_assert(t && t->ndim == 1 && t->dims[0] == 6);
    t = st_find(&f, "gn2.bias");
    cr_assert(t && t->ndim == 1 && t->dims[0] == 4);
    cr_assert_str_eq(st_meta(&f, "format"), MODELFILE_FORMAT);
    cr_assert_str_eq(st_meta(&f, "input_shape"), "1,9,9");
    cr_assert_str_eq(st_meta(&f, "summary"), "{\"test_accuracy\": 0.5}");
    size_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | (unsigned char)f.buf[i];
    cr_assert_eq((8 + header_len) % 8, 0, "the data starts 8-byte aligned");
    st_free(&f);
    nn_model_free(&a);
    nn_model_free(&b);
    unlink(path);
}

Test(peer_modelfile, raw_is_the_bare_floats)
{
    nn_model a = {0};
    build(&a, "mlp:5", 1, 3, 3, 4, 1);
    char err[256], *path = temp_path("raw");
    cr_assert_eq(modelfile_write(MODELFILE_RAW, path, &a, NULL, NULL, NULL, err, sizeof err), 0, "%s", err);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    float *back = malloc(a.n_params * sizeof *back + 1);
    cr_assert_eq(fread(back, 1, a.n_params * sizeof *back + 1, f), a.n_params * sizeof *back);
    fclose(f);
    cr_assert_eq(memcmp(back, a.params, a.n_params * sizeof *back), 0);
    free(back);
    nn_model_free(&a);
    unlink(path);
}

Test(peer_modelfile, reader_takes_what_the_format_allows)
{
    /* members in any order, whitespace, escapes, metadata last, an empty tensor (the
     * format wants '{' first) */
    const float v[3] = {1.5f, -2.0f, 0.25f};
    const char *h = "{ \"b\\u00e9\" : { \"data_offsets\" : [ 0 , 12 ] , \"shape\" : [3], \"dtype\" : \"F32\" },\n"
                    "\"empty\": {\"dtype\": \"F32\", \"shape\": [0, 4], \"data_offsets\": [12, 12]},"
                    "\"__metadata__\": {\"k\\\"ey\": \"line\\nbreak \\ud83d\\ude00\"} }    ";
    st_file f;
    char err[256];
    cr_assert_eq(parse_text(h, v, sizeof v, &f, err, sizeof err), 0, "%s", err);
    const st_tensor *t = st_find(&f, "b\xc3\xa9");
    cr_assert(t, "an escaped name is decoded to UTF-8");
    cr_assert_eq(memcmp(t->data, v, sizeof v), 0);
    cr_assert(st_find(&f, "empty"));
    cr_assert_str_eq(st_meta(&f, "k\"ey"), "line\nbreak \xf0\x9f\x98\x80");
    st_free(&f);
}

/* Each header is refused with a message containing `want`. */
static void refused(const char *header, size_t data_len, const char *want)
{
    static const char zeros[64];
    st_file f;
    char err[256] = "";
    cr_assert_lt(parse_text(header, zeros, data_len, &f, err, sizeof err), 0, "accepted: %s", header);
    cr_assert(strstr(err, want), "'%s': message '%s' lacks '%s'", header, err, want);
    cr_assert(strstr(err, "t.safetensors"), "the message names the file: %s", err);
}

Test(peer_modelfile, reader_refuses_malformed_headers_with_the_reason)
{
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, "truncated");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12, "holds 12");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "needs 12 bytes");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
            " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
            12, "a hole");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
            " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
            8, "an overlap");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
            " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
            8, "twice");
    refused("{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "unknown dtype");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 0, "needs dtype, shape and data_offsets");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}", 4, "begin <= end");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, "non-negative integer");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}", 4, "unknown field");
    refused("{\"__metadata__\": {\"k\": 3}}", 0, "not a string");
    refused("{\"__metadata__\": {\"k\": \"v\"}} x", 0, "after the header");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}", 4, "expected '}'");
    refused("{\"a\\q\": 1}", 0, "unknown escape");
    refused("{\"\\ud800\": 1}", 0, "lone surrogate");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [99999999999999999999], \"data_offsets\": [0, 4]}}", 4, "2^53");
    refused("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], \"data_offsets\": [0, 4]}}",
            4, "data_offsets give 4");
}

Test(peer_modelfile, every_truncation_of_a_file_is_refused)
{
    nn_model a = {0};
    build(&a, "conv:2:3,relu,fc", 1, 5, 5, 3, 2);
    st_writer w;
    st_writer_init(&w);
    char name[64];
    size_t off, n;
    for (int v = 0; nn_model_view(&a, v, name, sizeof name, &off, &n) == 0; v++) {
        int64_t dims[4];
        int nd = nn_model_view_shape(&a, v, dims);
        cr_assert_eq(st_writer_tensor(&w, name, dims, nd, a.params + off), 0);
    }
    cr_assert_eq(st_writer_meta(&w, "spec", a.spec), 0);
    char *buf;
    size_t len;
    cr_assert_eq(st_writer_encode(&w, &buf, &len), 0);
    for (size_t cut = 0; cut < len; cut++) {
        char *copy = malloc(cut ? cut : 1), err[256];
        memcpy(copy, buf, cut);
        st_file f;
        cr_assert_lt(st_parse(copy, cut, "cut", &f, err, sizeof err), 0, "a file cut to %zu of %zu bytes was taken", cut,
                     len);
    }
    char *whole = malloc(len), err[256];
    memcpy(whole, buf, len);
    st_file f;
    cr_assert_eq(st_parse(whole, len, "whole", &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(f.n_tensors, 4);
    st_free(&f);
    free(buf);
    st_writer_free(&w);
    nn_model_free(&a);
}

Test(peer_modelfile, another_model_is_refused_naming_both)
{
    nn_model a = {0}, b = {0}, c = {0};
    build(&a, "mlp:16", 1, 4, 4, 3, 1);
    build(&b, "mlp:8", 1, 4, 4, 3, 1);
    build(&c, "mlp:16", 1, 4, 4, 5, 1);
    char err[512], *path = temp_path("other.safetensors");
    cr_assert_eq(modelfile_save(path, &a, NULL, NULL, NULL, err, sizeof err), 0, "%s", err);
    float before = b.params[0];
    cr_assert_eq(modelfile_init_params(path, &b, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "'mlp:16'") && strstr(err, "'mlp:8'") && strstr(err, path), "%s", err);
    cr_assert_eq(b.params[0], before, "a refused file leaves the model as it was");
    cr_assert_eq(modelfile_init_params(path, &c, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "3 classes") || strstr(err, "and 3"), "%s", err);

    /* a file without sgp's metadata (another tool's) must still match tensor by tensor */
    st_writer w;
    st_writer_init(&w);
    int64_t d1[2] = {8, 16}, d2[1] = {8};
    float zeros[128] = {0};
    st_writer_tensor(&w, "fc1.weight", d1, 2, zeros);
    st_writer_tensor(&w, "fc1.bias", d2, 1, zeros);
    cr_assert_eq(st_writer_save(&w, path, err, sizeof err), 0, "%s", err);
    st_writer_free(&w);
    cr_assert_eq(modelfile_init_params(path, &a, err, sizeof err), -EBADMSG);
    cr_assert(strstr(err, "fc1.weight has shape [8, 16], model 'mlp:16' needs [16, 16]"), "%s", err);
    nn_model_free(&a);
    nn_model_free(&b);
    nn_model_free(&c);
    unlink(path);
}

Test(peer_modelfile, missing_or_extra_tensors_and_other_dtypes_are_named)
{
    nn_model a = {0};
    build(&a, "mlp", 1, 2, 2, 2, 1); /* fc1.weight [2, 4], fc1.bias [2] */
    char err[512], *path = temp_path("tensors.safetensors");
    float data[32] = {0}; /* 128 bytes: the F64 case below reads 72 */
    int64_t dw[2] = {2, 4}, db[1] = {2};
    st_writer w;

    st_writer_init(&w);
    st_writer_tensor(&w, "fc1.weight", dw, 2, data);
    cr_assert_eq(st_writer_save(&w, path, err, sizeof err), 0);
    st_writer_free(&w);
    cr_assert_eq(modelfile_init_params(path, &a, err, sizeof err), -ENOENT);
    cr_assert(strstr(err, "no tensor fc1.bias"), "%s", err);

    st_writer_init(&w);
    st_writer_tensor(&w, "fc1.weight", dw, 2, data);
    st_writer_tensor(&w, "fc1.bias", db, 1, data);
    st_writer_tensor(&w, "fc9.bias", db, 1, data);
    cr_assert_eq(st_writer_save(&w, path, err, sizeof err), 0);
    st_writer_free(&w);
    cr_assert_eq(modelfile_init_params(path, &a, err, sizeof err), -EBADMSG);
    cr_assert(strstr(err, "fc9.bias is not in model"), "%s", err);

    /* F64 where sgp reads F32: written by hand, the writer only makes F32 */
    const char *h = "{\"fc1.weight\": {\"dtype\": \"F64\", \"shape\": [2, 4], \"data_offsets\": [0, 64]},"
                    " \"fc1.bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [64, 72]}}";
    st_file f;
    cr_assert_eq(parse_text(h, data, 72, &f, err, sizeof err), 0, "%s", err);
    st_free(&f);
    FILE *o = fopen(path, "wb");
    uint64_t n = strlen(h);
    fwrite(&n, 8, 1, o);
    fwrite(h, 1, n, o);
    fwrite(data, 1, 72, o);
    fclose(o);
    cr_assert_eq(modelfile_init_params(path, &a, err, sizeof err), -EBADMSG);
    cr_assert(strstr(err, "fc1.weight is F64; sgp reads F32"), "%s", err);

    cr_assert_lt(modelfile_init_params("/no/such/file", &a, err, sizeof err), 0);
    cr_assert(strstr(err, "/no/such/file"), "%s", err);
    nn_model_free(&a);
    unlink(path);
}
