/* Admission credentials (peer/config/credential.h): a credential signed by
 * the cluster's admission key passes and survives its file; one signed by
 * another key, changed after signing, for another cluster or past its
 * expiry is refused with its reason; a malformed file is refused with its
 * line; the admission key's files round-trip and an open secret is refused;
 * a revocation by the admission key refuses the credential it names. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/config/credential.h"
#include "peer/config/keyfile.h"

TestSuite(peer_credential, .timeout = 60);

static char g_dir[] = "/tmp/sgp-credential-XXXXXX";
static char path_buf[4][256];

static const char *in_dir(int slot, const char *name)
{
    snprintf(path_buf[slot], sizeof path_buf[slot], "%s/%s", g_dir, name);
    return path_buf[slot];
}

static void rm_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

/* A credential for cluster "lab-run", peer key (1, 2, ...), id 7, signed by k. */
static credential signed_by(const admit_key *k)
{
    credential c = {.id = 7};
    snprintf(c.cluster, sizeof c.cluster, "lab-run");
    for (int i = 0; i < SEC_KEY_BYTES; i++)
        c.key[i] = (uint8_t)(i + 1);
    cr_assert_eq(credential_sign(&c, k), 0);
    cr_assert_neq(c.serial, 0, "a serial is drawn");
    return c;
}

Test(peer_credential, a_signed_credential_passes_and_survives_its_file)
{
    cr_assert_not_null(mkdtemp(g_dir));
    admit_key k, again;
    char err[256] = "";
    cr_assert_eq(admit_key_generate(&k), 0);
    cr_assert_eq(admit_key_save(&k, in_dir(0, "admit.key"), in_dir(1, "admit.pub"), 0, err, sizeof err), 0, "%s",
                 err);
    struct stat st;
    cr_assert_eq(stat(in_dir(0, "admit.key"), &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "the secret is the owner's only");
    cr_assert_eq(admit_key_save(&k, in_dir(0, "admit.key"), NULL, 0, err, sizeof err), -EEXIST, "never replaced");
    cr_assert_eq(admit_key_load(&again, in_dir(0, "admit.key"), err, sizeof err), 0, "%s", err);
    uint8_t pub[SEC_KEY_BYTES];
    cr_assert_eq(keyfile_load_pub(pub, in_dir(1, "admit.pub"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(pub, k.pk, sizeof pub), 0);
    cr_assert_eq(memcmp(again.pk, k.pk, sizeof pub), 0, "the seed gives the same key back");

    credential c = signed_by(&again), back;
    cr_assert_eq(credential_check(&c, pub, "lab-run", 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(credential_save(&c, in_dir(2, "7.cred"), 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(credential_load(&back, in_dir(2, "7.cred"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(&back, &c, sizeof c), 0, "every field read back");
    cr_assert_eq(credential_check(&back, pub, NULL, 0, err, sizeof err), 0, "%s", err);
    char a[CREDENTIAL_TEXT_MAX], b[CREDENTIAL_TEXT_MAX];
    const size_t na = credential_write(&c, a), nb = credential_write(&back, b);
    cr_assert(na == nb && memcmp(a, b, na) == 0, "one spelling");
    cr_assert_lt(na, 400, "a small file: %zu bytes", na);

    c.id = CREDENTIAL_ANY_ID, c.serial = 0;
    cr_assert_eq(credential_sign(&c, &k), 0);
    cr_assert_eq(credential_check(&c, pub, "lab-run", 0, err, sizeof err), 0, "%s", err);
    credential_write(&c, a);
    cr_assert_not_null(strstr(a, "\nid any\n"), "%s", a);

    cr_assert_eq(chmod(in_dir(0, "admit.key"), 0644), 0);
    cr_assert_eq(admit_key_load(&again, in_dir(0, "admit.key"), err, sizeof err), -EACCES);
    cr_assert_not_null(strstr(err, "too open"), "%s", err);
    admit_key_free(&k);
    rm_dir();
}

Test(peer_credential, forged_changed_foreign_and_expired_credentials_are_refused)
{
    admit_key k, other;
    char err[256] = "";
    cr_assert_eq(admit_key_generate(&k), 0);
    cr_assert_eq(admit_key_generate(&other), 0);
    const credential good = signed_by(&k);

    credential c = signed_by(&other);
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), -EPERM);
    cr_assert_str_eq(err, "not signed by this cluster's admission key");

    c = good, c.id = 8;
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), -EPERM, "another id");
    c = good, c.key[0] ^= 1;
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), -EPERM, "another key");
    c = good, c.serial++;
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), -EPERM, "another serial");
    c = good, c.expires = 1;
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), -EPERM, "another expiry");
    c = good, c.cluster[0] = 'L';
    cr_assert_eq(credential_check(&c, k.pk, NULL, 0, err, sizeof err), -EPERM, "another cluster's name");

    cr_assert_eq(credential_check(&good, k.pk, "other-run", 0, err, sizeof err), -EPERM);
    cr_assert_str_eq(err, "for cluster 'lab-run', not 'other-run'");

    c = good, c.expires = 1767225600, c.serial = 0; /* 2026-01-01T00:00:00Z */
    cr_assert_eq(credential_sign(&c, &k), 0);
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 1767225600, err, sizeof err), 0, "until then: %s", err);
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 1767225601, err, sizeof err), -EPERM);
    cr_assert_not_null(strstr(err, "expired at 2026-01-01T00:00:00Z"), "%s", err);

    c = good, c.id = 65536;
    cr_assert_eq(credential_sign(&c, &k), -EINVAL, "no id past 65535");
    c = good, snprintf(c.cluster, sizeof c.cluster, "a/b");
    cr_assert_eq(credential_sign(&c, &k), -EINVAL, "the cluster file's names only");
    admit_key_free(&k), admit_key_free(&other);
}

