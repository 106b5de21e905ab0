/* Codecs for float vectors behind one ops table, found by name.
 *
 *   cmp_spec s;
 *   char err[128];
 *   if (cmp_spec_parse(&s, "topk:0.01", err, sizeof err) < 0) ...   // "qsgd:16", "stc:0.01", "none", ...
 *   uint8_t *msg = malloc(cmp_bound(&s, n));
 *   void *work = malloc(cmp_work_size(&s, n));                    // sized once, reused every round
 *   long len = cmp_encode(&s, x, n, seed, work, msg, cmp_bound(&s, n));
 *   cmp_decode_add(msg, len, n, 0.5f, dst);                       // dst += 0.5 * decoded
 *
 * Every message is self-describing (format in compress/FORMAT.md): a common
 * header (codec id, n) then the codec's own header (its parameters, scales,
 * the RNG seed where it needs one) and its bit-packed payload. Decoding needs
 * no spec, only the bytes; truncated or corrupt input returns -EBADMSG and
 * never reads or writes out of bounds. Nothing allocates: cmp_bound() sizes
 * the output, cmp_work_size() the encoder's scratch space.
 *
 * Stochastic codecs (qsgd, terngrad, natural, randk, sketch) draw from a
 * stream seeded by `seed` (the caller derives it from the run seed, peer,
 * edge and round), so an encode is reproducible.
 */
#ifndef COMPRESS_CMP_H
#define COMPRESS_CMP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct cmp_spec cmp_spec;

/* Candidates a caller collects for a top-k codec while it streams the
 * values (cmp_stream_begin below): positions ascending, and each value's
 * bit pattern. */
typedef struct cmp_list {
    uint32_t *pos, *key;
    size_t m, cap;
} cmp_list;

/* A list entry's bit pattern, and the key the selection ranks by (the
 * magnitude's bits, so that NaN > inf > every finite magnitude). */
static inline uint32_t cmp_list_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
static inline uint32_t cmp_list_key(float v) { return cmp_list_bits(v) & 0x7fffffffu; }

typedef struct cmp_ops {
    const char *name; /* "topk" */
    uint8_t id;       /* on the wire; never reused */
    const char *usage; /* "topk:FRACTION[:sampled]  the k = FRACTION*n largest magnitudes ..." */
    /* args: the text after "name:" or NULL. Fills the spec's parameters. */
    int (*parse)(cmp_spec *s, const char *args, char *err, size_t errlen);
    /* Largest payload (after the common header) for n values. */
    size_t (*bound)(const cmp_spec *s, size_t n);
    /* Scratch bytes encode needs for n values (0 if none). */
    size_t (*work)(const cmp_spec *s, size_t n);
    /* Writes the payload for x[0..n) into out (cap >= bound); returns its length or a negative errno. */
    long (*encode)(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out, size_t cap);
    /* Reads a payload of len bytes for n values: dst[i] += alpha * value[i]. -EBADMSG on malformed input
     * (dst may then hold part of the update: callers decode into scratch when that matters). */
    int (*decode_add)(const uint8_t *in, size_t len, size_t n, float alpha, float *dst);
    /* Sparse codecs only (NULL for the dense ones): the decoded non-zeros as positions (ascending) and
     * values, at most cap of them; the count, -ENOSPC if more than cap, or -EBADMSG. */
    long (*decode_sparse)(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap);
    /* Sparse codecs only: what decode_sparse would give for the message encode just made from x with
     * this work area, read from the work area instead of the message. */
    long (*encoded_sparse)(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx,
                           float *val, size_t cap);
    /* Top-k codecs only (topk, stc; NULL for the rest): the message encode would make from x, made
     * from a list of candidates that holds every position whose key reaches some threshold
     * (cmp_encode_list). */
    long (*encode_list)(const cmp_spec *s, const cmp_list *c, size_t n, void *work, uint8_t *out, size_t cap);
    /* Sparse codecs whose count is not cmp_select_k(fraction, n) (NULL for the rest): the most
     * non-zeros a message of n values carries. */
    size_t (*sparse_max)(const cmp_spec *s, size_t n);
    /* Codecs that select chunk by chunk (sparseloco; NULL for the rest): the scratch one chunk's
     * selection needs; chunks [c0, c1) of x into the work area, selecting in `select` (NULL: the work
     * area's own), writing only what those chunks own; the message from a work area that holds every
     * chunk (cmp_encode_chunks below). */
    size_t (*chunk_work)(const cmp_spec *s, size_t n);
    int (*encode_chunks)(const cmp_spec *s, const float *x, size_t n, size_t c0, size_t c1, void *select,
                         void *work);
    long (*encode_chosen)(const cmp_spec *s, size_t n, void *work, uint8_t *out, size_t cap);
    /* Codecs that write value after value at a fixed width (none, fp16, bf16): its bytes a value (the
     * payload is width * n bytes, value i at width * i); 0 for the rest. */
    size_t width;
} cmp_ops;

