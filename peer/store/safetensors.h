/* The safetensors format, as PyTorch's and NumPy's users read it: an 8-byte
 * little-endian header length N, N bytes of JSON naming each tensor's dtype,
 * shape and byte range, an optional "__metadata__" object of strings, then
 * the tensors' bytes (little-endian, row-major, no holes, no overlaps).
 *
 *   st_writer w;                                  // writing
 *   st_writer_init(&w);
 *   st_writer_meta(&w, "spec", "mlp:256");
 *   st_writer_tensor(&w, "fc1.weight", dims, 2, data);   // float32; data kept by pointer
 *   rc = st_writer_save(&w, "model.safetensors", err, sizeof err);   // atomically
 *   st_writer_free(&w);
 *
 *   st_file f;                                    // reading: the whole file, checked
 *   if (st_read("model.safetensors", max_bytes, &f, err, sizeof err) < 0) ...   // "FILE: what is wrong"
 *   const st_tensor *t = st_find(&f, "fc1.weight");
 *   const char *spec = st_meta(&f, "spec");
 *   st_free(&f);
 *
 * The reader takes any file the format allows (members in any order,
 * whitespace, escapes, header padding) and refuses, with a one-line reason,
 * anything it does not: a truncated file, a header that is not that JSON,
 * offsets out of the data or not tiling it, a shape whose size is not the
 * byte range, duplicate names. Limits: ST_MAX_TENSORS tensors of at most
 * ST_MAX_DIMS dimensions, names and metadata keys of ST_MAX_NAME - 1 bytes,
 * a header of ST_MAX_HEADER bytes. */
#ifndef PEER_STORE_SAFETENSORS_H
#define PEER_STORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_TENSORS 1024
#define ST_MAX_META 64
#define ST_MAX_DIMS 8
#define ST_MAX_NAME 128
#define ST_MAX_HEADER (16u << 20)

typedef enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } st_dtype;

typedef struct st_tensor {
    char name[ST_MAX_NAME];
    st_dtype dtype;
    int ndim;
    int64_t dims[ST_MAX_DIMS];
    uint64_t begin, end; /* byte range in the data, after the header */
    const void *data;    /* reading: into st_file.buf; writing: the caller's floats */
} st_tensor;

typedef struct st_meta_entry {
    char key[ST_MAX_NAME];
    char *value; /* malloc'ed */
} st_meta_entry;

typedef struct st_file {
    char *buf; /* the whole file */
    size_t len;
    int n_tensors, n_meta;
    st_tensor *tensors;
    st_meta_entry meta[ST_MAX_META];
} st_file;

typedef st_file st_writer; /* the same table, filled by the caller */

/* The dtype's name in the format ("F32") and its size in bytes. */
const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);

/* Reads and checks a whole file of at most max_bytes. 0, or a negative errno
 * (-ENOENT..., -EBADMSG for a malformed file, -EFBIG) and err "PATH: reason". */
int st_read(const char *path, size_t max_bytes, st_file *f, char *err, size_t errlen);
/* The same on a buffer the st_file takes over (free()d by st_free). */
int st_parse(char *buf, size_t len, const char *name, st_file *f, char *err, size_t errlen);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key); /* NULL when absent */
void st_free(st_file *f);

void st_writer_init(st_writer *w);
/* 0, -ENOMEM, -E2BIG past the limits or -EINVAL for a key/name too long. */
int st_writer_meta(st_writer *w, const char *key, const char *value);
int st_writer_tensor(st_writer *w, const char *name, const int64_t *dims, int ndim, const float *data);
/* The file's bytes (malloc'ed into *out). */
int st_writer_encode(const st_writer *w, char **out, size_t *len);
/* Encodes and writes PATH atomically (peer/store/wholefile.h); err names the file. */
int st_writer_save(const st_writer *w, const char *path, char *err, size_t errlen);
void st_writer_free(st_writer *w);

#endif
