/*
 * Logging, in NCCL's format so that the tools and habits built around NCCL logs keep working:
 *
 *     host:pid:tid [rank] NCCL INFO message
 *     host:pid:tid [rank] file.c:123 NCCL TRACE message     (and WARN lines at TRACE level)
 *
 * NCCL_DEBUG picks the level (unset: nothing is printed), NCCL_DEBUG_SUBSYS the subsystems
 * shown at INFO and TRACE (WARN lines ignore it), NCCL_DEBUG_FILE the destination (stdout by
 * default). The configuration is read on first use and again on braid_log_reset. Every line is written by one fprintf
 * under log_mu, so lines of different threads never interleave.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"

#define LOG_MSG_MAX 1024
#define LOG_HOST_MAX 256
#define LOG_PATH_MAX 4096

/* Until the first line is logged these let every macro through to braid_log(), which reads
 * the configuration then: the environment is read on first use, not at library load, so a
 * program may still set NCCL_DEBUG after loading the library (as NCCL allows). */
braid_log_level_t braid_log_level_cur = BRAID_LOG_TRACE;
uint64_t braid_log_subsys_cur = BRAID_SUB_ALL;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_out;                 /* NCCL_DEBUG_FILE, or NULL for stdout */
static atomic_int log_fd = STDOUT_FILENO;   /* log_out's descriptor (braid_log_warn_fd) */
static char log_host[LOG_HOST_MAX];   /* hostname up to the first '.', as NCCL prints it */
static atomic_int log_version_shown;
static _Thread_local int log_rank = -1;

static const struct {
    const char *name;
    uint64_t bit;
} log_subsys_names[] = {
    { "INIT", BRAID_SUB_INIT },       { "COLL", BRAID_SUB_COLL },
    { "P2P", BRAID_SUB_P2P },         { "SHM", BRAID_SUB_SHM },
    { "NET", BRAID_SUB_NET },         { "GRAPH", BRAID_SUB_GRAPH },
    { "TUNING", BRAID_SUB_TUNING },   { "ENV", BRAID_SUB_ENV },
    { "ALLOC", BRAID_SUB_ALLOC },     { "CALL", BRAID_SUB_CALL },
    { "PROXY", BRAID_SUB_PROXY },     { "NVLS", BRAID_SUB_NVLS },
    { "BOOTSTRAP", BRAID_SUB_BOOTSTRAP }, { "REG", BRAID_SUB_REG },
    { "PROFILE", BRAID_SUB_PROFILE }, { "RAS", BRAID_SUB_RAS },
    { "ALL", (uint64_t)BRAID_SUB_ALL },
};

static const char *const log_level_names[] = {
    [BRAID_LOG_VERSION] = "VERSION", [BRAID_LOG_WARN] = "WARN", [BRAID_LOG_INFO] = "INFO",
    [BRAID_LOG_ABORT] = "ABORT",     [BRAID_LOG_TRACE] = "TRACE",
};

braid_status_t braid_log_level_parse(const char *text, braid_log_level_t *level_p)
{
    if (text == NULL || *text == '\0') {
        *level_p = BRAID_LOG_NONE;
        return BRAID_OK;
    }
    for (int l = BRAID_LOG_VERSION; l <= BRAID_LOG_TRACE; l++) {
        if (strcasecmp(text, log_level_names[l]) == 0) {
            *level_p = (braid_log_level_t)l;
            return BRAID_OK;
        }
    }
    return BRAID_ERR_INVALID;
}

/* The bit of the name s[0..n) (spaces around it ignored); 0 if unknown or empty. */
static uint64_t log_subsys_bit(const char *s, size_t n, int *unknown_p)
{
    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *unknown_p = 0;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < sizeof(log_subsys_names) / sizeof(log_subsys_names[0]); i++) {
        if (strlen(log_subsys_names[i].name) == n &&
            strncasecmp(s, log_subsys_names[i].name, n) == 0)
            return log_subsys_names[i].bit;
    }
    *unknown_p = 1;
    return 0;
}

