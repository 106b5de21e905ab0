/* libFuzzer target for the safetensors reader (peer/store/safetensors.h): any
 * bytes give 0 or a negative errno with a message, never a crash or a read
 * outside the buffer. What parses must be consistent (every tensor's bytes
 * inside the data, its size its shape's) and must survive write-then-parse
 * with the same names, shapes, bytes and metadata (F32 tensors; the writer
 * makes no others).
 *
 *   make fuzz   (or: clang -g -O1 -fsanitize=fuzzer,address -I. tests/fuzz/fuzz_safetensors.c
 *                peer/store/safetensors.c peer/store/wholefile.c -o fz && ./fz tests/fuzz/corpus/safetensors)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream under -std=c17 */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/store/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1), err[256] = "";
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    st_file f;
    if (st_parse(buf, size, "fuzz", &f, err, sizeof err) < 0) {
        check(err[0]);
        return 0;
    }
    st_writer w;
    st_writer_init(&w);
    int all_f32 = 1;
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        check((const char *)t->data >= f.buf && (const char *)t->data + (t->end - t->begin) <= f.buf + f.len);
        all_f32 &= t->dtype == ST_F32;
        if (all_f32)
            check(st_writer_tensor(&w, t->name, t->dims, t->ndim, t->data) == 0);
    }
    for (int i = 0; i < f.n_meta; i++)
        check(st_writer_meta(&w, f.meta[i].key, f.meta[i].value) == 0);
    char *out;
    size_t len;
    if (all_f32 && st_writer_encode(&w, &out, &len) == 0) {
        st_file g;
        check(st_parse(out, len, "again", &g, err, sizeof err) == 0);
        check(g.n_tensors == f.n_tensors && g.n_meta == f.n_meta);
        for (int i = 0; i < f.n_tensors; i++) {
            const st_tensor *a = &f.tensors[i], *b = st_find(&g, a->name);
            check(b && b->ndim == a->ndim && b->end - b->begin == a->end - a->begin);
            check(!memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]));
            check(!memcmp(a->data, b->data, a->end - a->begin));
        }
        for (int i = 0; i < f.n_meta; i++) {
            const char *v = st_meta(&g, f.meta[i].key);
            check(v && !strcmp(v, f.meta[i].value));
        }
        st_free(&g);
    }
    st_writer_free(&w);
    st_free(&f);
    return 0;
}
