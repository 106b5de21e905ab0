/* peer/config/keyfile.h: key files (save and load round trip, CRLF, the
 * secret key's permissions, atomic no-clobber writes, malformed files), the
 * one base64 spelling of a key, `sgp keygen`, and `sgp cluster` (admission
 * keys and credentials, peer/config/credential.h). */
#include "peer/config/keyfile.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/sgp_run.h"

/* ---- fixture: four key pairs and a temp dir -------------------------------- */

#define NPEERS 4

static sec_keypair g_kp[NPEERS];
static char g_dir[64];

static void setup(void)
{
    sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/test_peer_keyfile_XXXXXX");
    for (int i = 0; i < NPEERS; i++)
        cr_assert_eq(sec_keypair_generate(&g_kp[i]), 0);
}

static void teardown(void)
{
    for (int i = 0; i < NPEERS; i++)
        sec_keypair_free(&g_kp[i]);
    sgp_rm_rf(g_dir);
}

TestSuite(peer_keyfile, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

static int lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES])
{
    (void)ctx;
    if (id >= NPEERS)
        return -ENOENT;
    memcpy(pk, g_kp[id].pk, SEC_KEY_BYTES);
    return 0;
}

/* A loaded key is a working key: a whole handshake as peer 0 with peer 1. */
static void handshake_as_peer_0(const sec_keypair *k)
{
    uint8_t cid[SEC_CLUSTER_ID_BYTES] = {0}, buf[SEC_HS_OUT_MAX];
    sec_hs i, r;
    cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 0, 1, k, lookup, NULL, cid), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], lookup, NULL, cid), 0);
    for (int turn = 0; turn < 6; turn++) {
        sec_hs *from = turn % 2 ? &r : &i, *to = turn % 2 ? &i : &r;
        int n = sec_hs_produce(from, buf, sizeof buf);
        cr_assert_geq(n, 0, "%s", from->msg);
        if (n)
            cr_assert_eq(sec_hs_consume(to, buf, (size_t)n), n, "%s", to->msg);
    }
    cr_assert(sec_hs_done(&i) && sec_hs_done(&r));
    sec_hs_free(&i);
    sec_hs_free(&r);
}

static char *path_in(const char *name) { return sgp_path_in(g_dir, name); }

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return st.st_mode & 07777;
}