braid_status_t braid_log_subsys_parse(const char *text, uint64_t *mask_p)
{
    braid_status_t st = BRAID_OK;
    uint64_t mask = 0;
    int invert, unknown;
    if (text == NULL)
        text = "";
    invert = text[0] == '^';
    for (const char *s = text + invert; *s != '\0';) {
        size_t n = strcspn(s, ",");
        mask |= log_subsys_bit(s, n, &unknown);
        if (unknown)
            st = BRAID_ERR_INVALID;
        s += n + (s[n] == ',');
    }
    *mask_p = invert ? ~mask : mask;
    return st;
}

static braid_log_level_t log_level_get(void)
{
    return __atomic_load_n(&braid_log_level_cur, __ATOMIC_RELAXED);
}

static const char *log_basename(const char *file)
{
    const char *slash = file != NULL ? strrchr(file, '/') : NULL;
    return slash != NULL ? slash + 1 : (file != NULL ? file : "?");
}

/* One line to the log; log_mu held. TRACE lines, and WARN lines at TRACE, name file:line. */
static void log_line_locked(braid_log_level_t level, const char *file, int line,
                            const char *msg)
{
    FILE *out = log_out != NULL ? log_out : stdout;
    const char *word = level == BRAID_LOG_VERSION ? "INFO" : log_level_names[level];
    long tid = syscall(SYS_gettid);
    int len = (int)strlen(msg);
    while (len > 0 && msg[len - 1] == '\n')
        len--;
    if (level == BRAID_LOG_TRACE || (level == BRAID_LOG_WARN && log_level_get() >= BRAID_LOG_TRACE))
        fprintf(out, "%s:%d:%ld [%d] %s:%d NCCL %s %.*s\n", log_host, (int)getpid(), tid,
                log_rank, log_basename(file), line, word, len, msg);
    else
        fprintf(out, "%s:%d:%ld [%d] NCCL %s %.*s\n", log_host, (int)getpid(), tid, log_rank,
                word, len, msg);
    fflush(out);
}

