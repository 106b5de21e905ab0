/* sgp cluster: a cluster's admission key and the credentials it signs
 * (peer/config/CLUSTER.md, "Admission credentials"):
 *
 *   sgp cluster keygen --out keys                       # keys/admit.key, keys/admit.pub
 *   sgp cluster admit --admit-key keys/admit.key --cluster lab-run \
 *       --key 7.pub --id 7 --valid-days 30 --out 7.cred
 *   sgp cluster check --admit-pub keys/admit.pub --credential 7.cred --cluster lab-run
 *   sgp cluster revoke --admit-key keys/admit.key --cluster lab-run --serial S --out 7.revoked
 *   sgp cluster check ... --revoked 7.revoked            # refused now
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/config/credential.h"
#include "peer/config/keyfile.h"

static const char *CMD = "sgp cluster";

static void help(void)
{
    fputs("usage: sgp cluster keygen --out DIR [--force]\n"
          "       sgp cluster admit --admit-key FILE --cluster NAME --key PUB [--id N] [--valid-days D]\n"
          "                         --out FILE [--force]\n"
          "       sgp cluster check --admit-pub FILE --credential FILE [--cluster NAME] [--revoked FILE]...\n"
          "       sgp cluster revoke --admit-key FILE --cluster NAME --serial HEX --out FILE [--force]\n\n"
          "A cluster's admission key admits peers that are not in its cluster file: whoever\n"
          "holds it signs a peer's public key into a credential, a small file the peer shows\n"
          "when it joins; checking one needs only the admission public key, so nothing runs\n"
          "beside the peers (peer/config/CLUSTER.md, \"Admission credentials\").\n\n"
          "  keygen                make DIR/admit.key (Ed25519 seed, mode 0600) and DIR/admit.pub;\n"
          "                        the public key is printed on stdout\n"
          "  admit                 sign a credential for the peer whose public key is PUB (a .pub\n"
          "                        file of sgp keygen, or the key's base64)\n"
          "  check                 say whether a credential is good for this cluster, now\n"
          "  revoke                sign a revocation of the credential with serial HEX\n\n"
          "  -o, --out DIR|FILE    where keygen writes its files, where admit writes the credential\n"
          "  -a, --admit-key FILE  the admission secret key (admit)\n"
          "  -p, --admit-pub FILE  the admission public key (check)\n"
          "  -c, --cluster NAME    the cluster's name, as its cluster file says it\n"
          "  -k, --key PUB         the admitted peer's public key\n"
          "  -i, --id N            the id it may take, 0 to 65535 [any]\n"
          "  -d, --valid-days D    days until it expires, 0 for never [0]\n"
          "  -r, --credential FILE the credential to check\n"
          "  -v, --revoked FILE    a revocation the check takes into account (repeatable)\n"
          "  -s, --serial HEX      the serial of the credential to revoke (16 hexadecimal digits)\n"
          "  -f, --force           replace existing files\n"
          "  -h, --help            this text\n",
          stdout);
}

#define REVOKED_MAX 64

typedef struct args {
    const char *out, *admit_key, *admit_pub, *cluster, *key, *credential, *serial;
    const char *revoked[REVOKED_MAX];
    int n_revoked;
    long id;
    double days;
    int force;
} args;

static int option(void *ctx, int code, const char *v)
{
    args *a = ctx;
    switch (code) {
    case 'o': a->out = v; return CLI_OK;
    case 'a': a->admit_key = v; return CLI_OK;
    case 'p': a->admit_pub = v; return CLI_OK;
    case 'c': a->cluster = v; return CLI_OK;
    case 'k': a->key = v; return CLI_OK;
    case 'r': a->credential = v; return CLI_OK;
    case 's': a->serial = v; return CLI_OK;
    case 'v':
        if (a->n_revoked == REVOKED_MAX)
            return cli_usage(CMD, "at most %d --revoked files", REVOKED_MAX);
        a->revoked[a->n_revoked++] = v;
        return CLI_OK;
    case 'f': a->force = 1; return CLI_OK;
    case 'i': return cli_long(CMD, "--id", v, 0, 65535, &a->id);
    case 'd': return cli_double(CMD, "--valid-days", v, 0, 100000, &a->days);
    default: return CLI_NOT_MINE;
    }
}

static int keygen(const args *a)
{
    if (!a->out)
        return cli_usage(CMD, "keygen needs --out DIR");
    char key_path[4096], pub_path[4096], err[512], b64[KEYFILE_B64];
    snprintf(key_path, sizeof key_path, "%s/admit.key", a->out);
    snprintf(pub_path, sizeof pub_path, "%s/admit.pub", a->out);
    admit_key k;
    int rc = admit_key_generate(&k);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot make a key: %s\n", CMD, strerror(-rc));
        return 1;
    }
    rc = admit_key_save(&k, key_path, pub_path, a->force, err, sizeof err);
    if (rc == 0) {
        keyfile_pub_encode(k.pk, b64);
        printf("%s\n", b64);
    } else
        fprintf(stderr, "%s: %s%s\n", CMD, err, rc == -EEXIST ? " (use --force to replace it)" : "");
    admit_key_free(&k);
    return rc == 0 ? 0 : 1;
}

/* "never", or the UTC time of `expires`. */
static const char *expiry(int64_t expires, char out[40])
{
    const time_t t = (time_t)expires;
    struct tm tm;
    if (!expires || !gmtime_r(&t, &tm) || !strftime(out, 40, "at %Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, 40, "never");
    return out;
}

/* PUB: a .pub file, or the key's base64 itself. */
static int read_pub(const char *pub, uint8_t pk[SEC_KEY_BYTES], char *err, size_t errlen)
{
    struct stat st;
    if (stat(pub, &st) == 0)
        return keyfile_load_pub(pk, pub, err, errlen);
    const char *why;
    if (keyfile_pub_decode(pk, pub, strlen(pub), &why) == 0)
        return 0;
    snprintf(err, errlen, "--key '%s' is neither a file nor a key (%s)", pub, why);
    return -EINVAL;
}

static int admit(const args *a)
{
    if (!a->admit_key || !a->cluster || !a->key || !a->out)
        return cli_usage(CMD, "admit needs --admit-key, --cluster, --key and --out");
    credential c = {.id = a->id};
    if (snprintf(c.cluster, sizeof c.cluster, "%s", a->cluster) >= (int)sizeof c.cluster)
        return cli_usage(CMD, "--cluster: a name is at most %d characters", CREDENTIAL_NAME_MAX);
    if (a->days > 0)
        c.expires = (int64_t)time(NULL) + (int64_t)(a->days * 86400.0);
    char err[512];
    admit_key k;
    if (read_pub(a->key, c.key, err, sizeof err) < 0 || admit_key_load(&k, a->admit_key, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    int rc = credential_sign(&c, &k);
    admit_key_free(&k);
    if (rc < 0)
        return cli_usage(CMD, "--cluster '%s' is not a cluster name (1 to 64 letters, digits, '.', '_' or '-')",
                         a->cluster);
    if ((rc = credential_save(&c, a->out, a->force, err, sizeof err)) < 0) {
        fprintf(stderr, "%s: %s%s\n", CMD, err, rc == -EEXIST ? " (use --force to replace it)" : "");
        return 1;
    }
    char when[40];
    printf("%s: credential %016" PRIx64 " for cluster %s, id %s, expires %s\n", a->out, c.serial, c.cluster,
           c.id == CREDENTIAL_ANY_ID ? "any" : (snprintf(err, sizeof err, "%ld", c.id), err), expiry(c.expires, when));
    return 0;
}

static int check(const args *a)
{
    if (!a->admit_pub || !a->credential)
        return cli_usage(CMD, "check needs --admit-pub and --credential");
    uint8_t pk[SEC_KEY_BYTES];
    credential c;
    char err[512];
    if (keyfile_load_pub(pk, a->admit_pub, err, sizeof err) < 0 ||
        credential_load(&c, a->credential, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    revocation revs[REVOKED_MAX];
    uint64_t revoked[REVOKED_MAX];
    if (revocations_load(a->revoked, a->n_revoked, pk, c.cluster, revs, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    for (int i = 0; i < a->n_revoked; i++)
        revoked[i] = revs[i].serial;
    if (credential_check(&c, pk, a->cluster, (int64_t)time(NULL), err, sizeof err) < 0 ||
        credential_revoked(&c, revoked, (size_t)a->n_revoked, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s: refused: %s\n", CMD, a->credential, err);
        return 1;
    }
    char key[KEYFILE_B64], when[40], id[24] = "any";
    keyfile_pub_encode(c.key, key);
    if (c.id != CREDENTIAL_ANY_ID)
        snprintf(id, sizeof id, "%ld", c.id);
    printf("%s: good: cluster %s, key %s, id %s, serial %016" PRIx64 ", expires %s\n", a->credential, c.cluster, key,
           id, c.serial, expiry(c.expires, when));
    return 0;
}

static int revoke(const args *a)
{
    if (!a->admit_key || !a->cluster || !a->serial || !a->out)
        return cli_usage(CMD, "revoke needs --admit-key, --cluster, --serial and --out");
    revocation r = {0};
    char err[512], *end;
    errno = 0;
    r.serial = strtoull(a->serial, &end, 16);
    if (strlen(a->serial) != 16 || *end || errno)
        return cli_usage(CMD, "--serial expects 16 hexadecimal digits, got '%s'", a->serial);
    if (snprintf(r.cluster, sizeof r.cluster, "%s", a->cluster) >= (int)sizeof r.cluster)
        return cli_usage(CMD, "--cluster: a name is at most %d characters", CREDENTIAL_NAME_MAX);
    admit_key k;
    if (admit_key_load(&k, a->admit_key, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    int rc = revocation_sign(&r, &k);
    admit_key_free(&k);
    if (rc < 0)
        return cli_usage(CMD, "--cluster '%s' is not a cluster name (1 to 64 letters, digits, '.', '_' or '-')",
                         a->cluster);
    if ((rc = revocation_save(&r, a->out, a->force, err, sizeof err)) < 0) {
        fprintf(stderr, "%s: %s%s\n", CMD, err, rc == -EEXIST ? " (use --force to replace it)" : "");
        return 1;
    }
    printf("%s: revocation of credential %016" PRIx64 " of cluster %s\n", a->out, r.serial, r.cluster);
    return 0;
}

int cmd_cluster(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'},       {"admit-key", required_argument, 0, 'a'},
        {"admit-pub", required_argument, 0, 'p'}, {"cluster", required_argument, 0, 'c'},
        {"key", required_argument, 0, 'k'},       {"id", required_argument, 0, 'i'},
        {"valid-days", required_argument, 0, 'd'}, {"credential", required_argument, 0, 'r'},
        {"revoked", required_argument, 0, 'v'},   {"serial", required_argument, 0, 's'},
        {"force", no_argument, 0, 'f'},           {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            help();
            return 0;
        }
        return cli_usage(CMD, "expected keygen, admit, check or revoke");
    }
    const char *what = argv[1];
    args a = {.id = CREDENTIAL_ANY_ID};
    int helped = 0;
    int rc = cli_parse(CMD, argc - 1, argv + 1, opts, help, option, &a, &helped);
    if (rc != CLI_OK || helped)
        return rc;
    if (!strcmp(what, "keygen"))
        return keygen(&a);
    if (!strcmp(what, "admit"))
        return admit(&a);
    if (!strcmp(what, "check"))
        return check(&a);
    if (!strcmp(what, "revoke"))
        return revoke(&a);
    return cli_usage(CMD, "unknown subcommand '%s' (expected keygen, admit, check or revoke)", what);
}
