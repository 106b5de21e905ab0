/* What wire.c (encoding) and wire_decode.c (decoding) share: the schema's
 * field counts and checks, and the little-endian reads. Not an API. */
#ifndef PEER_WIRE_WIRE_SCHEMA_H
#define PEER_WIRE_WIRE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "peer/wire/wire.h"

/* Elements of each message type's array, indexed by type. The decoder
 * accepts exactly this count (more or fewer is malformed however many bytes
 * follow), so no count from the wire ever sizes anything. */
#define WIRE_N_TYPES 10
extern const uint32_t wire_fields[WIRE_N_TYPES];

/* PUSH fields in array order (0 is the type); a check names the one at fault. */
enum { F_TYPE, F_ROUND, F_SEQ, F_INC, F_KIND, F_W, F_GAIN, F_STEP, F_ORIGIN, F_BASE, F_DIM, F_PAYLOAD, F_N };
extern const char *const wire_push_field_names[F_N];

/* n values of `width` bytes (4 or 8), little-endian at src, into dst in host
 * order; dst may be src (in place). */
void wire_get_le(void *dst, const uint8_t *src, size_t n, size_t width);

/* -1 if p keeps the schema, else the field at fault (why says how). */
int wire_push_check(const wire_push *p, const char **why);

/* A GOODBYE reason: shortest-form UTF-8 without control characters. */
int wire_reason_ok(const uint8_t *s, size_t n);

/* NULL when a MEMBERS entry keeps the schema, else why not (a static string). */
const char *wire_member_check(const wire_member *m);

#endif
