/* peer/store: wholefile_write (replace, never replace, keep the previous
 * version, exact modes, leftovers, messages that name the file and step);
 * the peer summary and the round log lines: what the writer writes, the
 * reader takes back exactly, and it refuses anything else with the line and
 * what it expected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/launch/launch_status.h"
#include "peer/store/roundlog.h"
#include "peer/store/summary.h"
#include "peer/store/wholefile.h"
#include "tests/sgp_files.h"

TestSuite(peer_store, .timeout = 30);

static char g_dir[64];

static const char *in_dir(const char *name)
{
    if (!g_dir[0])
        sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/sgp-store-XXXXXX");
    return sgp_path_in(g_dir, name);
}

static void cleanup(void)
{
    if (g_dir[0])
        sgp_rm_rf(g_dir);
}

/* The file's text ("" if it cannot be read). */
static const char *text_of(const char *path)
{
    static char buf[256];
    sgp_read_text(path, buf, sizeof buf);
    return buf;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s", path);
    return st.st_mode & 07777;
}

static int put(const char *path, const char *text, mode_t mode, int flags, char *err, size_t errlen)
{
    return wholefile_write(path, text, strlen(text), mode, flags, err, errlen);
}

Test(peer_store, wholefile_write_replaces_with_exactly_the_mode_given, .fini = cleanup)
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

Test(peer_store, wholefile_write_noreplace_leaves_an_existing_file_alone, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("k.key");
    cr_assert_eq(put(p, "mine\n", 0600, WHOLEFILE_NOREPLACE, err, sizeof err), 0, "%s", err);
    cr_assert_eq(put(p, "theirs\n", 0600, WHOLEFILE_NOREPLACE, err, sizeof err), -EEXIST);
    cr_assert(strstr(err, "k.key exists"), "%s", err);
    cr_assert_str_eq(text_of(p), "mine\n");
    cr_assert_eq(access(in_dir("k.key.tmp"), F_OK), -1, "the refused temporary file is gone");
    cr_assert_eq(put(p, "x", 0600, WHOLEFILE_NOREPLACE | WHOLEFILE_KEEP_PREV, err, sizeof err), -EINVAL);
}

