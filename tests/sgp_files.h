/* Files and scratch directories for the tests, with no process and no
 * socket (so the unit binary may use them; tests/sgp_run.h, for the tests
 * that run processes, includes this file):
 *
 *   static char g_dir[64];
 *   static void setup(void) { sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/test_x_XXXXXX"); }
 *   static void teardown(void) { sgp_rm_rf(g_dir); }
 *
 *   sgp_write_text(sgp_path_in(g_dir, "a.topo"), "peers 2\ngenerator ring\n");
 *   char *text = sgp_read_file(sgp_path_in(g_dir, "peer0.json"));
 *   double acc = sgp_json_number(text, "test_accuracy");
 *   free(text);
 *
 * A helper fails the test (cr_assert) where the test could not go on, and
 * says so where it returns NULL or NaN instead. */
#ifndef TESTS_SGP_FILES_H
#define TESTS_SGP_FILES_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- scratch directories ---------------------------------------------------- */

/* Makes a fresh directory from TEMPLATE (ending in XXXXXX) into DIR (CAP bytes). */
static inline void sgp_tmp_dir(char *dir, size_t cap, const char *template)
{
    cr_assert_lt(strlen(template), cap, "%s does not fit", template);
    strcpy(dir, template);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", template);
}

/* DIR/NAME, in one of 8 buffers used in turn (so a call may take several). */
static inline char *sgp_path_in(const char *dir, const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static inline int sgp_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes DIR and everything in it, as `rm -rf` does (a DIR that is not there
 * is no error), without a process. SGP_TEST_KEEP=1 keeps it, to look at the
 * files of a run that passed. */
static inline void sgp_rm_rf(const char *dir)
{
    if (getenv("SGP_TEST_KEEP") && *getenv("SGP_TEST_KEEP") == '1') {
        cr_log_info("kept %s", dir);
        return;
    }
    int rc = nftw(dir, sgp_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    cr_assert(rc == 0 || errno == ENOENT, "cannot remove %s: %s", dir, strerror(errno));
}

/* ---- writing ---------------------------------------------------------------- */

/* PATH (created or truncated) holding TEXT. */
static inline void sgp_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    cr_assert(fputs(text, f) >= 0 && fclose(f) == 0, "%s", path);
}

/* As sgp_write_text, then the file's mode set to MODE (a key file, say). */
static inline void sgp_write_text_mode(const char *path, const char *text, mode_t mode)
{
    sgp_write_text(path, text);
    cr_assert_eq(chmod(path, mode), 0, "chmod %s", path);
}

/* PATH holding LEN bytes of one fixed pseudo-random text (printable and not):
 * the same bytes on every call. */
static inline void sgp_write_noise(const char *path, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    uint32_t s = 12345;
    for (size_t i = 0; i < len; i++) {
        s = s * 1664525u + 1013904223u;
        fputc((int)(s >> 24), f);
    }
    cr_assert_eq(fclose(f), 0);
}

/* ---- reading ---------------------------------------------------------------- */

/* The whole file at PATH, NUL-terminated (malloc'ed), or NULL if it cannot be read. */
static inline char *sgp_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, r;
    char *s = malloc(cap);
    cr_assert(s);
    while ((r = fread(s + n, 1, cap - 1 - n, f)) > 0)
        if ((n += r) == cap - 1)
            cr_assert((s = realloc(s, cap *= 2)));
    s[n] = 0;
    fclose(f);
    return s;
}

/* The first CAP - 1 bytes of the file at PATH into BUF, NUL-terminated;
 * BUF, or NULL (and BUF empty) if it cannot be read. For a file the test
 * keeps in a buffer of its own. */
static inline char *sgp_read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    buf[f ? fread(buf, 1, cap - 1, f) : 0] = 0;
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

/* 1 if the file at PATH exists and contains NEEDLE. */
static inline int sgp_file_has(const char *path, const char *needle)
{
    char *text = sgp_read_file(path);
    int has = text && strstr(text, needle);
    free(text);
    return has;
}

/* How many times NEEDLE occurs in the file at PATH (0 if there is no file). */
static inline int sgp_file_count(const char *path, const char *needle)
{
    char *text = sgp_read_file(path);
    int n = 0;
    for (const char *s = text; s && (s = strstr(s, needle)); s++)
        n++;
    free(text);
    return n;
}

/* The number after "KEY": in a summary's text; NaN when text is NULL or
 * has no KEY (summaries are flat: peer/store/json.h). */
static inline double sgp_json_number(const char *text, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = text ? strstr(text, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : __builtin_nan("");
}

/* KEY of the JSON file at PATH; the file must exist and have it. */
static inline double sgp_file_number(const char *path, const char *key)
{
    char *text = sgp_read_file(path);
    cr_assert(text, "%s is missing", path);
    double v = sgp_json_number(text, key);
    free(text);
    cr_assert(v == v, "%s has no \"%s\"", path, key);
    return v;
}

/* KEY of DIR/peerI.json (a peer's summary). */
static inline double sgp_peer_number(const char *dir, int i, const char *key)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.json", dir, i);
    return sgp_file_number(path, key);
}

/* DIR/peerI.out (a peer's output) has NEEDLE. */
static inline int sgp_peer_out_has(const char *dir, int i, const char *needle)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.out", dir, i);
    return sgp_file_has(path, needle);
}

/* The last round DIR/peerI.jsonl (a peer's --log) has logged so far (0: none). */
static inline long sgp_peer_last_round(const char *dir, int i)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.jsonl", dir, i);
    char *text = sgp_read_file(path);
    long last = 0;
    for (const char *p = text; p && (p = strstr(p, "{\"round\": ")); p++)
        last = strtol(p + 10, NULL, 10);
    free(text);
    return last;
}

#endif
