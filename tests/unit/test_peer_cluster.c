/* The cluster file (peer/config/CLUSTER.md): a good file loads with every kind of
 * address; every rule fails with the documented line and message (the first
 * problem in file order wins); a failed parse leaves the cluster zeroed; and
 * write-then-load gives the same cluster. */
#include "peer/config/cluster.h"
#include "peer/config/keyfile.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/sgp_files.h"

static char g_dir[64];

static void setup(void) { sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/test_peer_cluster_XXXXXX"); }

static void teardown(void) { sgp_rm_rf(g_dir); }

TestSuite(peer_cluster, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

/* A distinct, deterministic public key per i, and its base64. */
static void key_of(int i, uint8_t pk[SEC_KEY_BYTES])
{
    for (int k = 0; k < SEC_KEY_BYTES; k++)
        pk[k] = (uint8_t)(i * 37 + k * 11 + (i >> 8) * 3 + 1);
    pk[0] = (uint8_t)i, pk[1] = (uint8_t)(i >> 8);
}

static const char *key(int i)
{
    static char buf[8][KEYFILE_B64];
    static int n;
    char *b = buf[n++ % 8];
    uint8_t pk[SEC_KEY_BYTES];
    key_of(i, pk);
    keyfile_pub_encode(pk, b);
    return b;
}

static int parse(cluster *c, const char *text, parse_error *e)
{
    return cluster_parse(c, text, strlen(text), "c.conf", "/etc/sgp", e);
}

static void expect_error(const char *text, int line, const char *needle)
{
    cluster c;
    parse_error e;
    memset(&c, 0x5a, sizeof c); /* parse must not trust what was there */
    int rc = parse(&c, text, &e);
    cr_assert_eq(rc, -EBADMSG, "rc %d for:\n%s\nmsg: %s", rc, text, e.msg);
    cr_assert_str_eq(e.file, "c.conf");
    cr_assert_eq(e.line, line, "line %d, expected %d: %s\n---\n%s", e.line, line, e.msg, text);
    cr_assert(strstr(e.msg, needle), "expected '%s' in: %s\n---\n%s", needle, e.msg, text);
    cr_assert_null(c.peers, "a failed parse leaves c zeroed");
    cr_assert_null(c.topology_path);
    cr_assert_eq(c.n_peers, 0);
    cluster_free(&c);
}

static void expect_ok(cluster *c, const char *text)
{
    parse_error e;
    int rc = parse(c, text, &e);
    cr_assert_eq(rc, 0, "%s:%d: %s\n---\n%s", e.file, e.line, e.msg, text);
}

/* "cluster t\ntopology x.topo\n" followed by the given lines. */
static char *with_header(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *with_header(const char *fmt, ...)
{
    static char buf[8192];
    int n = snprintf(buf, sizeof buf, "cluster t\ntopology x.topo\n");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    return buf;
}

static void same_cluster(const cluster *a, const cluster *b)
{
    cr_assert_str_eq(a->name, b->name);
    cr_assert_str_eq(a->topology, b->topology);
    cr_assert_eq(a->n_peers, b->n_peers);
    for (int i = 0; i < a->n_peers; i++) {
        cr_assert_eq(a->peers[i].id, (uint32_t)i);
        cr_assert_eq(b->peers[i].id, (uint32_t)i);
        cr_assert_str_eq(a->peers[i].host, b->peers[i].host, "peer %d", i);
        cr_assert_eq(a->peers[i].port, b->peers[i].port, "peer %d", i);
        cr_assert_eq(a->peers[i].family, b->peers[i].family, "peer %d", i);
        cr_assert_eq(memcmp(a->peers[i].pk, b->peers[i].pk, SEC_KEY_BYTES), 0, "peer %d", i);
    }
}

/* ---- good files ------------------------------------------------------------ */

Test(peer_cluster, good_file_with_every_kind_of_address)
{
    char text[4096];
    snprintf(text, sizeof text,
             "# a four-peer run\r\n"
             "\n"
             "cluster my-run-2026   # names may have . _ -\r\n"
             "topology topologies/exp8.topo\n"
             "\tpeer 2  [fe80::1%%eth0]:7002 %s\n"
             "peer 0 127.0.0.1:7000 %s # comment after a key\n"
             "peer 3 node-3.lan:65535 %s\n"
             "   peer 1 [::1]:1 %s",
             key(2), key(0), key(3), key(1));
    cluster c;
    expect_ok(&c, text);
    cr_assert_str_eq(c.name, "my-run-2026");
    cr_assert_str_eq(c.topology, "topologies/exp8.topo");
    cr_assert_str_eq(c.topology_path, "/etc/sgp/topologies/exp8.topo", "relative to the file's directory");
    cr_assert_eq(c.n_peers, 4);
    static const struct {
        const char *host;
        unsigned port;
        int family, line;
    } want[] = {{"127.0.0.1", 7000, CLUSTER_IPV4, 6},
                {"::1", 1, CLUSTER_IPV6, 8},
                {"fe80::1%eth0", 7002, CLUSTER_IPV6, 5},
                {"node-3.lan", 65535, CLUSTER_HOST_NAME, 7}};
    for (int i = 0; i < 4; i++) {
        const cluster_peer *p = &c.peers[i];
        cr_assert_eq(p->id, (uint32_t)i, "peers are stored by id");
        cr_assert_str_eq(p->host, want[i].host);
        cr_assert_eq(p->port, want[i].port);
        cr_assert_eq(p->family, want[i].family, "peer %d", i);
        cr_assert_eq(p->line, want[i].line, "peer %d", i);
        uint8_t pk[SEC_KEY_BYTES], got[SEC_KEY_BYTES];
        key_of(i, pk);
        cr_assert_eq(memcmp(p->pk, pk, SEC_KEY_BYTES), 0);
        cr_assert_eq(cluster_pubkey_lookup(&c, (uint32_t)i, got), 0);
        cr_assert_eq(memcmp(got, pk, SEC_KEY_BYTES), 0);
    }
    uint8_t got[SEC_KEY_BYTES];
    cr_assert_eq(cluster_pubkey_lookup(&c, 4, got), -ENOENT);
    cr_assert_eq(cluster_pubkey_lookup(&c, UINT32_MAX, got), -ENOENT);
    char addr[300];
    cluster_peer_addr(&c.peers[2], addr, sizeof addr);
    cr_assert_str_eq(addr, "[fe80::1%eth0]:7002");
    cluster_peer_addr(&c.peers[3], addr, sizeof addr);
    cr_assert_str_eq(addr, "node-3.lan:65535");
    cluster_free(&c);
    cluster_free(&c);
    cr_assert_null(c.peers);
}

Test(peer_cluster, load_resolves_the_topology_against_the_file_directory)
{
    char sub[128], path[160], text[512];
    snprintf(sub, sizeof sub, "%s/run", g_dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/cluster.conf", sub);
    snprintf(text, sizeof text, "cluster a\ntopology topo/x.topo\npeer 0 h:1 %s\n", key(0));
    sgp_write_text(path, text);
    cluster c;
    parse_error e;
    cr_assert_eq(cluster_load(&c, path, &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
    char want[200];
    snprintf(want, sizeof want, "%s/topo/x.topo", sub);
    cr_assert_str_eq(c.topology_path, want);
    cluster_free(&c);

    snprintf(text, sizeof text, "cluster a\ntopology /abs/x.topo\npeer 0 h:1 %s\n", key(0));
    sgp_write_text(path, text);
    cr_assert_eq(cluster_load(&c, path, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c.topology_path, "/abs/x.topo", "absolute paths stay");
    cluster_free(&c);

    /* in memory without a directory: as written */
    snprintf(text, sizeof text, "cluster a\ntopology topo/x.topo\npeer 0 h:1 %s\n", key(0));
    cr_assert_eq(cluster_parse(&c, text, strlen(text), "mem", NULL, &e), 0);
    cr_assert_str_eq(c.topology_path, "topo/x.topo");
    cluster_free(&c);

    /* the last line may lack its newline; NUL-free text is not required */
    char with_nul[256];
    int n = snprintf(with_nul, sizeof with_nul, "cluster a\ntopology t\npeer 0 h:1 %s", key(0));
    cr_assert_eq(cluster_parse(&c, with_nul, (size_t)n, "mem", NULL, &e), 0, "%s", e.msg);
    cluster_free(&c);
    with_nul[n] = 'x'; /* a parser that reads past len would see this */
    cr_assert_eq(cluster_parse(&c, with_nul, (size_t)n, "mem", NULL, &e), 0, "%s", e.msg);
    cluster_free(&c);
}

Test(peer_cluster, missing_or_unreadable_file)
{
    cluster c;
    parse_error e;
    char path[128];
    snprintf(path, sizeof path, "%s/nope.conf", g_dir);
    cr_assert_eq(cluster_load(&c, path, &e), -ENOENT);
    cr_assert_str_eq(e.file, path);
    cr_assert_eq(e.line, 0);
    cr_assert(strstr(e.msg, "No such file"), "%s", e.msg);
    cr_assert_null(c.peers);
    cr_assert_eq(cluster_load(&c, g_dir, &e), -EISDIR, "%s", e.msg);
    cr_assert_eq(cluster_load(&c, NULL, &e), -EINVAL);
    cr_assert_eq(cluster_load(&c, path, NULL), -ENOENT, "e may be NULL");
}

/* ---- every error, with its line ------------------------------------------- */

Test(peer_cluster, unknown_keyword_and_header_lines)
{
    expect_error("cluster a\ntopology t\nnode 0 h:1 x\n", 3, "unknown keyword 'node'");
    expect_error("# c\nCluster a\n", 2, "unknown keyword 'Cluster'");
    expect_error("cluster\n", 1, "expected 'cluster NAME'");
    expect_error("\n\ncluster a b\n", 3, "expected 'cluster NAME'");
    expect_error("cluster a\ncluster b\n", 2, "'cluster' given twice (first on line 1)");
    expect_error("cluster bad/name\n", 1, "cluster name 'bad/name' must be");
    expect_error("cluster a\ntopology\n", 2, "expected 'topology PATH'");
    expect_error("cluster a\ntopology my file.topo\n", 2, "expected 'topology PATH'");
    expect_error("topology a\ntopology b\n", 2, "'topology' given twice (first on line 1)");
    char longname[200], longpath[1100 + 32];
    memset(longname, 'n', 65);
    longname[65] = 0;
    char text[2048];
    snprintf(text, sizeof text, "cluster %s\n", longname);
    expect_error(text, 1, "must be 1 to 64");
    memset(longname, 'n', 64);
    longname[64] = 0;
    snprintf(text, sizeof text, "cluster %s\ntopology t\npeer 0 h:1 %s\n", longname, key(0));
    cluster c;
    expect_ok(&c, text);
    cluster_free(&c);
    strcpy(longpath, "topology ");
    memset(longpath + 9, 'p', 1025);
    longpath[9 + 1025] = 0;
    expect_error(longpath, 1, "longer than 1024");
    expect_error("cluster a\ntopology t\x01x\n", 2, "control characters");
}

Test(peer_cluster, whole_file_problems_are_line_0)
{
    expect_error("", 0, "no 'cluster NAME' line");
    expect_error("# only a comment\n\n", 0, "no 'cluster NAME' line");
    char text[512];
    snprintf(text, sizeof text, "topology t\npeer 0 h:1 %s\n", key(0));
    expect_error(text, 0, "no 'cluster NAME' line");
    snprintf(text, sizeof text, "cluster a\npeer 0 h:1 %s\n", key(0));
    expect_error(text, 0, "no 'topology PATH' line");
    expect_error("cluster a\ntopology t\n", 0, "no 'peer' lines");
}

Test(peer_cluster, peer_line_fields)
{
    expect_error(with_header("peer 0 h:1\n"), 3, "expected 'peer ID HOST:PORT KEY'");
    expect_error(with_header("peer 0 h:1 %s extra\n", key(0)), 3, "found more");
    expect_error(with_header("peer x h:1 %s\n", key(0)), 3, "peer id 'x' is not a number from 0 to 65535");
    expect_error(with_header("peer -1 h:1 %s\n", key(0)), 3, "peer id '-1'");
    expect_error(with_header("peer +1 h:1 %s\n", key(0)), 3, "peer id '+1'");
    expect_error(with_header("peer 65536 h:1 %s\n", key(0)), 3, "peer id '65536'");
    expect_error(with_header("peer 99999999999 h:1 %s\n", key(0)), 3, "peer id '99999999999'");
}

Test(peer_cluster, addresses)
{
    static const struct {
        const char *addr, *needle;
    } bad[] = {
        {"node.lan", "'node.lan' is not HOST:PORT"},
        {"node.lan:0", "port '0' is not a number from 1 to 65535"},
        {"node.lan:65536", "port '65536'"},
        {"node.lan:http", "port 'http'"},
        {"node.lan:", "port ''"},
        {"node.lan:-1", "port '-1'"},
        {":7000", "missing host ''"},
        {"999.1.1.1:7000", "bad IPv4 address '999.1.1.1'"},
        {"1.2.3:7000", "bad IPv4 address '1.2.3'"},
        {"10.0.0.01:7000", "bad IPv4 address"},
        {"::1:7000", "IPv6 addresses go in brackets"},
        {"fe80::1%eth0:7000", "IPv6 addresses go in brackets"},
        {"[::g]:7000", "bad IPv6 address '::g'"},
        {"[1.2.3.4]:7000", "bad IPv6 address"},
        {"[::1:7000", "is not [IPV6]:PORT"},
        {"[::1]7000", "is not [IPV6]:PORT"},
        {"[::1]", "is not [IPV6]:PORT"},
        {"[]:7000", "bad IPv6 address ''"},
        {"[fe80::1%]:7000", "bad IPv6 zone"},
        {"[fe80::1%a/b]:7000", "bad IPv6 zone"},
        {"[fe80::1%0123456789abcdef]:7000", "bad IPv6 zone"},
        {"-node.lan:7000", "bad host name '-node.lan'"},
        {"node-.lan:7000", "bad host name"},
        {"a..b:7000", "bad host name"},
        {"node.lan.:7000", "bad host name"},
        {"no de:7000", NULL}, /* two tokens: the field count is wrong */
        {"n\xc3\xa9ud:7000", "bad host name 'n??ud'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_error(with_header("peer 0 %s %s\n", bad[i].addr, key(0)), 3,
                     bad[i].needle ? bad[i].needle : "expected 'peer ID HOST:PORT KEY'");
    char label[80], host[300];
    memset(label, 'a', 64);
    label[64] = 0;
    expect_error(with_header("peer 0 %s.lan:1 %s\n", label, key(0)), 3, "bad host name");
    label[63] = 0;
    cluster c;
    expect_ok(&c, with_header("peer 0 %s.lan:1 %s\n", label, key(0)));
    cluster_free(&c);
    /* 253 characters is the longest name */
    memset(host, 0, sizeof host);
    for (int k = 0; k < 4; k++) {
        memset(host + k * 64, 'a', 63);
        host[k * 64 + 63] = '.';
    }
    host[253] = 0; /* 4 labels: 63,63,63,61 */
    expect_ok(&c, with_header("peer 0 %s:1 %s\n", host, key(0)));
    cr_assert_eq(strlen(c.peers[0].host), 253);
    cluster_free(&c);
    host[253] = 'a';
    host[254] = 0;
    expect_error(with_header("peer 0 %s:1 %s\n", host, key(0)), 3, "longer than 253");
    /* names that look odd but are fine */
    expect_ok(&c, with_header("peer 0 localhost:7000 %s\npeer 1 my_service:7000 %s\npeer 2 1node.x9:7000 %s\n"
                              "peer 3 [::ffff:10.0.0.1]:7000 %s\n",
                              key(0), key(1), key(2), key(3)));
    cr_assert_eq(c.peers[2].family, CLUSTER_HOST_NAME);
    cr_assert_eq(c.peers[3].family, CLUSTER_IPV6);
    cluster_free(&c);
}

Test(peer_cluster, keys)
{
    uint8_t pk[SEC_KEY_BYTES];
    key_of(0, pk);
    char k[KEYFILE_B64];
    keyfile_pub_encode(pk, k);
    expect_error(with_header("peer 0 h:1 %.43s\n", k), 3, "peer 0: bad key: not base64");
    expect_error(with_header("peer 0 h:1 %.40s\n", k), 3, "peer 0: bad key: wrong length");
    expect_error(with_header("peer 0 h:1 %s%s\n", k, "AAAA"), 3, "peer 0: bad key: not base64");
    expect_error(with_header("peer 0 h:1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 3,
                 "peer 0: bad key: wrong length");
    expect_error(with_header("peer 0 h:1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n"), 3,
                 "peer 0: bad key: not canonical");
    expect_error(with_header("peer 0 h:1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-_A=\n"), 3,
                 "peer 0: bad key: not base64");
    k[5] = '#'; /* a comment starts inside the key: the key is cut short */
    expect_error(with_header("peer 0 h:1 %s\n", k), 3, "peer 0: bad key");
}

Test(peer_cluster, duplicates)
{
    expect_error(with_header("peer 0 a:1 %s\n\npeer 1 b:1 %s\npeer 0 c:1 %s\n", key(0), key(1), key(2)), 6,
                 "peer 0 already defined on line 3");
    expect_error(with_header("peer 0 a:1 %s\npeer 1 b:1 %s\npeer 2 c:1 %s\n", key(0), key(1), key(0)), 5,
                 "peer 2 has the same key as peer 0 (line 3)");
    expect_error(with_header("peer 0 a:1 %s\npeer 1 b:1 %s\npeer 2 b:1 %s\n", key(0), key(1), key(2)), 5,
                 "peer 2 has the same address as peer 1 (line 4)");
    /* one address however it is written */
    expect_error(with_header("peer 0 [::1]:7 %s\npeer 1 [0:0::1]:7 %s\n", key(0), key(1)), 4,
                 "same address as peer 0");
    expect_error(with_header("peer 0 Node.LAN:7 %s\npeer 1 node.lan:7 %s\n", key(0), key(1)), 4,
                 "same address as peer 0");
    /* but the same host on two ports, or two zones, is two addresses */
    cluster c;
    expect_ok(&c, with_header("peer 0 h:7000 %s\npeer 1 h:7001 %s\npeer 2 [fe80::1%%a]:1 %s\n"
                              "peer 3 [fe80::1%%b]:1 %s\n",
                              key(0), key(1), key(2), key(3)));
    cluster_free(&c);
}

Test(peer_cluster, ids_must_be_0_to_n_minus_1)
{
    expect_error(with_header("peer 0 a:1 %s\npeer 1 b:1 %s\npeer 3 c:1 %s\n", key(0), key(1), key(3)), 5,
                 "peer id 3 is out of range: 3 peers have ids 0 to 2 (peer 2 is missing)");
    expect_error(with_header("peer 7 a:1 %s\npeer 1 b:1 %s\npeer 9 c:1 %s\n", key(7), key(1), key(9)), 3,
                 "peer id 7 is out of range: 3 peers have ids 0 to 2 (peer 0 is missing)");
    expect_error(with_header("peer 1 a:1 %s\n", key(1)), 3, "(peer 0 is missing)");
}

Test(peer_cluster, the_first_problem_in_file_order_is_reported)
{
    /* a duplicate key on line 4 comes before an unknown keyword on line 5 */
    expect_error(with_header("peer 0 a:1 %s\npeer 1 b:1 %s\nbogus\n", key(0), key(0)), 4, "same key");
    /* and a gap in the ids is only known at the end, so a later bad line wins */
    expect_error(with_header("peer 5 a:1 %s\nbogus\n", key(0)), 4, "unknown keyword");
}

Test(peer_cluster, many_peers_parse_and_duplicates_are_found_among_them)
{
    const int n = 3000;
    size_t cap = (size_t)n * 100 + 100, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "cluster big\ntopology t\n");
    for (int i = n - 1; i >= 0; i--)
        len += (size_t)snprintf(text + len, cap - len, "peer %d 10.%d.%d.%d:7000 %s\n", i, i >> 16, (i >> 8) & 255,
                                i & 255, key(i));
    cluster c;
    parse_error e;
    cr_assert_eq(cluster_parse(&c, text, len, "big", NULL, &e), 0, "%d: %s", e.line, e.msg);
    cr_assert_eq(c.n_peers, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(c.peers[i].id, (uint32_t)i);
    cluster_free(&c);
    len += (size_t)snprintf(text + len, cap - len, "peer %d 10.200.0.1:7000 %s\n", n, key(1234));
    cr_assert_eq(cluster_parse(&c, text, len, "big", NULL, &e), -EBADMSG);
    cr_assert_eq(e.line, n + 3);
    cr_assert(strstr(e.msg, "same key as peer 1234"), "%s", e.msg);
    free(text);
}

/* ---- building, writing, reading back ---------------------------------------- */

static void round_trip(const cluster *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cluster_write(a, f, "written by a test\nsecond comment line"), 0);
    fclose(f);
    cluster b;
    parse_error e;
    cr_assert_eq(cluster_parse(&b, buf, len, "rt", NULL, &e), 0, "%d: %s\n---\n%s", e.line, e.msg, buf);
    same_cluster(a, &b);
    /* writing what was read gives the same text */
    char *buf2 = NULL;
    size_t len2 = 0;
    f = open_memstream(&buf2, &len2);
    cr_assert_eq(cluster_write(&b, f, "written by a test\nsecond comment line"), 0);
    fclose(f);
    cr_assert_eq(len2, len);
    cr_assert_eq(memcmp(buf, buf2, len), 0, "%s\n---\n%s", buf, buf2);
    free(buf);
    free(buf2);
    cluster_free(&b);
}

Test(peer_cluster, build_write_load_round_trip)
{
    cluster c;
    cr_assert_eq(cluster_init(&c, "round.trip_1", "topologies/exp8.topo"), 0);
    static const char *hosts[] = {"127.0.0.1", "[::1]", "fe80::1%eth0", "node3.lan", "10.0.0.2", "my_service"};
    for (int i = 0; i < 6; i++) {
        uint8_t pk[SEC_KEY_BYTES];
        key_of(i, pk);
        cr_assert_eq(cluster_add_peer(&c, hosts[i], 7000 + (unsigned)i, pk), i, "%s", hosts[i]);
    }
    cr_assert_str_eq(c.peers[1].host, "::1", "brackets are the file's, not the host's");
    cr_assert_eq(c.peers[2].family, CLUSTER_IPV6);
    round_trip(&c);

    char path[128];
    snprintf(path, sizeof path, "%s/c.conf", g_dir);
    FILE *f = fopen(path, "w");
    cr_assert_eq(cluster_write(&c, f, NULL), 0);
    fclose(f);
    cluster d;
    parse_error e;
    cr_assert_eq(cluster_load(&d, path, &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
    same_cluster(&c, &d);
    uint8_t ia[SEC_CLUSTER_ID_BYTES], ib[SEC_CLUSTER_ID_BYTES];
    cluster_id(&c, ia);
    cluster_id(&d, ib);
    cr_assert_eq(memcmp(ia, ib, sizeof ia), 0);
    cluster_free(&d);
    cluster_free(&c);
}

Test(peer_cluster, add_peer_checks_like_the_parser)
{
    cluster c;
    cr_assert_eq(cluster_init(&c, "bad name", "t"), -EINVAL);
    cr_assert_eq(cluster_init(&c, "a", "my file"), -EINVAL);
    cr_assert_eq(cluster_init(&c, "a", ""), -EINVAL);
    cr_assert_eq(cluster_init(&c, "a", "t"), 0);
    uint8_t pk[SEC_KEY_BYTES];
    key_of(0, pk);
    cr_assert_eq(cluster_add_peer(&c, "999.0.0.1", 1, pk), -EINVAL);
    cr_assert_eq(cluster_add_peer(&c, "h", 0, pk), -EINVAL);
    cr_assert_eq(cluster_add_peer(&c, "h", 65536, pk), -EINVAL);
    cr_assert_eq(cluster_add_peer(&c, "[::g]", 1, pk), -EINVAL);
    cr_assert_eq(cluster_add_peer(&c, "", 1, pk), -EINVAL);
    cr_assert_eq(cluster_add_peer(&c, "h", 1, pk), 0);
    cr_assert_eq(cluster_add_peer(&c, "H", 1, pk), -EEXIST, "same key");
    key_of(1, pk);
    cr_assert_eq(cluster_add_peer(&c, "H", 1, pk), -EEXIST, "same address");
    cr_assert_eq(cluster_add_peer(&c, "H", 2, pk), 1);
    cluster_free(&c);
    cluster z = {0};
    cr_assert_eq(cluster_write(&z, stdout, NULL), -EINVAL, "nothing to write");
    cluster_free(&z);
    cluster_free(NULL);
}

Test(peer_cluster, cluster_id_covers_name_and_keys_not_hosts)
{
    char text[1024];
    uint8_t base[SEC_CLUSTER_ID_BYTES], id[SEC_CLUSTER_ID_BYTES];
    cluster c;
    expect_ok(&c, with_header("peer 0 a:1 %s\npeer 1 b:1 %s\n", key(0), key(1)));
    cluster_id(&c, base);
    cluster_free(&c);
    expect_ok(&c, with_header("peer 1 other:9 %s\npeer 0 [::1]:1 %s\n", key(1), key(0)));
    cluster_id(&c, id);
    cr_assert_eq(memcmp(base, id, sizeof id), 0, "hosts, ports and line order do not matter");
    cluster_free(&c);
    snprintf(text, sizeof text, "cluster u\ntopology x.topo\npeer 0 a:1 %s\npeer 1 b:1 %s\n", key(0), key(1));
    expect_ok(&c, text);
    cluster_id(&c, id);
    cr_assert_neq(memcmp(base, id, sizeof id), 0, "the name does");
    cluster_free(&c);
    expect_ok(&c, with_header("peer 0 a:1 %s\npeer 1 b:1 %s\n", key(0), key(2)));
    cluster_id(&c, id);
    cr_assert_neq(memcmp(base, id, sizeof id), 0, "a key does");
    cluster_free(&c);
    expect_ok(&c, with_header("peer 0 a:1 %s\npeer 1 b:1 %s\n", key(1), key(0)));
    cluster_id(&c, id);
    cr_assert_neq(memcmp(base, id, sizeof id), 0, "which id has which key does");
    cluster_free(&c);
}

/* `slots` and `admit` (CLUSTER.md "Joining"): the ids past the peer lines
 * are vacant (no address, no key: cluster_pubkey_lookup has none), the
 * file writes and loads back the same, the id covers the slots and the
 * admission key (and a file without either keeps its old id), and every
 * mistake has its line. */
Test(peer_cluster, slots_past_the_peer_lines_are_vacant_and_need_an_admission_key)
{
    cluster c;
    expect_ok(&c, with_header("slots 4\nadmit %s\npeer 1 h:2 %s\npeer 0 h:1 %s\n", key(9), key(1), key(0)));
    cr_assert_eq(c.n_peers, 4);
    cr_assert_eq(c.n_founders, 2);
    cr_assert(c.has_admit);
    uint8_t pk[SEC_KEY_BYTES], admit[SEC_KEY_BYTES];
    key_of(9, admit);
    cr_assert_eq(memcmp(c.admit_pk, admit, SEC_KEY_BYTES), 0);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(c.peers[i].id, (uint32_t)i);
        cr_assert_eq(c.peers[i].vacant, i >= 2, "slot %d", i);
        cr_assert_eq(cluster_pubkey_lookup(&c, (uint32_t)i, pk), i >= 2 ? -ENOENT : 0, "slot %d", i);
    }
    round_trip(&c);
    uint8_t id[SEC_CLUSTER_ID_BYTES], plain_id[SEC_CLUSTER_ID_BYTES], other[SEC_CLUSTER_ID_BYTES];
    cluster_id(&c, id);
    cluster plain, more;
    expect_ok(&plain, with_header("peer 1 h:2 %s\npeer 0 h:1 %s\n", key(1), key(0)));
    cluster_id(&plain, plain_id);
    cr_assert_neq(memcmp(id, plain_id, sizeof id), 0, "the slots and the admission key are in the id");
    expect_ok(&more, with_header("slots 5\nadmit %s\npeer 1 h:2 %s\npeer 0 h:1 %s\n", key(9), key(1), key(0)));
    cluster_id(&more, other);
    cr_assert_neq(memcmp(id, other, sizeof id), 0, "so is the number of slots");
    cluster_free(&c), cluster_free(&plain), cluster_free(&more);

    expect_error(with_header("slots 1\npeer 0 h:1 %s\npeer 1 h:2 %s\n", key(0), key(1)), 3,
                 "slots 1 is fewer than the 2 peer lines");
    expect_error(with_header("slots 3\npeer 0 h:1 %s\n", key(0)), 3, "the file needs an 'admit KEY' line");
    expect_error(with_header("slots 0\n"), 3, "expected 'slots N'");
    expect_error(with_header("slots 65537\n"), 3, "expected 'slots N'");
    expect_error(with_header("slots 2\nslots 3\n"), 4, "'slots' given twice (first on line 3)");
    expect_error(with_header("admit %s\nadmit %s\n", key(1), key(2)), 4, "'admit' given twice (first on line 3)");
    expect_error(with_header("admit nonsense\n"), 3, "bad admission key");
    expect_error(with_header("admit\n"), 3, "expected 'admit KEY'");
}