Test(peer_store, wholefile_write_keeps_the_previous_version, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("c.ckpt"), *prev = in_dir("c.ckpt.prev");
    cr_assert_eq(put(p, "1", 0600, WHOLEFILE_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_eq(access(prev, F_OK), -1, "nothing to keep the first time");
    cr_assert_eq(put(p, "2", 0600, WHOLEFILE_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "1");
    cr_assert_eq(put(p, "3", 0600, WHOLEFILE_KEEP_PREV, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "2");
    cr_assert_str_eq(text_of(p), "3");
    cr_assert_eq(put(p, "4", 0600, 0, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(prev), "2", "without the flag .prev is not touched");
}

/* A crash's leftover PATH.tmp, even a symlink planted there, is replaced by
 * a fresh file of ours; the symlink's target is never written. */
Test(peer_store, wholefile_write_never_writes_through_a_leftover_tmp, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("s.key"), *tmp = in_dir("s.key.tmp"), *target = in_dir("elsewhere");
    sgp_write_text_mode(target, "untouched", 0644);
    cr_assert_eq(symlink(target, tmp), 0);
    cr_assert_eq(put(p, "secret\n", 0600, 0, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(text_of(target), "untouched");
    cr_assert_eq(mode_of(target), 0644);
    cr_assert_str_eq(text_of(p), "secret\n");
    cr_assert_eq(mode_of(p), 0600);
    cr_assert_eq(access(tmp, F_OK), -1);
}

Test(peer_store, wholefile_write_errors_name_the_file_and_the_step, .fini = cleanup)
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

/* ---- the peer summary ----------------------------------------------------- */

static summary_peer sample(void)
{
    summary_peer s = {
        .id = 3, .peers = 65536, .parameters = 203530, .epochs = 10, .seed = 18446744073709551615ull,
        .test_accuracy = 0.9545, .test_loss = NAN, .train_loss = 0.125, .rounds = 1250, .weight = 0.03125,
        .bytes_sent = 1234567890123, .bytes_received = 7, .messages_sent = 8, .messages_absorbed = 9,
        .sends_refused = 0, .mean_staleness = 0.5, .wall_seconds = 12.25, .local_steps = 1200, .start_round = -1,
        .neighbours_lost = 2, .late_marks = 3, .catch_ups = 4, .checkpoints = 5,
    };
    snprintf(s.model, sizeof s.model, "mlp:256,\"q\"\\\x01");
    snprintf(s.codec, sizeof s.codec, "stc:0.04");
    return s;
}

Test(peer_store, summary_reads_back_every_field_exactly, .fini = cleanup)
{
    char err[512];
    const char *p = in_dir("peer3.json");
    summary_peer s = sample(), back;
    memset(&back, 0x55, sizeof back);
    cr_assert_eq(summary_peer_write(p, &s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(mode_of(p), 0644);
    cr_assert_eq(summary_peer_read(p, &back, err, sizeof err), 0, "%s", err);
    cr_assert(isnan(back.test_loss), "null reads back as NaN");
    s.test_loss = back.test_loss = 0;
    cr_assert_str_eq(back.model, s.model);
    cr_assert_eq(memcmp(&back, &s, sizeof s), 0, "every field as written");
    /* a float (what node_result holds) comes back as the same float */
    s.test_accuracy = 0.95450002f;
    cr_assert_eq(summary_peer_write(p, &s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(summary_peer_read(p, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq((float)back.test_accuracy, 0.95450002f);
}

/* Replace the first `from` in the file with `to`, then read it: -EBADMSG
 * (or want) and a message with `needle`. */
static void expect_refused(const char *from, const char *to, int want, const char *needle)
{
    char err[512], text[4096];
    const char *p = in_dir("edit.json");
    summary_peer s = sample();
    cr_assert_eq(summary_peer_write(p, &s, err, sizeof err), 0, "%s", err);
    sgp_read_text(p, text, sizeof text);
    char *at = strstr(text, from), edited[4200];
    cr_assert_not_null(at, "%s", from);
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    sgp_write_text(p, edited);
    summary_peer back = sample();
    back.id = 99;
    cr_assert_eq(summary_peer_read(p, &back, err, sizeof err), want, "'%s' -> '%s': %s", from, to, err);
    cr_assert(strstr(err, p) && strstr(err, needle), "'%s' -> '%s': %s", from, to, err);
    cr_assert_eq(back.id, 99, "nothing filled in on a failure");
}

Test(peer_store, summary_reader_refuses_what_the_writer_never_writes, .fini = cleanup)
{
    static const struct {
        const char *from, *to;
        int rc;
        const char *needle;
    } edits[] = {
        {"  \"rounds\": 1250,\n", "", -EBADMSG, ":13: expected \"rounds\", found '\"weight\": 0.03125,'"},
        {"\"rounds\"", "\"round\"", -EBADMSG, "expected \"rounds\""},
        {"\n  \"weight\": 0.03125,", "\n  \"extra\": 1,\n  \"weight\": 0.03125,", -EBADMSG, "expected \"weight\""},
        {"1250", "\"1250\"", -EBADMSG, "\"rounds\": expected an integer"},
        {"1250", "1250.5", -EBADMSG, ":13: expected a comma and \"weight\", found '.5,'"},
        {"0.03125", "nan", -EBADMSG, "\"weight\": expected a number"},
        {"0.03125", "0x1p-5", -EBADMSG, "expected a comma and \"bytes_sent\", found 'x1p-5,'"},
        {"12.25", ".25", -EBADMSG, "\"wall_seconds\": expected a number"},
        {"1234567890123", "99999999999999999999", -ERANGE, "out of range"},
        {"18446744073709551615", "-1", -ERANGE, "\"seed\": -1 is out of range"},
        {"\"stc:0.04\"", "\"stc\\t\"", -EBADMSG, "escape"},
        {"\"peer\"", "\"sim\"", -EBADMSG, "not of 'sgp peer'"},
        {"\n}\n", "\n}\n{}", -EBADMSG, "after the object"},
        {"\n}\n", "\n}", -EBADMSG, "expected the end of the object"},
        {",\n  \"models_landed\": 0\n}\n", "", -EBADMSG, "expected a comma and \"models_landed\", found the end"},
        {"{", "[", -EBADMSG, "not a JSON object"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof *edits; k++)
        expect_refused(edits[k].from, edits[k].to, edits[k].rc, edits[k].needle);
}

Test(peer_store, summary_read_errors_name_the_file, .fini = cleanup)
{
    char err[512];
    summary_peer s;
    cr_assert_eq(summary_peer_read(in_dir("none.json"), &s, err, sizeof err), -ENOENT);
    cr_assert(strstr(err, "none.json") && strstr(err, "No such file"), "%s", err);
    FILE *f = fopen(in_dir("big.json"), "w");
    for (int i = 0; i < 70000; i++)
        fputc(' ', f);
    fclose(f);
    cr_assert_eq(summary_peer_read(in_dir("big.json"), &s, err, sizeof err), -EFBIG, "%s", err);
}

/* ---- round log lines ------------------------------------------------------ */

Test(peer_store, roundlog_reads_back_what_it_writes)
{
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    roundlog_line a = {.round = 12, .loss = 0.31, .bytes_out = 1ull << 40, .bytes_in = 5, .absorbed = 6,
                       .staleness = 0.25, .round_seconds = 0.0125, .t = 3.5, .w = 0.0625, .test_accuracy = -1};
    roundlog_line b = a;
    b.round = 13, b.test_accuracy = 0.9125, b.loss = NAN;
    cr_assert_eq(roundlog_write(f, &a), 0);
    cr_assert_eq(roundlog_write(f, &b), 0);
    fclose(f);
    char *nl = strchr(text, '\n');
    cr_assert(nl && nl[1] && strchr(nl + 1, '\n') == text + len - 1, "one line each: %s", text);
    cr_assert_null(strstr(text, "test_accuracy\": -1"), "left out when not evaluated: %s", text);
    roundlog_line back;
    cr_assert_eq(roundlog_parse(text, (size_t)(nl + 1 - text), &back, err, sizeof err), ROUNDLOG_ROUND, "%s", err);
    cr_assert_eq(memcmp(&back, &a, sizeof a), 0);
    cr_assert_eq(roundlog_parse(nl + 1, strlen(nl + 1), &back, err, sizeof err), ROUNDLOG_ROUND, "%s", err);
    cr_assert(isnan(back.loss) && back.test_accuracy == 0.9125 && back.round == 13);
    free(text);
}

static int parse(const char *line)
{
    roundlog_line l;
    char err[256];
    return roundlog_parse(line, strlen(line), &l, err, sizeof err);
}

Test(peer_store, roundlog_tells_round_lines_from_the_others)
{
    /* as sgp peer writes them (peer/net/node.c, log_round, event, log_ledger) */
    cr_assert_eq(parse("{\"round\": 250, \"loss\": 0.412345, \"bytes_out\": 123456, \"bytes_in\": 120000, "
                       "\"absorbed\": 500, \"staleness\": 0.125, \"round_seconds\": 0.012345, \"t\": 4.321, "
                       "\"w\": 0.125, \"step_s\": 1.5, \"gossip_s\": 0.5, \"frame_s\": 0.25, \"wait_s\": 0.125, "
                       "\"test_accuracy\": 0.912300}\n"),
                 0);
    cr_assert_eq(parse("{\"event\": \"neighbour lost\", \"peer\": 3, \"round\": 12, \"t\": 1.000}\n"), ROUNDLOG_OTHER);
    cr_assert_eq(parse("{\"ledger\": \"peer\", \"id\": 0, \"incarnation\": 1, \"w\": 0.5, \"round\": 9, \"w_adopted\": 0}\n"), ROUNDLOG_OTHER);
    cr_assert_eq(parse("{\"round\": 250, \"loss\": 0.4}\n"), -EBADMSG, "a line cut short");
    cr_assert_eq(parse("{\"round\": 250, \"loss\": 0.412345, \"bytes_out\": 12"), -EBADMSG, "a torn last line");
    cr_assert_eq(parse(""), -EBADMSG);
}

/* sgp launch follows the logs through roundlog: the last whole round line
 * counts, whatever event and ledger lines follow it and however the tail it
 * reads starts or the line being written ends. */
Test(peer_store, the_launcher_reads_the_last_round_of_a_live_log, .fini = cleanup)
{
    const char *p = in_dir("peer0.jsonl");
    FILE *f = fopen(p, "w");
    roundlog_line l = {.loss = 2.0, .bytes_out = 1000000, .test_accuracy = -1};
    for (l.round = 1; l.round <= 400; l.round++) { /* more than the 8 KiB tail it reads */
        l.loss *= 0.99, l.bytes_out += 1000;
        l.test_accuracy = l.round % 100 == 0 ? (double)l.round / 1000 : -1;
        roundlog_write(f, &l);
    }
    fputs("{\"event\": \"neighbour lost\", \"peer\": 3, \"round\": 400, \"t\": 1.000}\n", f);
    fputs("{\"ledger\": \"peer\", \"id\": 0, \"incarnation\": 1, \"w\": 0.5, \"round\": 400}\n", f);
    fputs("{\"round\": 401, \"loss\": 0.5, \"bytes_o", f); /* being written */
    fclose(f);
    launch_status s = LAUNCH_STATUS_NONE;
    launch_status_read(p, &s);
    cr_assert_eq(s.round, 400);
    cr_assert_float_eq(s.mb_out, 1.4, 1e-9);
    cr_assert_float_eq(s.loss, 2.0 * pow(0.99, 400), 1e-6);
    cr_assert_float_eq(s.test_accuracy, 0.4, 1e-9, "the last one logged");
    launch_status none = LAUNCH_STATUS_NONE;
    launch_status_read(in_dir("missing.jsonl"), &none);
    cr_assert(none.round == -1 && none.test_accuracy == -1, "no log: unchanged");
}
