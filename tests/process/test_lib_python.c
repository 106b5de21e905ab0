/* The Python package (peer/python) as a user gets it: `pip install` into a
 * fresh virtual environment, then `import sgp` from another directory with
 * no environment variable; its own logic with no peer
 * (tests/python/test_sgp_package.py); and sgp.torch against real peers
 * (tests/python/test_sgp_torch.py, Debian's python3-torch). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sgp_run.h"

#define PYTHON "/usr/bin/python3"

Test(lib_python, pip_install_into_a_fresh_venv_then_import_from_another_directory, .timeout = 600)
{
    if (!sgp_python_has("venv") || !sgp_python_has("setuptools"))
        cr_skip_test("no python3-venv or python3-setuptools (make test installs them)");
    char dir[] = "/tmp/sgp-pip-XXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[4096], log[512];
    snprintf(log, sizeof log, "%s/pip.log", dir);
    sgp_python_env(); /* SGP_LIB: setup.py packs this build's library instead of running make */
    /* Offline: --no-build-isolation builds with the setuptools and wheel
     * the system has (the venv sees them through --system-site-packages),
     * --no-index takes NumPy from there too. */
    snprintf(cmd, sizeof cmd,
             PYTHON " -m venv --system-site-packages %s/venv >%s 2>&1 && "
             "%s/venv/bin/pip install --no-build-isolation --no-index ./peer/python >>%s 2>&1",
             dir, log, dir, log);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    /* From elsewhere, with no SGP_LIB: the package finds the library it
     * carries, and its release is the one the build wrote beside it (no
     * sgp.h to read there) and the library's. */
    snprintf(cmd, sizeof cmd,
             "cd %s && env -u SGP_LIB -u PYTHONPATH %s/venv/bin/python -c '"
             "import sgp, sgp._version; lib = sgp.load_library().path; "
             "assert lib.startswith(\"%s/venv/\"), lib; "
             "assert sgp.__file__.startswith(\"%s/venv/\"), sgp.__file__; "
             "assert sgp.__version__ == sgp._version.version == sgp.load_library().sgp_version().decode(); "
             "print(\"sgp\", sgp.__version__, \"from\", lib)' >>%s 2>&1",
             dir, dir, dir, dir, log);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    cr_assert(sgp_file_has(log, "sgp 0."), "see %s", log);
    sgp_rm_rf(dir);
}

/* Python's unittest on SCRIPT (under tests/python) with this build's
 * library: it must end OK. */
static void python_unittest(const char *script)
{
    char dir[] = "/tmp/sgp-unittest-XXXXXX";
    cr_assert(mkdtemp(dir));
    char out[512], path[256];
    snprintf(out, sizeof out, "%s/unittest.out", dir);
    snprintf(path, sizeof path, "tests/python/%s", script);
    sgp_python_env();
    char *argv[] = {PYTHON, "-m", "unittest", "-v", path, NULL};
    pid_t pid = sgp_spawn(argv, out);
    cr_assert_eq(sgp_wait_exit(pid, 5 * SGP_EVENT_LIMIT_S), 0, "see %s", out);
    cr_assert(sgp_file_has(out, "OK"), "see %s", out);
    sgp_rm_rf(dir);
}

Test(lib_python, sgp_torch_against_real_peers, .timeout = 900)
{
    if (!sgp_python_has("torch"))
        cr_skip_test("no python3-torch (make test installs it)");
    python_unittest("test_sgp_torch.py");
}

/* The package's own logic with no peer (tests/python/test_sgp_package.py):
 * its release from sgp.h or the _version.py a build wrote, the library it
 * loads and the ones it refuses, the look-up order, the options as C gets
 * them, libsgp's return codes as results and sgp.Error. */
Test(lib_python, the_package_s_release_library_look_up_options_and_errors_without_a_peer, .timeout = 300)
{
    if (!sgp_python_has("numpy"))
        cr_skip_test("no python3-numpy (make deps installs it)");
    python_unittest("test_sgp_package.py");
}

#define GPT_ARGS "--model", "2:64:4", "--steps", "300", "--bytes", "262144", "--batch", "16"

/* The short version of the example's comparison (tests/bench/gpt_torch.sh
 * has the long one): 4 processes with the 1000x setting learn within 20% of
 * the script alone in validation loss (+11% measured), and each sends over
 * 500x fewer bytes than an uncompressed peer of the same run, which sends a
 * float32 model every step (its bytes computed, not run: the bench measures
 * it). */
