/* `sgp launch --hosts` through a real sshd: the run directory is copied to
 * the hosts, the peers start over ssh, their results come back, and every
 * command to a host shares one ssh connection (with --no-shared-ssh each
 * logs in, and the run works the same). The sshd is this machine's
 * OpenSSH server on a free port of 127.0.0.1, with a host key and a client
 * key made for the test; the two "hosts" are 127.0.0.1 and 127.0.0.2 (both
 * loopback on Linux), two peers each. Needs root (sshd's privilege
 * separation) and openssh-server; skipped, saying so, without them. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/sgp_cluster.h"

static sgp_out o, o2;

static int can_bind(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Two consecutive free ports for the peers (--base-port: a host's peers
 * listen on P, P+1), below the kernel's range for outgoing connections so
 * that no connection of another test takes one meanwhile. */
static int free_port_pair(void)
{
    for (int k = 0; k < 6000; k++) {
        const int p = 20000 + (int)((getpid() * 7919L + 2L * k) % 12000);
        if (can_bind(p) && can_bind(p + 1))
            return p;
    }
    cr_assert_fail("no two free ports in 20000-32000");
    return 0;
}

/* Waits until something accepts connections on 127.0.0.1:port. */
static int await_listening(int port, pid_t server)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        const int up = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (up)
            return 1;
        if (waitpid(server, NULL, WNOHANG) == server)
            return 0; /* it exited */
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > SGP_EVENT_LIMIT_S)
            return 0;
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

static int count_lines(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, text) != NULL;
    if (f)
        fclose(f);
    return n;
}

static int mux_dirs(const char *tmp)
{
    DIR *d = opendir(tmp);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += !strncmp(e->d_name, "sgp-ssh-", 8);
    if (d)
        closedir(d);
    return n;
}

