/* The Python package (peer/python) as a user gets it: `pip install` into a
 * fresh virtual environment, then `import sgp` from another directory with
 * no environment variable; and sgp.torch against real peers
 * (tests/python/test_sgp_torch.py, Debian's python3-torch). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sgp_run.h"

#define PYTHON "/usr/bin/python3"

static int python_has(const char *module)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, PYTHON " -c 'import %s' >/dev/null 2>&1", module);
    return system(cmd) == 0;
}

Test(lib_python, pip_install_into_a_fresh_venv_then_import_from_another_directory, .timeout = 600)
{
    if (!python_has("venv") || !python_has("setuptools"))
        cr_skip_test("no python3-venv or python3-setuptools (make test installs them)");
    char dir[] = "/tmp/sgp-pip-XXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[4096], log[512];
    snprintf(log, sizeof log, "%s/pip.log", dir);
    sgp_python_env(); /* SGP_LIB: setup.py packs this build's library instead of running make */
    /* --no-index: offline, with the setuptools the system has */
    snprintf(cmd, sizeof cmd,
             PYTHON " -m venv --system-site-packages %s/venv >%s 2>&1 && "
             "%s/venv/bin/pip install --no-index ./peer/python >>%s 2>&1",
             dir, log, dir, log);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    /* From elsewhere, with no SGP_LIB: the package finds the library it carries. */
    snprintf(cmd, sizeof cmd,
             "cd %s && env -u SGP_LIB -u PYTHONPATH %s/venv/bin/python -c '"
             "import sgp; lib = sgp.load_library().path; "
             "assert lib.startswith(\"%s/venv/\"), lib; "
             "assert sgp.__file__.startswith(\"%s/venv/\"), sgp.__file__; "
             "print(\"sgp\", sgp.__version__, \"from\", lib)' >>%s 2>&1",
             dir, dir, dir, dir, log);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    cr_assert(sgp_file_has(log, "sgp 0."), "see %s", log);
    sgp_rm_rf(dir);
}

Test(lib_python, sgp_torch_against_real_peers, .timeout = 900)
{
    if (!python_has("torch"))
        cr_skip_test("no python3-torch (make test installs it)");
    char dir[] = "/tmp/sgp-torch-XXXXXX";
    cr_assert(mkdtemp(dir));
    char out[512];
    snprintf(out, sizeof out, "%s/unittest.out", dir);
    sgp_python_env();
    char *argv[] = {PYTHON, "-m", "unittest", "-v", "tests/python/test_sgp_torch.py", NULL};
    pid_t pid = sgp_spawn(argv, out);
    cr_assert_eq(sgp_wait_exit(pid, 5 * SGP_EVENT_LIMIT_S), 0, "see %s", out);
    cr_assert(sgp_file_has(out, "OK"), "see %s", out);
    sgp_rm_rf(dir);
}
