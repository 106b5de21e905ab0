/* sgp keygen: a peer's long-term key pair, as two files the cluster file and
 * `sgp peer` expect (NAME.key, mode 0600, and NAME.pub), and the public key
 * on stdout so that a launcher script can collect it:
 *
 *   pk=$(sgp keygen --out keys --id 3)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/config/keyfile.h"

static const char *CMD = "sgp keygen";

#define NAME_MAX_LEN 64

static void help(void)
{
    fputs("usage: sgp keygen [--out DIR] (--id N | --name NAME) [--force]\n\n"
          "Make a peer's long-term X25519 key pair: DIR/NAME.key (the secret key,\n"
          "mode 0600) and DIR/NAME.pub (the public key, for the cluster file), each\n"
          "one base64 line. The public key is also printed on stdout.\n\n"
          "  -o, --out DIR       directory to write to (default: the current one)\n"
          "  -i, --id N          name the files after peer id N: N.key, N.pub\n"
          "  -n, --name NAME     name the files NAME.key, NAME.pub (letters, digits, '.', '_', '-')\n"
          "  -f, --force         replace existing files (the old secret key is lost)\n"
          "  -h, --help          this text\n",
          stdout);
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > NAME_MAX_LEN || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

int cmd_keygen(int argc, char **argv)
{
    static const struct option long_opts[] = {{"out", required_argument, 0, 'o'},  {"id", required_argument, 0, 'i'},
                                              {"name", required_argument, 0, 'n'}, {"force", no_argument, 0, 'f'},
                                              {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    const char *dir = ".", *name = NULL;
    char idname[16];
    int force = 0, have_id = 0;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":ho:i:n:f", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
            return 0;
        case 'o':
            dir = optarg;
            break;
        case 'i': {
            long id;
            if (cli_long(CMD, "--id", optarg, 0, 65535, &id))
                return CLI_USAGE;
            snprintf(idname, sizeof idname, "%ld", id);
            have_id = 1;
            break;
        }
        case 'n':
            if (!name_ok(optarg))
                return cli_usage(CMD, "--name expects 1 to %d letters, digits, '.', '_' or '-' (not first), got '%s'",
                                 NAME_MAX_LEN, optarg);
            name = optarg;
            break;
        case 'f':
            force = 1;
            break;
        default:
            return cli_getopt_error(CMD, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (have_id && name)
        return cli_usage(CMD, "give --id or --name, not both");
    if (!have_id && !name)
        return cli_usage(CMD, "expected --id N or --name NAME");
    if (have_id)
        name = idname;
    if (!dir[0])
        return cli_usage(CMD, "--out expects a directory");

    struct stat st;
    if (stat(dir, &st) < 0) {
        fprintf(stderr, "%s: %s: %s\n", CMD, dir, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s: not a directory\n", CMD, dir);
        return 1;
    }
    size_t n = strlen(dir) + strlen(name) + 8;
    char *key_path = malloc(n), *pub_path = malloc(n);
    int status = 1;
    if (!key_path || !pub_path) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto out;
    }
    const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
    snprintf(key_path, n, "%s%s%s.key", dir, sep, name);
    snprintf(pub_path, n, "%s%s%s.pub", dir, sep, name);
    if (!force) {
        const char *paths[2] = {key_path, pub_path};
        for (int i = 0; i < 2; i++)
            if (access(paths[i], F_OK) == 0) {
                fprintf(stderr, "%s: %s exists (use --force to replace it)\n", CMD, paths[i]);
                goto out;
            }
    }
    sec_keypair kp = {0};
    char err[512];
    int rc = sec_keypair_generate(&kp);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot make a key: %s\n", CMD, strerror(-rc));
        goto out;
    }
    rc = keyfile_save(&kp, key_path, pub_path, force, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s%s\n", CMD, err, rc == -EEXIST ? " (use --force to replace it)" : "");
    } else {
        char b64[KEYFILE_B64];
        keyfile_pub_encode(kp.pk, b64);
        printf("%s\n", b64);
        status = 0;
    }
    sec_keypair_free(&kp);
out:
    free(key_path);
    free(pub_path);
    return status;
}