struct cmp_spec {
    const cmp_ops *ops;
    double fraction; /* topk, randk, stc, sketch, sparseloco: share of entries sent, (0, 1] */
    double columns;  /* sketch: buckets per entry sent, (0, 1] */
    int levels;      /* qsgd: quantisation levels s >= 1 */
    int sampled;     /* topk: DGC-style threshold from a sample instead of exact selection */
    size_t chunk;    /* sparseloco: values a chunk (it sends cmp_select_k(fraction, chunk) of each) */
    int whole;       /* sparseloco: one set of levels for the whole message, not one a chunk */
    int stat;        /* sparseloco: (whole, and) the authors' statistical bins, not sign and size */
    char text[48];   /* the spec as parsed, for logs */
};

/* Bytes of the common header at most (codec id + varint n). */
#define CMP_HEADER_MAX 11
/* Largest n a message may declare (2^31 - 1 floats: limits what a decoder will touch). */
#define CMP_MAX_N ((size_t)0x7fffffff)

int cmp_spec_parse(cmp_spec *s, const char *text, char *err, size_t errlen);
/* The parse op of codecs that take no parameters ("fp16:3" is an error). */
int cmp_parse_no_args(cmp_spec *s, const char *args, char *err, size_t errlen);
/* All codecs, for help texts and tests; NULL-terminated. */
const cmp_ops *const *cmp_codecs(void);
const cmp_ops *cmp_find(const char *name);
const cmp_ops *cmp_find_id(uint8_t id);

size_t cmp_bound(const cmp_spec *s, size_t n);
size_t cmp_work_size(const cmp_spec *s, size_t n);
/* Common header + payload; returns the message length or a negative errno
 * (-ENOSPC if cap < cmp_bound(s, n)). */
long cmp_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out, size_t cap);
/* dst[0..n) += alpha * decoded; the message must declare exactly n values. */
int cmp_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst);
/* dst = decoded. */
int cmp_decode(const uint8_t *in, size_t len, size_t n, float *dst);

/* Sparse codecs (topk, stc, sketch, sparseloco): at most how many non-zeros a message of this
 * spec for n values carries; 0 for a dense codec. */
size_t cmp_sparse_bound(const cmp_spec *s, size_t n);
/* A sparse codec's message as its non-zeros: positions ascending in
 * idx[0..count), the values cmp_decode would put there in val (every other
 * value decodes to zero), in time proportional to the message, not to n.
 * Returns the count; -ENOTSUP for a dense codec's message (use cmp_decode),
 * -ENOSPC if it carries more than cap, -EBADMSG if malformed (idx and val
 * may then hold anything). */
long cmp_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap);
/* Right after cmp_encode(s, x, n, seed, work, ...) of a sparse codec, with x
 * and work untouched since: the message's non-zeros exactly as
 * cmp_decode_sparse gives them, without decoding it (the sender's own view
 * of what it sent). -ENOTSUP for a dense codec, -ENOSPC beyond cap. */
long cmp_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx, float *val,
                        size_t cap);

/* Top-k codecs (topk, stc) for a caller that computes the values as it
 * streams them and never stores them (gossip's z - r, one pass instead of
 * writing the difference and reading it again): the same message as
 * cmp_encode from x, from the candidates the caller collects.
 *
 *   cmp_list c;
 *   uint32_t t;
 *   if (cmp_stream_begin(s, n, seed, work, &c) == 0) {   // -ENOTSUP: another codec, or n too small
 *       for (size_t j = 0; j < c.m; j++) c.key[j] = cmp_list_bits(x[c.pos[j]]);
 *       if (cmp_stream_threshold(s, &c, n, work, &t) == 0) {
 *           ... one pass: positions with cmp_list_key(x_i) >= t into the list (cmp_select.h);
 *               a list that would pass c.cap: cmp_encode from x instead ...
 *           len = cmp_encode_list(s, &c, n, work, out, cap);   // -EAGAIN: fewer than k
 *       }
 *   }
 *   // any failure: cmp_encode(s, x, ...) as usual
 *
 * Afterwards (either way) cmp_encoded_sparse gives what was sent, with x
 * NULL, and cmp_selected_values the k values of x it was made from. */
