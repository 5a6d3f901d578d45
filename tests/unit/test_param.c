/*
 * Parameters, logging and error recording (src/base/param.c, log.c, err.c): value parsing,
 * BRAID_ over NCCL_ over default, rejected values, NCCL_DEBUG* handling, the log line
 * format, and the last-error text under concurrent writers and readers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/status.h"

static char test_dir[] = "/tmp/braid_test_param_XXXXXX";

/* Unset every BRAID_<NAME> and alias, then re-read the environment. */
static void env_clear(void)
{
    char var[64];
    for (int id = 0; id < BRAID_P_COUNT; id++) {
        const braid_param_t *d = braid_param_desc((braid_param_id_t)id);
        snprintf(var, sizeof(var), "BRAID_%s", d->name);
        unsetenv(var);
        if (d->alias != NULL)
            unsetenv(d->alias);
    }
    unsetenv("NCCL_TIMEOUT");
    braid_log_reset();
}

static int setup(void **state)
{
    (void)state;
    env_clear();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    env_clear();  /* also closes a log file a test opened */
    return 0;
}

/* The whole file as a string (caller frees), or NULL. */
static char *file_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void host_short(char *buf, size_t len)
{
    assert_int_equal(gethostname(buf, len - 1), 0);
    buf[len - 1] = '\0';
    buf[strcspn(buf, ".")] = '\0';
}

/* Log at `level` with `subsys` into <test_dir>/<name>; returns the path used. */
static void log_to_file(const char *level, const char *subsys, const char *name, char *path,
                        size_t len)
{
    snprintf(path, len, "%s/%s", test_dir, name);
    setenv("NCCL_DEBUG", level, 1);
    setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
    setenv("NCCL_DEBUG_FILE", path, 1);
    braid_log_reset();
}

static void test_parse_int(void **state)
{
    static const struct { const char *text; int64_t val; } good[] = {
        { "0", 0 }, { "42", 42 }, { "-7", -7 }, { "+5", 5 }, { "  12 ", 12 },
        { "0x1F", 31 }, { "0X10", 16 }, { "-0x10", -16 }, { "010", 10 },
        { "9223372036854775807", INT64_MAX }, { "-9223372036854775808", INT64_MIN },
    };
    static const char *const bad[] = {
        "", " ", "abc", "12abc", "1.5", "- 1", "0x", "0xg", "--1", "1 2",
        "9223372036854775808", "-9223372036854775809", "99999999999999999999999",
    };
    int64_t v;
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = -1;
        assert_int_equal(braid_param_parse_int(good[i].text, &v), BRAID_OK);
        assert_true(v == good[i].val);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 1234;
        assert_int_equal(braid_param_parse_int(bad[i], &v), BRAID_ERR_INVALID);
        assert_true(v == 1234);  /* untouched on failure */
    }
    assert_int_equal(braid_param_parse_int(NULL, &v), BRAID_ERR_INVALID);
}

static void test_parse_size(void **state)
{
    static const struct { const char *text; int64_t val; } good[] = {
        { "0", 0 }, { "1024", 1024 }, { "1K", 1024 }, { "1k", 1024 }, { "256K", 262144 },
        { "4M", 4 << 20 }, { "2g", INT64_C(2) << 30 }, { "1T", INT64_C(1) << 40 },
        { "1KB", 1024 }, { "1KiB", 1024 }, { "3mib", 3 << 20 }, { "5B", 5 }, { " 8K ", 8192 },
        { "8388607T", INT64_C(8388607) << 40 }, { "9223372036854775807", INT64_MAX },
    };
    static const char *const bad[] = {
        "", "-1", "-1K", "K", "1X", "1.5M", "1 K", "1KiX", "1Ki", "1KBB", "0x10",
        "8388608T", "9007199254740992K", "9223372036854775808", "18446744073709551616",
    };
    int64_t v;
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = -1;
        assert_int_equal(braid_param_parse_size(good[i].text, &v), BRAID_OK);
        assert_true(v == good[i].val);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(braid_param_parse_size(bad[i], &v), BRAID_ERR_INVALID);
    assert_int_equal(braid_param_parse_size(NULL, &v), BRAID_ERR_INVALID);
}