/* WARN while configuring (log_mu held, so braid_log cannot be used). */
static void log_warn_locked(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_warn_locked(int line, const char *fmt, ...)
{
    char msg[LOG_MSG_MAX];
    va_list ap;
    if (log_level_get() < BRAID_LOG_WARN)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_line_locked(BRAID_LOG_WARN, __FILE__, line, msg);
}

/* The variable a parameter's value came from, for messages. */
static const char *log_var_name(braid_param_id_t id, char *buf, size_t len)
{
    const braid_param_t *d = braid_param_desc(id);
    if (braid_param_source(id) == BRAID_PARAM_SRC_NCCL_ENV)
        return d->alias;
    snprintf(buf, len, "BRAID_%s", d->name);
    return buf;
}

/* NCCL_DEBUG_FILE with %h -> host, %p -> pid, %% -> %. -1 if it does not fit. */
static int log_path_expand(const char *pattern, char *buf, size_t len)
{
    size_t o = 0;
    for (const char *s = pattern; *s != '\0'; s++) {
        char tmp[24] = { *s, '\0' };  /* a plain character, or the '%' of "%%" */
        const char *piece = tmp;
        if (s[0] == '%' && (s[1] == 'h' || s[1] == 'p' || s[1] == '%')) {
            s++;
            if (*s == 'h')
                piece = log_host;
            else if (*s == 'p')
                snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
        }
        size_t n = strlen(piece);
        if (o + n >= len)
            return -1;
        memcpy(buf + o, piece, n);
        o += n;
    }
    buf[o] = '\0';
    return 0;
}

static void log_host_set(void)
{
    if (gethostname(log_host, sizeof(log_host) - 1) != 0)
        snprintf(log_host, sizeof(log_host), "unknown");
    log_host[sizeof(log_host) - 1] = '\0';
    log_host[strcspn(log_host, ".")] = '\0';
}

/* Opens NCCL_DEBUG_FILE (if set) into log_out; returns errno on failure, 0 otherwise. */
static int log_file_open_locked(const char *pattern, char *path, size_t len)
{
    if (log_out != NULL)
        fclose(log_out);
    log_out = NULL;
    if (*pattern == '\0')
        return 0;
    if (log_path_expand(pattern, path, len) != 0)
        return ENAMETOOLONG;
    log_out = fopen(path, "we");
    return log_out == NULL ? errno : 0;
}

/* Read NCCL_DEBUG* and apply them; log_mu held. Problems are reported after the new level
 * is in force, so that they show when NCCL_DEBUG asks for warnings. */
static void log_configure_locked(void)
{
    const char *dbg = braid_param_str(BRAID_P_DEBUG);
    const char *sub = braid_param_str(BRAID_P_DEBUG_SUBSYS);
    const char *file = braid_param_str(BRAID_P_DEBUG_FILE);
    braid_log_level_t level;
    uint64_t mask;
    char path[LOG_PATH_MAX], var[64];
    int bad_level = braid_log_level_parse(dbg, &level) != BRAID_OK;
    int bad_sub = braid_log_subsys_parse(sub, &mask) != BRAID_OK;
    log_host_set();
    int file_err = log_file_open_locked(file, path, sizeof(path));
    atomic_store(&log_fd, log_out != NULL ? fileno(log_out) : STDOUT_FILENO);
    if (bad_level)
        level = BRAID_LOG_WARN;  /* the user asked for some logging: at least show why not */
    __atomic_store_n(&braid_log_subsys_cur, mask, __ATOMIC_RELAXED);
    __atomic_store_n(&braid_log_level_cur, level, __ATOMIC_RELAXED);
    if (bad_level)
        log_warn_locked(__LINE__, "%s=\"%s\" is not a log level (use VERSION, WARN, INFO, "
                        "ABORT or TRACE); logging warnings only",
                        log_var_name(BRAID_P_DEBUG, var, sizeof(var)), dbg);
    if (bad_sub)
        log_warn_locked(__LINE__, "%s=\"%s\" names an unknown subsystem (known: INIT, COLL, "
                        "P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, "
                        "BOOTSTRAP, REG, PROFILE, RAS, ALL); ignoring it",
                        log_var_name(BRAID_P_DEBUG_SUBSYS, var, sizeof(var)), sub);
    if (file_err != 0)
        log_warn_locked(__LINE__, "cannot open the log file \"%s\" from %s=\"%s\": %s; "
                        "logging to stdout", file_err == ENAMETOOLONG ? file : path,
                        log_var_name(BRAID_P_DEBUG_FILE, var, sizeof(var)), file,
                        strerror(file_err));
}

/* A child must not inherit log_mu locked by a thread that does not exist there. */
static void log_fork_prepare(void)
{
    pthread_mutex_lock(&log_mu);
}

static void log_fork_done(void)
{
    pthread_mutex_unlock(&log_mu);
}

static void log_init_once(void)
{
    pthread_atfork(log_fork_prepare, log_fork_done, log_fork_done);
    pthread_mutex_lock(&log_mu);
    log_configure_locked();
    pthread_mutex_unlock(&log_mu);
}

void braid_log_init(void)
{
    pthread_once(&log_once, log_init_once);
}

void braid_log_reset(void)
{
    braid_param_reload();
    braid_log_init();
    pthread_mutex_lock(&log_mu);
    log_configure_locked();
    pthread_mutex_unlock(&log_mu);
}

void braid_log(braid_log_level_t level, uint64_t subsys, const char *file, int line,
               const char *fmt, ...)
{
    char msg[LOG_MSG_MAX];
    va_list ap;
    braid_log_init();
    if (level <= BRAID_LOG_NONE || level > BRAID_LOG_TRACE || level > log_level_get())
        return;
    if (level != BRAID_LOG_WARN &&
        (__atomic_load_n(&braid_log_subsys_cur, __ATOMIC_RELAXED) & subsys) == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    log_line_locked(level, file, line, msg);
    pthread_mutex_unlock(&log_mu);
}

void braid_log_version_once(void)
{
    braid_log_init();
    if (log_level_get() < BRAID_LOG_VERSION || atomic_exchange(&log_version_shown, 1) != 0)
        return;
    pthread_mutex_lock(&log_mu);
    log_line_locked(BRAID_LOG_VERSION, __FILE__, __LINE__,
                    "NCCL version " BRAID_NCCL_VERSION_STRING "+braid " BRAID_VERSION_STRING);
    pthread_mutex_unlock(&log_mu);
}

int braid_log_warn_fd(void)
{
    return log_level_get() >= BRAID_LOG_WARN ? atomic_load(&log_fd) : -1;
}

void braid_log_set_rank(int rank)
{
    log_rank = rank;
}