int cmp_stream_begin(const cmp_spec *s, size_t n, uint64_t seed, void *work, cmp_list *c);
int cmp_stream_threshold(const cmp_spec *s, cmp_list *c, size_t n, void *work, uint32_t *t);
long cmp_encode_list(const cmp_spec *s, const cmp_list *c, size_t n, void *work, uint8_t *out, size_t cap);
/* A top-k codec's last encode: the values of x at the positions it
 * selected, in the order of those positions (its workspace holds them);
 * NULL for other codecs. */
const float *cmp_selected_values(const cmp_spec *s, size_t n, const void *work);

/* A codec that selects chunk by chunk (sparseloco), for a caller with
 * threads: chunks apart are selected apart, so each thread takes ranges of
 * them with a select area of its own, and the message is the same bytes as
 * cmp_encode's.
 *
 *   cmp_spec s;
 *   char err[128];
 *   cmp_spec_parse(&s, "sparseloco:32", err, sizeof err);
 *   size_t n = 1 << 24, nch = cmp_chunks(&s, n), cap = cmp_bound(&s, n);  // nch 0: another codec
 *   float *x = calloc(n, sizeof *x);
 *   void *work = malloc(cmp_work_size(&s, n)), *select = malloc(cmp_chunk_work(&s, n));  // one a thread
 *   uint8_t *out = malloc(cap);
 *   ... each thread, with its own select area, for each of its ranges [c0, c1) of [0, nch) ...
 *   int rc = cmp_encode_chunks(&s, x, n, 0, nch, select, work);        // (here one range: all)
 *   long len = rc < 0 ? rc : cmp_encode_chosen(&s, n, work, out, cap);  // once every chunk is in
 *   // -EINVAL from either: a value that is not finite, as cmp_encode
 */
size_t cmp_chunks(const cmp_spec *s, size_t n);
size_t cmp_chunk_work(const cmp_spec *s, size_t n);
int cmp_encode_chunks(const cmp_spec *s, const float *x, size_t n, size_t c0, size_t c1, void *select, void *work);
/* Common header + payload, as cmp_encode. */
long cmp_encode_chosen(const cmp_spec *s, size_t n, void *work, uint8_t *out, size_t cap);

/* A codec that writes value after value at a fixed width (none, fp16,
 * bf16) makes and reads a message a block of values at a time, for a caller
 * that never holds the values whole (gossip's whole-model messages): the
 * same bytes as cmp_encode, the same values as cmp_decode.
 *
 *   cmp_spec bf16;
 *   char err[128];
 *   cmp_spec_parse(&bf16, "bf16", err, sizeof err);
 *   size_t n = 1 << 20, m = 256, cap = cmp_bound(&bf16, n);  // (n a multiple of m here)
 *   uint8_t *msg = malloc(cap);
 *   float block[256];
 *   cmp_values mv;
 *   long len = cmp_values_begin(&bf16, n, msg, cap, &mv);  // -ENOTSUP: another codec
 *   for (size_t at = 0; at < n; at += m) {
 *       ... values [at, at + m) into block ...
 *       cmp_values_write(&mv, msg, at, block, m);
 *   }
 *   if (cmp_values_of(msg, (size_t)len, n, &mv) == 0)      // -ENOTSUP: another codec
 *       for (size_t at = 0; at < n; at += m) {
 *           cmp_values_read(&mv, msg, at, m, block);
 *           ... use values [at, at + m) ...
 *       }
 */
typedef struct cmp_values {
    const cmp_spec *spec; /* (the writer's) */
    const cmp_ops *ops;
    size_t width, at;     /* bytes a value; where the payload starts */
} cmp_values;
/* The header of a message of n values into out; its whole length (header
 * and payload), -ENOTSUP for a codec of another kind, -ENOSPC if cap is
 * below cmp_bound(s, n), -EINVAL past CMP_MAX_N. */
long cmp_values_begin(const cmp_spec *s, size_t n, uint8_t *out, size_t cap, cmp_values *v);
/* Values [at, at + m) of the message, from x[0..m). */
void cmp_values_write(const cmp_values *v, uint8_t *out, size_t at, const float *x, size_t m);
/* A message of len bytes that declares n values, of such a codec: 0 and
 * where its values are; -ENOTSUP for another codec's, -EBADMSG if it is
 * malformed (as cmp_decode would say). */
int cmp_values_of(const uint8_t *in, size_t len, size_t n, cmp_values *v);
/* dst[0..m) = the message's values [at, at + m), as cmp_decode gives them. */
void cmp_values_read(const cmp_values *v, const uint8_t *in, size_t at, size_t m, float *dst);

#endif