Test(peer_credential, a_malformed_file_is_refused_with_its_line)
{
    admit_key k;
    cr_assert_eq(admit_key_generate(&k), 0);
    credential c = signed_by(&k);
    char good[CREDENTIAL_TEXT_MAX], err[256];
    const size_t n = credential_write(&c, good);
    cr_assert_eq(credential_parse(&c, good, n, "7.cred", err, sizeof err), 0, "%s", err);
    /* good's lines: 1 comment, 2 credential, 3 cluster, 4 key, 5 id, 6 serial, 7 expires, 8 signature */
    const struct {
        const char *from, *to, *says;
    } bad[] = {
        {"credential 1", "credential 2", "7.cred:2: bad credential: this reader knows version 1"},
        {"cluster lab-run", "cluster lab/run", "7.cred:3: bad cluster: a cluster name is 1 to 64 letters, digits, "
                                               "'.', '_' or '-'"},
        {"key AQID", "key !QID", "7.cred:4: bad key: not base64"},
        {"id 7", "id 65536", "7.cred:5: bad id: an id is a number from 0 to 65535, or any"},
        {"id 7", "id 07", "7.cred:5: bad id: an id is a number from 0 to 65535, or any"},
        {"id 7", "id -1", "7.cred:5: bad id: an id is a number from 0 to 65535, or any"},
        {"serial ", "serial X", "7.cred:6: bad serial: a serial is 16 lower-case hexadecimal digits"},
        {"expires 0", "expires never", "7.cred:7: bad expires: expires is Unix seconds, or 0 for never"},
        {"signature ", "signature AAAA", "7.cred:8: bad signature: a signature is 64 bytes in canonical base64 (88 "
                                         "characters)"},
        {"id 7", "id 7\nid 7", "7.cred:6: 'id' given twice (first on line 5)"},
        {"id 7", "ident 7", "7.cred:5: unknown field 'ident' (expected credential, cluster, key, id, serial, expires "
                            "or signature)"},
        {"id 7\n", "", "7.cred: no 'id' line"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[2 * CREDENTIAL_TEXT_MAX];
        const char *at = strstr(good, bad[i].from);
        cr_assert_not_null(at, "%s", bad[i].from);
        const size_t pre = (size_t)(at - good), from = strlen(bad[i].from);
        snprintf(text, sizeof text, "%.*s%s%s", (int)pre, good, bad[i].to, at + from);
        err[0] = 0;
        cr_assert_eq(credential_parse(&c, text, strlen(text), "7.cred", err, sizeof err), -EINVAL, "%s", bad[i].to);
        cr_assert_str_eq(err, bad[i].says);
    }
    /* A signature in another spelling of the same bytes (a flipped unused bit before '=') is refused. */
    char text[CREDENTIAL_TEXT_MAX];
    memcpy(text, good, n + 1);
    char *sig = strstr(text, "signature ") + 10, *eq = strchr(sig, '=');
    cr_assert_not_null(eq);
    const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    eq[-1] = b64[(strchr(b64, eq[-1]) - b64) ^ 1];
    cr_assert_eq(credential_parse(&c, text, n, "7.cred", err, sizeof err), -EINVAL, "%s", text);
    admit_key_free(&k);
}

Test(peer_credential, a_revocation_by_the_admission_key_refuses_its_credential)
{
    admit_key k, other;
    char err[256] = "", text[CREDENTIAL_TEXT_MAX];
    cr_assert_eq(admit_key_generate(&k), 0);
    cr_assert_eq(admit_key_generate(&other), 0);
    const credential c = signed_by(&k);
    revocation r = {.serial = c.serial}, back;
    snprintf(r.cluster, sizeof r.cluster, "lab-run");
    cr_assert_eq(revocation_sign(&r, &k), 0);
    const size_t n = revocation_write(&r, text);
    cr_assert_eq(revocation_parse(&back, text, n, "7.revoked", err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(&back, &r, sizeof r), 0);
    cr_assert_eq(revocation_check(&back, k.pk, "lab-run", err, sizeof err), 0, "%s", err);
    cr_assert_eq(revocation_check(&back, other.pk, "lab-run", err, sizeof err), -EPERM, "another key's");
    cr_assert_str_eq(err, "not signed by this cluster's admission key");
    cr_assert_eq(revocation_check(&back, k.pk, "other-run", err, sizeof err), -EPERM, "another cluster's");
    back.serial ^= 1;
    cr_assert_eq(revocation_check(&back, k.pk, NULL, err, sizeof err), -EPERM, "changed after signing");

    const uint64_t revoked[] = {12345, r.serial};
    cr_assert_eq(credential_check(&c, k.pk, "lab-run", 0, err, sizeof err), 0, "still well signed");
    cr_assert_eq(credential_revoked(&c, revoked, 1, err, sizeof err), 0, "another serial");
    cr_assert_eq(credential_revoked(&c, revoked, 2, err, sizeof err), -EPERM);
    char says[64];
    snprintf(says, sizeof says, "revoked (serial %016" PRIx64 ")", c.serial);
    cr_assert_str_eq(err, says);

    cr_assert_eq(revocation_parse(&back, "revocation 1\ncluster lab-run\nserial 0\n", 39, "x", err, sizeof err),
                 -EINVAL);
    cr_assert_str_eq(err, "x:3: bad serial: a serial is 16 lower-case hexadecimal digits");
    credential not_one;
    cr_assert_eq(credential_parse(&not_one, text, n, "r", err, sizeof err), -EINVAL, "not a credential");
    cr_assert_str_eq(err, "r:2: unknown field 'revocation' (expected credential, cluster, key, id, serial, expires "
                          "or signature)");
    admit_key_free(&k), admit_key_free(&other);
}