Test(lib_python, gpt_example_four_peers_with_the_recipe_learn_near_alone, .timeout = 900)
{
    if (!sgp_python_has("torch"))
        cr_skip_test("no python3-torch (make test installs it)");
    if (access("build/data/brown/brown.txt", R_OK) != 0)
        cr_skip_test("no build/data/brown/brown.txt (make test runs make data)");
    char dir[] = "/tmp/sgp-gpt-torch-XXXXXX";
    cr_assert(mkdtemp(dir));
    sgp_python_env();
    char alone_out[512];
    snprintf(alone_out, sizeof alone_out, "%s/alone.out", dir);
    char *alone_argv[] = {PYTHON, "peer/python/examples/gpt_torch.py", GPT_ARGS, NULL};
    pid_t pid = sgp_spawn(alone_argv, alone_out);
    cr_assert_eq(sgp_wait_exit(pid, 5 * SGP_EVENT_LIMIT_S), 0, "see %s", alone_out);
    const double alone = sgp_file_number(alone_out, "validation_loss");
    cr_assert_lt(alone, 3.0, "alone learns (ln 256 = 5.55 at the start): %.4f (see %s)", alone, alone_out);

    char cluster[512], outs[4][512], ids[4][4];
    sgp_prepare_cluster(dir, 4, cluster, sizeof cluster);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/peer%d.out", dir, i);
        snprintf(ids[i], sizeof ids[i], "%d", i);
        char *argv[] = {PYTHON, "peer/python/examples/gpt_torch.py", GPT_ARGS, "--cluster", cluster, "--id", ids[i],
                        "--local-steps", "10", "--outer", "nesterov:0.7:0.9", "--codec", "stc:0.04", NULL};
        pids[i] = sgp_spawn(argv, outs[i]);
    }
    sgp_wait_all_ok(pids, 4, 10 * SGP_EVENT_LIMIT_S, dir);
    for (int i = 0; i < 4; i++) {
        const double loss = sgp_file_number(outs[i], "validation_loss");
        cr_assert_lt(loss, 1.2 * alone, "peer %d: %.4f, alone %.4f (see %s)", i, loss, alone, outs[i]);
        const double bytes = sgp_file_number(outs[i], "bytes_sent"), dim = sgp_file_number(outs[i], "parameters");
        cr_assert_lt(500.0 * bytes, 300.0 * dim * 4.0, "peer %d sent %.0f bytes (see %s)", i, bytes, outs[i]);
    }
    sgp_rm_rf(dir);
}

/* The package against the header it binds: Python prints its version and
 * every field of _Options and _Status with its offset and size (and each
 * structure's size), a C program built against peer/lib/sgp.h prints
 * SGP_VERSION and offsetof and sizeof of the same names, and the two lists
 * must be equal. A field added to sgp.h and not to the package (or in
 * another place, or of another width), or a release number changed in one
 * place only, fails here. */
Test(lib_python, the_package_has_the_header_s_version_and_layout_field_by_field, .timeout = 300)
{
    char dir[] = "/tmp/sgp-layout-XXXXXX";
    cr_assert(mkdtemp(dir));
    char py_out[512], c_src[512], c_bin[512], c_out[512], cmd[4096];
    snprintf(py_out, sizeof py_out, "%s/python.txt", dir);
    snprintf(c_src, sizeof c_src, "%s/layout.c", dir);
    snprintf(c_bin, sizeof c_bin, "%s/layout", dir);
    snprintf(c_out, sizeof c_out, "%s/c.txt", dir);
    sgp_python_env();
    snprintf(cmd, sizeof cmd,
             "cd peer/python && " PYTHON " -c '"
             "import ctypes, sgp\n"
             "print(\"version\", sgp.__version__, \"-\")\n"
             "for c, s in ((\"sgp_options\", sgp._Options), (\"sgp_status\", sgp._Status)):\n"
             "    print(c, \"sizeof\", ctypes.sizeof(s))\n"
             "    for name, _ in s._fields_:\n"
             "        print(c, name, getattr(s, name).offset, getattr(s, name).size)\n"
             "' > %s 2>&1",
             py_out);
    cr_assert_eq(system(cmd), 0, "the package's structures (see %s)", py_out);

    /* The C side prints the same names, from the list Python gave. */
    FILE *in = fopen(py_out, "r"), *src = fopen(c_src, "w");
    cr_assert(in && src);
    fprintf(src, "#include <stddef.h>\n#include <stdio.h>\n#include \"sgp.h\"\n"
                 "#define F(s, f) printf(#s \" \" #f \" %%zu %%zu\\n\", offsetof(s, f), sizeof(((s *)0)->f))\n"
                 "int main(void)\n{\n");
    char type[64], field[64];
    cr_assert_eq(fscanf(in, "%63s %63s %*s", type, field), 2);
    cr_assert_str_eq(type, "version");
    fprintf(src, "    printf(\"version %%s -\\n\", SGP_VERSION);\n");
    int fields = 0;
    while (fscanf(in, "%63s %63s %*s", type, field) == 2) {
        if (!strcmp(field, "sizeof"))
            fprintf(src, "    printf(\"%s sizeof %%zu\\n\", sizeof(%s));\n", type, type);
        else
            fprintf(src, "    F(%s, %s);\n", type, field), fields++;
        int ch;
        while ((ch = fgetc(in)) != '\n' && ch != EOF) /* (the rest of the line: size) */
            ;
    }
    fprintf(src, "    return 0;\n}\n");
    fclose(in), fclose(src);
    cr_assert_gt(fields, 10, "the package names the structures' fields (see %s)", py_out);
    snprintf(cmd, sizeof cmd, "cc -std=c17 -Ipeer/lib %s -o %s > %s 2>&1 && %s > %s", c_src, c_bin, c_out, c_bin, c_out);
    cr_assert_eq(system(cmd), 0, "a field the package names is not sgp.h's (see %s and %s)", c_out, c_src);
    char *py = sgp_read_file(py_out), *c = sgp_read_file(c_out);
    cr_assert(py && c);
    cr_assert_str_eq(py, c, "ctypes against C, field, offset, size (python: %s, C: %s)", py_out, c_out);
    cr_log_info("%d fields of sgp_options and sgp_status: ctypes = C", fields);
    free(py), free(c);
    sgp_rm_rf(dir);
}
