/* peer/store: atomic_write (replace, never replace, keep the previous
 * version, exact modes, leftovers, messages that name the file and step). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/store/atomic.h"

TestSuite(peer_store, .timeout = 30);

static char g_dir[64];

static const char *in_dir(const char *name)
{
    static char buf[4][160];
    static int k;
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/sgp-store-XXXXXX");
        cr_assert_not_null(mkdtemp(g_dir));
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void cleanup(void)
{
    char cmd[96];
    if (g_dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        cr_assert_eq(system(cmd), 0);
    }
}

/* The file's text ("" if it cannot be read). */
static const char *text_of(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    buf[f ? fread(buf, 1, sizeof buf - 1, f) : 0] = 0;
    if (f)
        fclose(f);
    return buf;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s", path);
    return st.st_mode & 07777;
}

static int put(const char *path, const char *text, mode_t mode, int flags, char *err, size_t cap)
{
    return atomic_write(path, text, strlen(text), mode, flags, err, cap);
}

Test(peer_store, atomic_write_replaces_with_exactly_the_mode_given, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("a.json");
    mode_t old = umask(0077); /* the mode is exact: umask does not take bits away */
    cr_assert_eq(put(p, "one\n", 0644, 0, err, sizeof err), 0, "%s", err);
    umask(old);
    cr_assert_str_eq(text_of(p), "one\n");
    cr_assert_eq(mode_of(p), 0644);
    cr_assert_eq(put(p, "two\n", 0600, 0, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(p), "two\n");
    cr_assert_eq(mode_of(p), 0600);
    cr_assert_eq(access(in_dir("a.json.tmp"), F_OK), -1, "no temporary file left");
    cr_assert_eq(access(in_dir("a.json.prev"), F_OK), -1, "no .prev unless asked");
}

Test(peer_store, atomic_write_noreplace_leaves_an_existing_file_alone, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("k.key");
    cr_assert_eq(put(p, "mine\n", 0600, ATOMIC_NOREPLACE, err, sizeof err), 0, "%s", err);
    cr_assert_eq(put(p, "theirs\n", 0600, ATOMIC_NOREPLACE, err, sizeof err), -EEXIST);
    cr_assert(strstr(err, "k.key exists"), "%s", err);
    cr_assert_str_eq(text_of(p), "mine\n");
    cr_assert_eq(access(in_dir("k.key.tmp"), F_OK), -1, "the refused temporary file is gone");
    cr_assert_eq(put(p, "x", 0600, ATOMIC_NOREPLACE | ATOMIC_KEEP_PREV, err, sizeof err), -EINVAL);
}

Test(peer_store, atomic_write_keeps_the_previous_version, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("c.ckpt"), *prev = in_dir("c.ckpt.prev");
    cr_assert_eq(put(p, "1", 0600, ATOMIC_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_eq(access(prev, F_OK), -1, "nothing to keep the first time");
    cr_assert_eq(put(p, "2", 0600, ATOMIC_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "1");
    cr_assert_eq(put(p, "3", 0600, ATOMIC_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "2");
    cr_assert_str_eq(text_of(p), "3");
    cr_assert_eq(put(p, "4", 0600, 0, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "2", "without the flag .prev is not touched");
}

/* A crash's leftover PATH.tmp, even a symlink planted there, is replaced by
 * a fresh file of ours; the symlink's target is never written. */
Test(peer_store, atomic_write_never_writes_through_a_leftover_tmp, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("s.key"), *tmp = in_dir("s.key.tmp"), *target = in_dir("elsewhere");
    FILE *f = fopen(target, "w");
    cr_assert_not_null(f);
    fputs("untouched", f);
    fclose(f);
    cr_assert_eq(chmod(target, 0644), 0);
    cr_assert_eq(symlink(target, tmp), 0);
    cr_assert_eq(put(p, "secret\n", 0600, 0, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(target), "untouched");
    cr_assert_eq(mode_of(target), 0644);
    cr_assert_str_eq(text_of(p), "secret\n");
    cr_assert_eq(mode_of(p), 0600);
    cr_assert_eq(access(tmp, F_OK), -1);
}

Test(peer_store, atomic_write_errors_name_the_file_and_the_step, .fini = cleanup)
{
    char err[512];
    cr_assert_eq(put("/nonexistent-dir/x.json", "x", 0644, 0, err, sizeof err), -ENOENT);
    cr_assert(strstr(err, "cannot create /nonexistent-dir/x.json.tmp") && strstr(err, "No such file"), "%s", err);
    /* the final rename fails: PATH is a directory */
    const char *d = in_dir("d");
    cr_assert_eq(mkdir(d, 0700), 0);
    cr_assert_eq(mkdir(in_dir("d/inner"), 0700), 0);
    cr_assert_lt(put(d, "x", 0644, 0, err, sizeof err), 0);
    cr_assert(strstr(err, "cannot rename") && strstr(err, "d.tmp to ") && strstr(err, "/d:"), "%s", err);
    cr_assert_eq(access(in_dir("d.tmp"), F_OK), -1, "the temporary file is removed after a failure");
}