Test(peer_launch_ssh, four_peers_on_two_hosts_over_one_ssh_connection_each, .timeout = 600)
{
    if (geteuid() != 0 || access("/usr/sbin/sshd", X_OK) != 0 || access("/usr/bin/ssh", X_OK) != 0 ||
        access("/usr/bin/scp", X_OK) != 0)
        cr_skip_test("needs root and OpenSSH (/usr/sbin/sshd, ssh, scp): apt-get install openssh-server");
    char dir[] = "/tmp/sgp-lssh-XXXXXX", path[512], text[2048], cmd[1024];
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "mkdir -p /run/sshd %s/bin && ssh-keygen -q -t ed25519 -N '' -f %s/hostkey && "
             "ssh-keygen -q -t ed25519 -N '' -f %s/id",
             dir, dir, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const int port = sgp_free_port();
    snprintf(path, sizeof path, "%s/sshd_config", dir);
    snprintf(text, sizeof text,
             "Port %d\nListenAddress 127.0.0.1\nHostKey %s/hostkey\nAuthorizedKeysFile %s/id.pub\n"
             "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
             "UsePAM no\nStrictModes no\nPidFile none\nLogLevel INFO\nMaxStartups 64\nMaxSessions 64\n"
             "Subsystem sftp internal-sftp\n",
             port, dir, dir);
    sgp_write_text_mode(path, text, 0600);
    snprintf(path, sizeof path, "%s/ssh_config", dir);
    snprintf(text, sizeof text,
             "Host *\n  User root\n  Port %d\n  IdentityFile %s/id\n  IdentitiesOnly yes\n"
             "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
             port, dir);
    sgp_write_text_mode(path, text, 0600);
    /* sgp launch runs ssh and scp from PATH: these add the config above */
    snprintf(path, sizeof path, "%s/bin/ssh", dir);
    snprintf(text, sizeof text, "#!/bin/sh\nexec /usr/bin/ssh -F %s/ssh_config \"$@\"\n", dir);
    sgp_write_text_mode(path, text, 0755);
    snprintf(path, sizeof path, "%s/bin/scp", dir);
    snprintf(text, sizeof text, "#!/bin/sh\nexec /usr/bin/scp -S /usr/bin/ssh -F %s/ssh_config \"$@\"\n", dir);
    sgp_write_text_mode(path, text, 0755);

    char conf[256], log[256];
    snprintf(conf, sizeof conf, "%s/sshd_config", dir);
    snprintf(log, sizeof log, "%s/sshd.log", dir);
    pid_t sshd = fork();
    cr_assert(sshd >= 0);
    if (sshd == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", conf, (char *)NULL);
        _exit(127);
    }
    cr_assert(await_listening(port, sshd), "sshd did not start:\n%s", log);

    char hosts[256], run[256], remote[256], summary[256], base[16];
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    sgp_write_text_mode(hosts, "127.0.0.1 slots=2 ssh=root@127.0.0.1\n127.0.0.2 slots=2 ssh=root@127.0.0.1\n", 0644);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(remote, sizeof remote, "%s/remote", dir);
    snprintf(summary, sizeof summary, "%s/summary.json", dir);
    snprintf(base, sizeof base, "%d", free_port_pair());
    const char *old_path = getenv("PATH");
    snprintf(text, sizeof text, "%s/bin:%s", dir, old_path ? old_path : "/usr/bin:/bin");
    setenv("PATH", text, 1);
    /* The control socket directory goes to $TMPDIR: one of this test's own,
     * so that another launch on the machine meanwhile does not count. */
    char tmp[64];
    sgp_tmp_dir(tmp, sizeof tmp, "/tmp/sgp-ssh-test-XXXXXX");
    setenv("TMPDIR", tmp, 1);
    sgp_run(&o, "launch", "--peers", "4", "--hosts", hosts, "--base-port", base, "--model", "mlp:32", "--epochs",
            "1", "--run-dir", run, "--remote-dir", remote, "--summary", summary, NULL);
    cr_assert_eq(o.status, 0, "%s\n%s", o.out, o.err);
    const int logins = count_lines(log, "Accepted publickey");
    /* --no-shared-ssh: the same run with a login for every command */
    char run2[256], remote2[256];
    snprintf(run2, sizeof run2, "%s/run2", dir);
    snprintf(remote2, sizeof remote2, "%s/remote2", dir);
    sgp_run(&o2, "launch", "--peers", "4", "--hosts", hosts, "--base-port", base, "--model", "mlp:32", "--epochs",
            "1", "--run-dir", run2, "--remote-dir", remote2, "--no-shared-ssh", NULL);
    kill(sshd, SIGTERM);
    waitpid(sshd, NULL, 0);
    cr_assert_eq(o2.status, 0, "--no-shared-ssh:\n%s\n%s", o2.out, o2.err);
    const int unshared = count_lines(log, "Accepted publickey") - logins;
    cr_assert_geq(unshared, 12, "%d logins without sharing (copy, start and fetch of 4 peers)", unshared);
    /* the run happened on the "hosts": their logs are in the remote directory */
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/peer%d.jsonl", remote, i);
        cr_assert_eq(access(path, F_OK), 0, "%s", path);
    }
    /* and came back: summaries, models and logs (with the ledgers) */
    for (int i = 0; i < 4; i++) {
        const char *kinds[] = {"json", "model", "jsonl"};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/peer%d.%s", run, i, kinds[k]);
            cr_assert_eq(access(path, F_OK), 0, "%s was not fetched", path);
        }
    }
    cr_assert(strstr(o.out, "test accuracy "), "%s", o.out);
    cr_assert(strstr(o.out, "push-sum weight 4 of the 4 finished peers"), "the ledgers were read:\n%s", o.out);
    /* one connection a host (both "hosts" are reached as root@127.0.0.1):
     * the first command logs in and the rest go over it; without sharing,
     * 4 copies (2 logins each), 4 starts and 4 fetches log in 16 times or
     * more (24 measured). The margin covers a connection that timed out
     * between two commands on a very slow machine. */
    cr_assert(logins >= 1 && logins <= 4, "%d ssh logins (sshd log %s)", logins, log);
    unsetenv("TMPDIR");
    cr_assert_eq(mux_dirs(tmp), 0, "the control socket directory was left in %s", tmp);
    sgp_rm_rf(tmp);
    sgp_rm_rf(dir);
}
