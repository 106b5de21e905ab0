/* Flat JSON objects (numbers and strings, no nesting but json_int_rows) in two layouts, and a
 * reader that takes back exactly what the writer wrote.
 *
 *   json_obj j;                                  // a summary file, written atomically
 *   json_open(&j, "out.json");                   // (peer/store/wholefile.h)
 *   json_num(&j, "test_accuracy", 0.97);
 *   json_str(&j, "model", "lenet");
 *   rc = json_close(&j);                         // < 0: j.err says which file and step
 *   json_begin_line(&j, log_file);               // one line of a JSON-lines log
 *   json_int(&j, "round", 12);
 *   json_close(&j);
 *
 *   json_in r;                                   // reading one back: keys in the order written
 *   json_in_init(&r, JSON_PRETTY, "out.json", text, len);
 *   json_in_num(&r, "test_accuracy", &acc);
 *   json_in_str(&r, "model", model, sizeof model);
 *   if (json_in_end(&r) < 0)                     // r.error: where and what (topologies/parse_error.h)
 *       parse_error_text(&r.error, err, sizeof err); // "out.json:3: expected "model", got "codec""
 *
 * JSON_PRETTY: "{", then each member on its own line indented by two spaces,
 * then "}" on a line of its own. JSON_LINE: {"a": 1, "b": 2} and a newline.
 * Numbers are %.9g (exact for a float), or null when not finite (JSON has no
 * NaN or infinity); the reader gives NaN for null. Strings escape '"', '\'
 * and control characters (\u00XX) and nothing else.
 */
#ifndef PEER_STORE_JSON_H
#define PEER_STORE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "topologies/parse_error.h"

typedef enum json_layout { JSON_PRETTY, JSON_LINE } json_layout;

typedef struct json_obj {
    FILE *f;         /* a memory stream (json_open) or the caller's (json_begin_line) */
    json_layout layout;
    int n;
    char *buf;       /* json_open: the text so far */
    size_t len;
    char path[4096]; /* json_open: "" otherwise */
    int rc;          /* json_open's failure, returned again by json_close */
    char err[512];   /* why json_close failed */
} json_obj;

/* A summary file, written at json_close. 0, -ENAMETOOLONG or -ENOMEM; after
 * a failure the other calls do nothing and json_close returns it again, so a
 * caller may check only json_close. */
int json_open(json_obj *j, const char *path);
/* One JSON_LINE object onto f, flushed at json_close. */
void json_begin_line(json_obj *j, FILE *f);
void json_num(json_obj *j, const char *key, double v);
void json_int(json_obj *j, const char *key, long long v);
void json_u64(json_obj *j, const char *key, uint64_t v);
void json_str(json_obj *j, const char *key, const char *v);
/* A rows x cols matrix of integers as an array of arrays (a confusion
 * matrix); for the writer only: json_in reads no arrays. */
void json_int_rows(json_obj *j, const char *key, const long long *v, int rows, int cols);
/* 0, or a negative errno with j->err (json_open: nothing written). */
int json_close(json_obj *j);
/* Instead of json_close after json_open: the object's text, malloc'ed, and
 * no file written (NULL when out of memory). */
char *json_close_text(json_obj *j);

typedef struct json_in {
    const char *p, *end;
    json_layout layout;
    int n, line, err;  /* line: where the reader is; err: sticky, the first failure's negative errno */
    parse_error error; /* the first failure: file (the name given), its line, what was expected
                        * and what was there; parse_error_text makes "NAME:LINE: what" */
} json_in;

/* Every call checks the next member: its key must be `key`, its value of
 * that type. Errors are sticky (-EBADMSG, or -ERANGE for an integer out of
 * range); json_in_end returns the first, after checking that the object ends
 * there and nothing follows (JSON_LINE: the newline, then the end of text). */
void json_in_init(json_in *r, json_layout layout, const char *name, const char *text, size_t len);
int json_in_num(json_in *r, const char *key, double *v);
int json_in_int(json_in *r, const char *key, long long *v);
int json_in_u64(json_in *r, const char *key, uint64_t *v);
int json_in_str(json_in *r, const char *key, char *out, size_t cap);
/* 1 if the next member's key is `key` (nothing consumed); 0 if not or failed. */
int json_in_next_is(const json_in *r, const char *key);
int json_in_end(json_in *r);

/* ---- structs as field tables --------------------------------------------------- */

/* A struct member as a JSON member: the same table writes and reads it.
 *   static const json_field F[] = {JSON_FIELD(my_struct, round, JSON_I64), ...};
 * JSON_I64: int64_t, JSON_U64: uint64_t, JSON_NUM: double, JSON_TEXT: char[cap]. */
typedef enum json_type { JSON_I64, JSON_U64, JSON_NUM, JSON_TEXT } json_type;

typedef struct json_field {
    const char *key;
    json_type type;
    size_t off, cap; /* cap: JSON_TEXT's array size */
} json_field;

#define JSON_FIELD(type_, member, jtype)                                                                               \
    {#member, jtype, offsetof(type_, member), sizeof(((type_ *)0)->member)}

void json_put_fields(json_obj *j, const json_field *f, size_t n, const void *base);
/* Reads the n members in order into base; 0 or the sticky error. */
int json_in_fields(json_in *r, const json_field *f, size_t n, void *base);

#endif
