/* A flat JSON object writer for run summaries, written atomically
 * (FILE.tmp, fsync, rename) so a reader never sees half a summary.
 *
 *   json_obj j;
 *   if (json_open(&j, "out.json") == 0) {
 *       json_num(&j, "test_accuracy", 0.97);
 *       json_str(&j, "model", "lenet");
 *       rc = json_close(&j);
 *   }
 */
#ifndef PEER_JSON_H
#define PEER_JSON_H

#include <stdio.h>

typedef struct json_obj {
    FILE *f;
    int n;
    char path[4096], tmp[4200];
} json_obj;

int json_open(json_obj *j, const char *path);
void json_num(json_obj *j, const char *key, double v);
void json_int(json_obj *j, const char *key, long long v);
void json_str(json_obj *j, const char *key, const char *v);
/* Returns 0, or a negative errno (the temp file is removed). */
int json_close(json_obj *j);

#endif