static void test_parse_bool(void **state)
{
    static const char *const yes[] = { "1", "yes", "YES", "true", "True", "on", " on " };
    static const char *const no[] = { "0", "no", "No", "false", "FALSE", "off" };
    static const char *const bad[] = { "", "2", "y", "n", "enable", "truee", "on off", "-1" };
    int64_t v;
    (void)state;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        assert_int_equal(braid_param_parse_bool(yes[i], &v), BRAID_OK);
        assert_true(v == 1);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        assert_int_equal(braid_param_parse_bool(no[i], &v), BRAID_OK);
        assert_true(v == 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(braid_param_parse_bool(bad[i], &v), BRAID_ERR_INVALID);
}

/* A default's text parses as its type, and braid_param_int gives that value: a default
 * that does not parse, or lies outside the parameter's range, reads as 0 instead. */
static void check_default_value(braid_param_id_t id, const braid_param_t *d)
{
    int64_t v = 0;
    braid_status_t st = BRAID_OK;
    switch (d->type) {
    case BRAID_PARAM_INT: st = braid_param_parse_int(d->defval, &v); break;
    case BRAID_PARAM_SIZE: st = braid_param_parse_size(d->defval, &v); break;
    case BRAID_PARAM_BOOL: st = braid_param_parse_bool(d->defval, &v); break;
    case BRAID_PARAM_STR: return;   /* free text: its user checks it */
    }
    if (st != BRAID_OK || braid_param_int(id) != v)
        fail_msg("BRAID_%s: the default \"%s\" %s", d->name, d->defval,
                 st != BRAID_OK ? "does not parse as its type"
                                : "is outside the parameter's range (it reads as another value)");
}

static void test_table_defaults(void **state)
{
    (void)state;
    for (int id = 0; id < BRAID_P_COUNT; id++) {
        const braid_param_t *d = braid_param_desc((braid_param_id_t)id);
        assert_non_null(d);
        assert_non_null(d->name);
        assert_non_null(d->defval);
        assert_non_null(d->help);
        assert_int_equal(braid_param_source((braid_param_id_t)id), BRAID_PARAM_SRC_DEFAULT);
        check_default_value((braid_param_id_t)id, d);
    }
    assert_null(braid_param_desc(BRAID_P_COUNT));
    assert_string_equal(braid_param_desc(BRAID_P_DEBUG)->alias, "NCCL_DEBUG");
    assert_string_equal(braid_param_desc(BRAID_P_HOSTID)->alias, "NCCL_HOSTID");
    assert_null(braid_param_desc(BRAID_P_TIMEOUT)->alias);
    assert_null(braid_param_desc(BRAID_P_CPU_ISA)->alias);
    assert_true(braid_param_int(BRAID_P_TIMEOUT) == 1800);
    assert_true(braid_param_int(BRAID_P_BOOTSTRAP_TIMEOUT) == 120);
    assert_true(braid_param_int(BRAID_P_SHM_SLOT_SIZE) == 256 * 1024);
    assert_true(braid_param_int(BRAID_P_SHM_NSLOTS) == 8);
    assert_true(braid_param_int(BRAID_P_CHECK_PEERS_MS) == 100);
    assert_string_equal(braid_param_str(BRAID_P_DEBUG_SUBSYS), "INIT,BOOTSTRAP,ENV");
    assert_string_equal(braid_param_str(BRAID_P_SHM_DIR), "/dev/shm");
    assert_string_equal(braid_param_str(BRAID_P_CPU_ISA), "auto");
    assert_string_equal(braid_param_str(BRAID_P_COUNT), "");
}

static void test_precedence(void **state)
{
    (void)state;
    setenv("NCCL_HOSTID", "node-a", 1);
    braid_param_reload();
    assert_string_equal(braid_param_str(BRAID_P_HOSTID), "node-a");
    assert_int_equal(braid_param_source(BRAID_P_HOSTID), BRAID_PARAM_SRC_NCCL_ENV);
    setenv("BRAID_HOSTID", "node-b", 1);
    braid_param_reload();
    assert_string_equal(braid_param_str(BRAID_P_HOSTID), "node-b");
    assert_int_equal(braid_param_source(BRAID_P_HOSTID), BRAID_PARAM_SRC_BRAID_ENV);
    setenv("BRAID_HOSTID", "", 1);  /* empty counts as unset */
    braid_param_reload();
    assert_string_equal(braid_param_str(BRAID_P_HOSTID), "node-a");
    unsetenv("NCCL_HOSTID");
    braid_param_reload();
    assert_string_equal(braid_param_str(BRAID_P_HOSTID), "");
    assert_int_equal(braid_param_source(BRAID_P_HOSTID), BRAID_PARAM_SRC_DEFAULT);

    setenv("NCCL_TIMEOUT", "5", 1);  /* TIMEOUT has no NCCL spelling */
    braid_param_reload();
    assert_true(braid_param_int(BRAID_P_TIMEOUT) == 1800);
    setenv("BRAID_TIMEOUT", "0x10", 1);
    setenv("BRAID_SHM_SLOT_SIZE", "1m", 1);
    braid_param_reload();
    assert_true(braid_param_int(BRAID_P_TIMEOUT) == 16);
    assert_true(braid_param_int(BRAID_P_SHM_SLOT_SIZE) == 1 << 20);
    assert_string_equal(braid_param_str(BRAID_P_SHM_SLOT_SIZE), "1m");
    assert_int_equal(braid_param_source(BRAID_P_TIMEOUT), BRAID_PARAM_SRC_BRAID_ENV);
}

/* A string from braid_param_str stays valid after the value changes. */
static void test_reload_keeps_strings(void **state)
{
    (void)state;
    setenv("BRAID_SHM_DIR", "/tmp/first", 1);
    braid_param_reload();
    const char *first = braid_param_str(BRAID_P_SHM_DIR);
    setenv("BRAID_SHM_DIR", "/tmp/second", 1);
    braid_param_reload();
    assert_string_equal(braid_param_str(BRAID_P_SHM_DIR), "/tmp/second");
    assert_string_equal(first, "/tmp/first");
}

static void test_malformed(void **state)
{
    char path[512];
    (void)state;
    log_to_file("WARN", "INIT", "malformed.log", path, sizeof(path));
    setenv("BRAID_TIMEOUT", "abc", 1);
    setenv("BRAID_SHM_NSLOTS", "1", 1);      /* below its minimum */
    setenv("BRAID_SHM_SLOT_SIZE", "12Q", 1);
    setenv("BRAID_CHECK_PEERS_MS", "-5", 1);
    braid_param_reload();
    assert_true(braid_param_int(BRAID_P_TIMEOUT) == 1800);
    assert_true(braid_param_int(BRAID_P_TIMEOUT) == 1800);
    assert_true(braid_param_int(BRAID_P_SHM_NSLOTS) == 8);
    assert_true(braid_param_int(BRAID_P_SHM_SLOT_SIZE) == 256 * 1024);
    assert_true(braid_param_int(BRAID_P_CHECK_PEERS_MS) == 100);
    assert_int_equal(braid_param_source(BRAID_P_TIMEOUT), BRAID_PARAM_SRC_DEFAULT);
    assert_string_equal(braid_param_str(BRAID_P_TIMEOUT), "1800");

    char *text = file_slurp(path);
    assert_non_null(text);
    assert_int_equal(count_of(text, "NCCL WARN BRAID_TIMEOUT=\"abc\""), 1);  /* once */
    assert_int_equal(count_of(text, "BRAID_SHM_NSLOTS=\"1\""), 1);
    assert_int_equal(count_of(text, "BRAID_SHM_SLOT_SIZE=\"12Q\""), 1);
    assert_int_equal(count_of(text, "BRAID_CHECK_PEERS_MS=\"-5\""), 1);
    assert_int_equal(count_of(text, "using the default"), 4);

    FILE *mem = tmpfile();  /* the dump names the rejected variable */
    braid_param_dump(mem);
    rewind(mem);
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), mem) != NULL)
        seen += strstr(line, "default (BRAID_TIMEOUT=\"abc\" rejected)") != NULL;
    fclose(mem);
    assert_int_equal(seen, 1);
    free(text);
    unlink(path);
}