static int files_in_dir(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(peer_keyfile, key_save_load_round_trip)
{
    char err[512];
    const char *key = path_in("0.key"), *pub = path_in("0.pub");
    cr_assert_eq(keyfile_save(&g_kp[0], key, pub, 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(mode_of(key), 0600);
    cr_assert_eq(mode_of(pub), 0644);
    cr_assert_eq(files_in_dir(), 2, "no temporary file left behind");
    FILE *f = fopen(pub, "r");
    char line[128];
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    char b64[KEYFILE_B64];
    keyfile_pub_encode(g_kp[0].pk, b64);
    cr_assert_eq(strlen(line), 45);
    cr_assert_eq(strncmp(line, b64, 44), 0);

    sec_keypair k;
    cr_assert_eq(keyfile_load(&k, key, err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(k.pk, g_kp[0].pk, SEC_KEY_BYTES), 0, "the public key is derived from the secret");
    uint8_t pk[SEC_KEY_BYTES];
    cr_assert_eq(keyfile_load_pub(pk, pub, err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(pk, g_kp[0].pk, SEC_KEY_BYTES), 0);

    /* the loaded key does the handshake as peer 0 */
    handshake_as_peer_0(&k);
    sec_keypair_free(&k);
    cr_assert_null(k.sk);

    /* A CRLF line ending is fine too. */
    FILE *src = fopen(key, "r");
    cr_assert_not_null(fgets(line, sizeof line, src));
    fclose(src);
    line[44] = 0;
    strcat(line, "\r\n");
    sgp_write_text_mode(path_in("crlf.key"), line, 0600);
    cr_assert_eq(keyfile_load(&k, path_in("crlf.key"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(k.pk, g_kp[0].pk, SEC_KEY_BYTES), 0);
    sec_keypair_free(&k);
}

Test(peer_keyfile, save_never_replaces_a_key_unless_told)
{
    char err[512];
    const char *key = path_in("a.key"), *pub = path_in("a.pub");
    cr_assert_eq(keyfile_save(&g_kp[0], key, pub, 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(keyfile_save(&g_kp[1], key, pub, 0, err, sizeof err), -EEXIST);
    cr_assert(strstr(err, "a.key exists"), "%s", err);
    sec_keypair k;
    cr_assert_eq(keyfile_load(&k, key, err, sizeof err), 0);
    cr_assert_eq(memcmp(k.pk, g_kp[0].pk, SEC_KEY_BYTES), 0, "untouched");
    sec_keypair_free(&k);
    /* only the .pub present: still no */
    cr_assert_eq(unlink(key), 0);
    cr_assert_eq(keyfile_save(&g_kp[1], key, pub, 0, err, sizeof err), -EEXIST);
    cr_assert_eq(access(key, F_OK), -1, "no key written next to someone else's .pub");
    cr_assert_eq(keyfile_save(&g_kp[1], key, pub, 1, err, sizeof err), 0, "%s", err);
    cr_assert_eq(keyfile_load(&k, key, err, sizeof err), 0);
    cr_assert_eq(memcmp(k.pk, g_kp[1].pk, SEC_KEY_BYTES), 0, "replaced with overwrite");
    sec_keypair_free(&k);
    cr_assert_eq(mode_of(key), 0600);
    cr_assert_eq(files_in_dir(), 2);
    cr_assert_eq(keyfile_save(&g_kp[1], "/nonexistent-dir/x.key", NULL, 0, err, sizeof err), -ENOENT);
}

Test(peer_keyfile, secret_key_file_permissions_are_enforced)
{
    char err[512];
    const char *key = path_in("p.key");
    cr_assert_eq(keyfile_save(&g_kp[2], key, NULL, 0, err, sizeof err), 0, "%s", err);
    static const mode_t bad[] = {0640, 0604, 0660, 0644, 0602, 0620, 0610};
    sec_keypair k;
    for (size_t m = 0; m < sizeof bad / sizeof *bad; m++) {
        cr_assert_eq(chmod(key, bad[m]), 0);
        memset(&k, 0x5a, sizeof k);
        cr_assert_eq(keyfile_load(&k, key, err, sizeof err), -EACCES, "mode %04o", (unsigned)bad[m]);
        char want[32];
        snprintf(want, sizeof want, "permissions %04o", (unsigned)bad[m]);
        cr_assert(strstr(err, want) && strstr(err, "chmod 600") && strstr(err, key), "%s", err);
        cr_assert_null(k.sk, "a refused key is not kept");
    }
    static const mode_t good[] = {0600, 0400};
    for (size_t m = 0; m < sizeof good / sizeof *good; m++) {
        cr_assert_eq(chmod(key, good[m]), 0);
        cr_assert_eq(keyfile_load(&k, key, err, sizeof err), 0, "mode %04o: %s", (unsigned)good[m], err);
        sec_keypair_free(&k);
    }
    /* The public key file has no such rule. */
    uint8_t pk[SEC_KEY_BYTES];
    char b64[KEYFILE_B64 + 1];
    keyfile_pub_encode(g_kp[2].pk, b64);
    strcat(b64, "\n");
    sgp_write_text_mode(path_in("p.pub"), b64, 0644);
    cr_assert_eq(keyfile_load_pub(pk, path_in("p.pub"), err, sizeof err), 0, "%s", err);
}

Test(peer_keyfile, malformed_key_files_are_refused)
{
    char err[512];
    sec_keypair k;
    cr_assert_eq(keyfile_load(&k, path_in("missing.key"), err, sizeof err), -ENOENT);
    cr_assert(strstr(err, "missing.key"), "%s", err);
    cr_assert_eq(keyfile_load(&k, g_dir, err, sizeof err), -EINVAL, "a directory");
    static const char *bad[] = {
        "",
        "not base64 at all!!!!!!!!!!!!!!!!!!!!!!!!!!\n",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n", /* 31 bytes */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", /* 33 bytes */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n", /* non-zero padding bits */
        " AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n",
        ("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
         "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), /* over the size limit */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sgp_write_text_mode(path_in("bad.key"), bad[i], 0600);
        cr_assert_eq(keyfile_load(&k, path_in("bad.key"), err, sizeof err), -EBADMSG, "case %zu", i);
        cr_assert(strstr(err, "bad.key"), "%s", err);
        cr_assert_null(k.sk);
    }
    sgp_write_text_mode(path_in("ok.key"), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 0600);
    cr_assert_eq(keyfile_load(&k, path_in("ok.key"), err, sizeof err), 0, "no final newline: %s", err);
    sec_keypair_free(&k);

    uint8_t pk[SEC_KEY_BYTES];
    const char *why = NULL;
    cr_assert_eq(keyfile_pub_decode(pk, "AAAA", 4, &why), -EINVAL);
    cr_assert(strstr(why, "length"), "%s", why);
    cr_assert_eq(keyfile_pub_decode(pk, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA*=", 44, &why), -EINVAL);
    cr_assert_str_eq(why, "not base64");
    cr_assert_eq(keyfile_pub_decode(pk, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=", 44, &why), -EINVAL);
    cr_assert(strstr(why, "canonical"), "%s", why);
    char b64[KEYFILE_B64];
    keyfile_pub_encode(g_kp[3].pk, b64);
    cr_assert_eq(keyfile_pub_decode(pk, b64, 44, NULL), 0);
    cr_assert_eq(memcmp(pk, g_kp[3].pk, SEC_KEY_BYTES), 0);
}

/* ---- sgp keygen ------------------------------------------------------------ */

static sgp_out o;

Test(peer_keyfile, keygen_writes_both_files_and_prints_the_public_key)
{
    sgp_run(&o, "keygen", "--out", g_dir, "--id", "3", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert_eq(sgp_lines(o.out), 1, "%s", o.out);
    cr_assert_eq(strlen(o.out), 45);
    const char *key = path_in("3.key"), *pub = path_in("3.pub");
    cr_assert_eq(mode_of(key), 0600);
    cr_assert_eq(mode_of(pub), 0644);
    char err[512], b64[KEYFILE_B64];
    sec_keypair k;
    cr_assert_eq(keyfile_load(&k, key, err, sizeof err), 0, "%s", err);
    keyfile_pub_encode(k.pk, b64);
    cr_assert_eq(strncmp(o.out, b64, 44), 0, "stdout is the public key of the key file");
    sec_keypair_free(&k);

    /* no silent replacement */
    sgp_run(&o, "keygen", "--out", g_dir, "--id", "3", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert(strstr(o.err, "3.key exists") && strstr(o.err, "--force"), "%s", o.err);
    cr_assert_eq(o.out[0], 0);
    sgp_run(&o, "keygen", "--out", g_dir, "--id", "3", "--force", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert_neq(strncmp(o.out, b64, 44), 0, "a new key");

    sgp_run(&o, "keygen", "-o", g_dir, "-n", "alice", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert_eq(access(path_in("alice.key"), F_OK), 0);
    cr_assert_eq(files_in_dir(), 4);
}

Test(peer_keyfile, keygen_usage_errors)
{
    static const char *cases[][5] = {
        {"keygen", NULL},
        {"keygen", "--id", "1", "--name", "x"},
        {"keygen", "--id", "-1", NULL},
        {"keygen", "--id", "65536", NULL},
        {"keygen", "--name", "../evil", NULL},
        {"keygen", "--name", ".hidden", NULL},
        {"keygen", "--bogus", NULL},
        {"keygen", "--id", "1", "extra", NULL},
        {"keygen", "--out", NULL},
    };
    static const char *needle[] = {"--id N or --name", "not both", "--id", "--id", "--name", "--name",
                                   "--bogus",          "extra",    "--out"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sgp_run(&o, cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], NULL);
        cr_assert_eq(o.status, 2, "case %zu: %d %s", i, o.status, o.err);
        cr_assert_eq(sgp_lines(o.err), 1, "case %zu: %s", i, o.err);
        cr_assert(strstr(o.err, needle[i]), "case %zu: expected '%s' in %s", i, needle[i], o.err);
    }
    sgp_run(&o, "keygen", "--help", NULL);
    cr_assert_eq(o.status, 0);
    static const char *opts[] = {"--out", "--id", "--name", "--force", "0600"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        cr_assert(strstr(o.out, opts[i]), "--help does not mention %s", opts[i]);
    sgp_run(&o, "keygen", "--out", path_in("nowhere"), "--id", "0", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "nowhere"), "%s", o.err);
    sgp_run(&o, "--help", NULL);
    cr_assert(strstr(o.out, "keygen"), "listed in sgp --help");
}

/* sgp cluster: an admission key, a credential for a peer's key, and its
 * check: good for its cluster, refused for another cluster, under another
 * admission key or once revoked, with the reason on one line. */
Test(peer_keyfile, cluster_admits_a_peer_and_checks_its_credential)
{
    sgp_run(&o, "keygen", "--out", g_dir, "--id", "7", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    char other[80];
    snprintf(other, sizeof other, "%s/other", g_dir);
    cr_assert_eq(mkdir(other, 0700), 0);
    sgp_run(&o, "cluster", "keygen", "--out", g_dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert_eq(strlen(o.out), 45, "the admission public key: %s", o.out);
    cr_assert_eq(mode_of(path_in("admit.key")), 0600);
    sgp_run(&o, "cluster", "keygen", "--out", other, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    char key[128], pub[128], cred[128], other_pub[128];
    snprintf(key, sizeof key, "%s", path_in("admit.key"));
    snprintf(pub, sizeof pub, "%s", path_in("admit.pub"));
    snprintf(cred, sizeof cred, "%s", path_in("7.cred"));
    snprintf(other_pub, sizeof other_pub, "%s/admit.pub", other);

    sgp_run(&o, "cluster", "admit", "--admit-key", key, "--cluster", "lab-run", "--key", path_in("7.pub"), "--id",
            "7", "--out", cred, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "id 7") && strstr(o.out, "expires never"), "%s", o.out);
    sgp_run(&o, "cluster", "admit", "--admit-key", key, "--cluster", "lab-run", "--key", path_in("7.pub"), "--out",
            cred, NULL);
    cr_assert_eq(o.status, 1, "never replaced without --force");
    cr_assert(strstr(o.err, "exists") && strstr(o.err, "--force"), "%s", o.err);

    sgp_run(&o, "cluster", "check", "--admit-pub", pub, "--credential", cred, "--cluster", "lab-run", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "good") && strstr(o.out, "id 7"), "%s", o.out);
    const char *serial = strstr(o.out, "serial ");
    cr_assert_not_null(serial, "%s", o.out);
    char hex[17];
    snprintf(hex, sizeof hex, "%.16s", serial + 7);
    sgp_run(&o, "cluster", "check", "--admit-pub", pub, "--credential", cred, "--cluster", "other-run", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert(strstr(o.err, "refused: for cluster 'lab-run', not 'other-run'"), "%s", o.err);
    sgp_run(&o, "cluster", "check", "--admit-pub", other_pub, "--credential", cred, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "not signed by this cluster's admission key"), "%s", o.err);

    char revoked[128];
    snprintf(revoked, sizeof revoked, "%s", path_in("7.revoked"));
    sgp_run(&o, "cluster", "revoke", "--admit-key", key, "--cluster", "lab-run", "--serial", hex, "--out", revoked,
            NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    sgp_run(&o, "cluster", "check", "--admit-pub", pub, "--credential", cred, "--revoked", revoked, NULL);
    cr_assert_eq(o.status, 1, "revoked");
    cr_assert(strstr(o.err, "refused: revoked (serial"), "%s", o.err);
    sgp_run(&o, "cluster", "check", "--admit-pub", other_pub, "--credential", cred, "--revoked", revoked, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "7.revoked: not signed"), "a revocation under another key counts for nothing: %s", o.err);

    static const char *usage[][4] = {{"cluster", NULL}, {"cluster", "keygen", NULL}, {"cluster", "admit", NULL},
                                     {"cluster", "join", NULL}, {"cluster", "check", "--id", "x"}};
    static const char *needle[] = {"keygen, admit, check or revoke", "--out", "--admit-key", "join", "--id"};
    for (size_t i = 0; i < sizeof usage / sizeof *usage; i++) {
        sgp_run(&o, usage[i][0], usage[i][1], usage[i][2], usage[i][3], NULL);
        cr_assert_eq(o.status, 2, "case %zu: %d %s", i, o.status, o.err);
        cr_assert(strstr(o.err, needle[i]), "case %zu: expected '%s' in %s", i, needle[i], o.err);
    }
    sgp_run(&o, "cluster", "--help", NULL);
    cr_assert_eq(o.status, 0);
    cr_assert(strstr(o.out, "--valid-days") && strstr(o.out, "CLUSTER.md"), "%s", o.out);
}