static void test_dump(void **state)
{
    char line[512];
    int rows = 0, found = 0;
    (void)state;
    setenv("NCCL_SOCKET_IFNAME", "eth0", 1);
    braid_param_reload();
    FILE *mem = tmpfile();
    braid_param_dump(mem);
    rewind(mem);
    assert_non_null(fgets(line, sizeof(line), mem));
    assert_non_null(strstr(line, "NAME"));
    assert_non_null(strstr(line, "SOURCE"));
    const char *col = strstr(line, "VALUE");
    while (fgets(line, sizeof(line), mem) != NULL) {
        rows++;
        assert_int_equal(strncmp(line, "BRAID_", 6), 0);
        assert_true(line[col - line - 1] == ' ' && line[col - line] != ' ');  /* aligned */
        if (strstr(line, "BRAID_SOCKET_IFNAME") == line) {
            found = 1;
            assert_non_null(strstr(line, "eth0"));
            assert_non_null(strstr(line, "NCCL_SOCKET_IFNAME  eth0"));
        }
    }
    fclose(mem);
    assert_int_equal(rows, BRAID_P_COUNT);
    assert_true(found);
}

static void test_level_parse(void **state)
{
    braid_log_level_t l;
    (void)state;
    assert_int_equal(braid_log_level_parse("", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_NONE);
    assert_int_equal(braid_log_level_parse("version", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_VERSION);
    assert_int_equal(braid_log_level_parse("WARN", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_WARN);
    assert_int_equal(braid_log_level_parse("Info", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_INFO);
    assert_int_equal(braid_log_level_parse("ABORT", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_ABORT);
    assert_int_equal(braid_log_level_parse("trace", &l), BRAID_OK);
    assert_int_equal(l, BRAID_LOG_TRACE);
    assert_int_equal(braid_log_level_parse("LOUD", &l), BRAID_ERR_INVALID);
}

static void test_subsys_parse(void **state)
{
    uint64_t m;
    (void)state;
    assert_int_equal(braid_log_subsys_parse("INIT", &m), BRAID_OK);
    assert_true(m == BRAID_SUB_INIT);
    assert_int_equal(braid_log_subsys_parse("init,Coll, NET ", &m), BRAID_OK);
    assert_true(m == (BRAID_SUB_INIT | BRAID_SUB_COLL | BRAID_SUB_NET));
    assert_int_equal(braid_log_subsys_parse("INIT,BOOTSTRAP,ENV", &m), BRAID_OK);
    assert_true(m == (BRAID_SUB_INIT | BRAID_SUB_BOOTSTRAP | BRAID_SUB_ENV));
    assert_int_equal(braid_log_subsys_parse("ALL", &m), BRAID_OK);
    assert_true(m == UINT64_MAX);
    assert_int_equal(braid_log_subsys_parse("^INIT,COLL", &m), BRAID_OK);
    assert_true(m == ~(uint64_t)(BRAID_SUB_INIT | BRAID_SUB_COLL));
    assert_int_equal(braid_log_subsys_parse("^ALL", &m), BRAID_OK);
    assert_true(m == 0);
    assert_int_equal(braid_log_subsys_parse("", &m), BRAID_OK);
    assert_true(m == 0);
    assert_int_equal(braid_log_subsys_parse("RAS,PROFILE,REG,NVLS,PROXY,CALL,ALLOC,TUNING,"
                                            "GRAPH,SHM,P2P", &m), BRAID_OK);
    assert_true(m == 0xef6c);
    assert_int_equal(braid_log_subsys_parse("INIT,FOO", &m), BRAID_ERR_INVALID);
    assert_true(m == BRAID_SUB_INIT);  /* unknown names are skipped */
    assert_int_equal(braid_log_subsys_parse("^FOO", &m), BRAID_ERR_INVALID);
    assert_true(m == UINT64_MAX);
}

/* NCCL_DEBUG_FILE with %h and %p; the line prefix; subsystem filtering; TRACE location. */
static void test_debug_file(void **state)
{
    char path[512], want[1024], host[256];
    (void)state;
    host_short(host, sizeof(host));
    log_to_file("INFO", "INIT,NET", "log.%h.%p", path, sizeof(path));
    braid_log_set_rank(3);
    BRAID_INFO(BRAID_SUB_INIT, "hello %d", 42);
    BRAID_INFO(BRAID_SUB_COLL, "not shown: COLL is off");
    BRAID_TRACE(BRAID_SUB_INIT, "not shown: level is INFO");
    BRAID_WARN("shown whatever the subsystem");
    braid_log_version_once();
    braid_log_version_once();
    braid_log_set_rank(-1);

    snprintf(path, sizeof(path), "%s/log.%s.%d", test_dir, host, (int)getpid());
    char *text = file_slurp(path);
    assert_non_null(text);
    long tid = syscall(SYS_gettid);
    snprintf(want, sizeof(want), "%s:%d:%ld [3] NCCL INFO hello 42\n", host, (int)getpid(), tid);
    assert_non_null(strstr(text, want));
    assert_true(strstr(text, want) == text);  /* the first line */
    snprintf(want, sizeof(want), "%s:%d:%ld [3] NCCL WARN shown whatever the subsystem\n", host,
             (int)getpid(), tid);
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "not shown"));
    assert_int_equal(count_of(text, "NCCL INFO NCCL version " BRAID_NCCL_VERSION_STRING
                                    "+braid " BRAID_VERSION_STRING "\n"), 1);
    free(text);
    unlink(path);

    log_to_file("TRACE", "^COLL", "trace.log", path, sizeof(path));
    BRAID_TRACE(BRAID_SUB_NET, "traced");
    BRAID_INFO(BRAID_SUB_COLL, "not shown: COLL is excluded");
    braid_status_t st = braid_err(BRAID_ERR_SYSTEM, "failed with %s", "detail");
    assert_int_equal(st, BRAID_ERR_SYSTEM);
    text = file_slurp(path);
    assert_non_null(text);
    snprintf(want, sizeof(want), "%s:%d:%ld [-1] test_param.c:", host, (int)getpid(), tid);
    assert_int_equal(count_of(text, want), 2);
    assert_non_null(strstr(text, " NCCL TRACE traced\n"));
    assert_non_null(strstr(text, " NCCL WARN failed with detail\n"));
    assert_null(strstr(text, "not shown"));
    free(text);
    unlink(path);
}

/* Output captured from stdout (fd 1) while fn runs. */
static char *stdout_capture(void (*fn)(void))
{
    char path[512];
    snprintf(path, sizeof(path), "%s/stdout.txt", test_dir);
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    fn();
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char *text = file_slurp(path);
    unlink(path);
    return text;
}

static void fallback_run(void)
{
    setenv("NCCL_DEBUG", "info", 1);
    setenv("NCCL_DEBUG_FILE", "/nonexistent-dir/braid.log", 1);
    braid_log_reset();
    BRAID_INFO(BRAID_SUB_INIT, "to stdout");
}

static void bad_level_run(void)
{
    setenv("NCCL_DEBUG", "LOUD", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,BOGUS", 1);
    braid_log_reset();
    BRAID_INFO(BRAID_SUB_INIT, "not shown: level fell back to WARN");
}

static void test_log_fallbacks(void **state)
{
    (void)state;
    char *text = stdout_capture(fallback_run);
    assert_non_null(text);
    assert_non_null(strstr(text, "NCCL WARN cannot open the log file "
                                 "\"/nonexistent-dir/braid.log\" from NCCL_DEBUG_FILE"));
    assert_non_null(strstr(text, "NCCL INFO to stdout\n"));
    free(text);
    env_clear();
    text = stdout_capture(bad_level_run);
    assert_non_null(text);
    assert_non_null(strstr(text, "NCCL WARN NCCL_DEBUG=\"LOUD\" is not a log level"));
    assert_non_null(strstr(text, "NCCL WARN NCCL_DEBUG_SUBSYS=\"INIT,BOGUS\" names an unknown"));
    assert_null(strstr(text, "not shown"));
    assert_int_equal(braid_log_level_cur, BRAID_LOG_WARN);
    free(text);
}

static void test_err_last(void **state)
{
    (void)state;
    assert_non_null(braid_err_last());
    assert_int_equal(braid_err(BRAID_ERR_INVALID, "count %d is negative", -3), BRAID_ERR_INVALID);
    assert_string_equal(braid_err_last(), "count -3 is negative");
    assert_int_equal(braid_err(BRAID_ERR_TIMEOUT, "rank %d missing", 2), BRAID_ERR_TIMEOUT);
    assert_string_equal(braid_err_last(), "rank 2 missing");
    assert_string_equal(braid_status_str(BRAID_OK), "success");
    assert_string_equal(braid_status_str(BRAID_ERR_INVALID), "invalid argument");
    assert_string_equal(braid_status_str(BRAID_ERR_DEVICE), "device error");
    assert_string_equal(braid_status_str((braid_status_t)-99), "unknown status");
    for (int s = BRAID_ERR_DEVICE; s <= BRAID_INPROGRESS; s++)
        assert_string_not_equal(braid_status_str((braid_status_t)s), "unknown status");
}

#define ERR_WRITERS 3
#define ERR_READERS 3
#define ERR_ITERS 20000
#define ERR_LEN 300

static atomic_int err_writers_left;

/* Whether `text` is one whole message of a test thread: ERR_LEN times one of the letters
 * 'a'... that the threads use. */
static int err_text_whole(const char *text)
{
    char set[2] = { text[0], '\0' };
    return text[0] >= 'a' && text[0] < 'a' + 8 && strlen(text) == ERR_LEN &&
           strspn(text, set) == ERR_LEN;
}

/* Records its letter repeated ERR_LEN times, over and over, reading back what is last. */
static void *err_writer(void *arg)
{
    char msg[ERR_LEN + 1];
    memset(msg, 'a' + (int)(intptr_t)arg, ERR_LEN);
    msg[ERR_LEN] = '\0';
    void *ret = NULL;
    for (int i = 0; i < ERR_ITERS; i++) {
        braid_err(BRAID_ERR_REMOTE, "%s", msg);
        if (!err_text_whole(braid_err_last()))
            ret = (void *)1;
    }
    atomic_fetch_sub(&err_writers_left, 1);
    return ret;
}

static void *err_reader(void *arg)
{
    (void)arg;
    while (atomic_load(&err_writers_left) > 0) {
        if (!err_text_whole(braid_err_last()))
            return (void *)1;
    }
    return NULL;
}

/* Writers and readers of the last error at once: every read is one whole message. */
static void test_err_threads(void **state)
{
    pthread_t th[ERR_WRITERS + ERR_READERS];
    char seed[ERR_LEN + 1];
    (void)state;
    memset(seed, 'a', ERR_LEN);
    seed[ERR_LEN] = '\0';
    braid_err(BRAID_ERR_REMOTE, "%s", seed);
    atomic_store(&err_writers_left, ERR_WRITERS);
    for (int i = 0; i < ERR_WRITERS + ERR_READERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, i < ERR_WRITERS ? err_writer : err_reader,
                                        (void *)(intptr_t)i), 0);
    for (int i = 0; i < ERR_WRITERS + ERR_READERS; i++) {
        void *ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
}

#define LOG_THREADS 4
#define LOG_ITERS 500

static void *log_thread(void *arg)
{
    char msg[ERR_LEN + 1];
    memset(msg, 'a' + (int)(intptr_t)arg, ERR_LEN);
    msg[ERR_LEN] = '\0';
    for (int i = 0; i < LOG_ITERS; i++) {
        braid_err(BRAID_ERR_REMOTE, "%s", msg);
        BRAID_INFO(BRAID_SUB_INIT, "%s", msg);
    }
    return NULL;
}

/* Lines logged by several threads at once never interleave. */
static void test_log_threads(void **state)
{
    pthread_t th[LOG_THREADS];
    char path[512], line[1024];
    int lines = 0;
    (void)state;
    log_to_file("INFO", "INIT", "threads.log", path, sizeof(path));
    for (int i = 0; i < LOG_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, log_thread, (void *)(intptr_t)i), 0);
    for (int i = 0; i < LOG_THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        char *msg = strstr(line, " NCCL WARN ");
        if (msg == NULL)
            msg = strstr(line, " NCCL INFO ");
        assert_non_null(msg);
        msg += strlen(" NCCL WARN ");
        assert_string_equal(msg + ERR_LEN, "\n");
        msg[ERR_LEN] = '\0';
        assert_true(err_text_whole(msg));
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 2 * LOG_THREADS * LOG_ITERS);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse_int, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_bool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_keeps_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump, setup, teardown),
        cmocka_unit_test_setup_teardown(test_level_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subsys_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_debug_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_fallbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_err_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_err_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_threads, setup, teardown),
    };
    if (mkdtemp(test_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(test_dir);
    return failed;
}
