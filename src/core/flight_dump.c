/*
 * The flight recorder's dump: one communicator's records as a text table for people
 * (lines that start with '#') and as JSON lines for tools/braid-flight (one header object,
 * then one object per record), to BRAID_FLIGHT_RECORDER_FILE (%h host, %p pid; appended)
 * or, when it is unset, to the log at WARN level.
 *
 * Everything here is async-signal-safe, since a signal handler dumps too: text is
 * formatted by the small formatter below into buffers on the stack (no stdio, no malloc,
 * no locks) and written with write(2). Only a dump outside a signal handler without a file
 * goes through the logger, one line per call.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/flight_int.h"
#include "base/dtype.h"
#include "base/log.h"

#define OUT_LINE 1536
#define OUT_BUF 4096
#define DETAIL_MAX 700      /* bytes of the error text a header carries */

typedef struct out {
    int fd;                 /* write whole lines here; -1: through the logger */
    char prefix[160];       /* before every line written to the log's descriptor */
    size_t prefix_len;
    char line[OUT_LINE];    /* the line being formatted */
    size_t llen;
    char buf[OUT_BUF];      /* whole lines not yet written */
    size_t blen;
} out_t;

/* ---- a formatter that is safe in a signal handler ------------------------------------ */

static void out_mem(out_t *o, const char *s, size_t n)
{
    if (n > OUT_LINE - 1 - o->llen)
        n = OUT_LINE - 1 - o->llen;   /* an overlong line is cut */
    memcpy(o->line + o->llen, s, n);
    o->llen += n;
}

static void out_s(out_t *o, const char *s)
{
    out_mem(o, s, strlen(s));
}

static void out_u(out_t *o, uint64_t v)
{
    char d[24];
    int i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    out_mem(o, d + i, sizeof(d) - (size_t)i);
}

static void out_i(out_t *o, int64_t v)
{
    if (v < 0) {
        out_s(o, "-");
        out_u(o, (uint64_t)0 - (uint64_t)v);
    } else {
        out_u(o, (uint64_t)v);
    }
}

static void out_x16(out_t *o, uint64_t v)
{
    char d[16];
    for (int i = 15; i >= 0; i--, v >>= 4)
        d[i] = "0123456789abcdef"[v & 15];
    out_mem(o, d, sizeof(d));
}

/* Spaces up to column `col` of the line (at least one). */
static void out_col(out_t *o, size_t col)
{
    do
        out_s(o, " ");
    while (o->llen < col && o->llen < OUT_LINE - 1);
}

/* Microseconds as milliseconds with three decimals. */
static void out_ms(out_t *o, uint64_t us)
{
    char frac[4] = { (char)('0' + us / 100 % 10), (char)('0' + us / 10 % 10),
                     (char)('0' + us % 10), '\0' };
    out_u(o, us / 1000);
    out_s(o, ".");
    out_s(o, frac);
}

/* A JSON string: quotes, backslashes and control characters escaped; at most `max` bytes
 * of s. */
static void out_js(out_t *o, const char *s, size_t max)
{
    out_s(o, "\"");
    for (size_t i = 0; s[i] != '\0' && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7] = { '\\', (char)c, '\0' };
        if (c < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = "0123456789abcdef"[c >> 4];
            esc[5] = "0123456789abcdef"[c & 15];
            esc[6] = '\0';
            out_s(o, esc);
        } else if (c == '"' || c == '\\') {
            out_s(o, esc);
        } else {
            out_mem(o, s + i, 1);
        }
    }
    out_s(o, "\"");
}

static void out_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;   /* nothing better to do with a dump that cannot be written */
        p += w;
        n -= (size_t)w;
    }
}

static void out_flush(out_t *o)
{
    if (o->fd >= 0 && o->blen > 0)
        out_write(o->fd, o->buf, o->blen);
    o->blen = 0;
}

/* End the line: into the buffer of whole lines (flushed when full), or to the logger. */
static void out_eol(out_t *o)
{
    if (o->fd < 0) {
        o->line[o->llen] = '\0';
        BRAID_WARN("%s", o->line);
        o->llen = 0;
        return;
    }
    if (o->prefix_len + o->llen + 1 > OUT_BUF - o->blen)
        out_flush(o);
    memcpy(o->buf + o->blen, o->prefix, o->prefix_len);
    memcpy(o->buf + o->blen + o->prefix_len, o->line, o->llen);
    o->blen += o->prefix_len + o->llen;
    o->buf[o->blen++] = '\n';
    o->llen = 0;
}

/* ---- where the dump goes ------------------------------------------------------------ */

/* BRAID_FLIGHT_RECORDER_FILE with %h -> host, %p -> pid, %% -> %; 0, or -1 if too long. */
static int dump_path(char *buf, size_t len)
{
    size_t n = 0;
    for (const char *s = braid_flight_file; *s != '\0'; s++) {
        char pid[24];
        const char *piece = s;
        size_t plen = 1;
        if (s[0] == '%' && (s[1] == 'h' || s[1] == 'p' || s[1] == '%')) {
            s++;
            if (*s == 'h') {
                piece = braid_flight_host;
                plen = strlen(piece);
            } else if (*s == 'p') {
                uint64_t v = (uint64_t)getpid();
                int i = sizeof(pid);
                do {
                    pid[--i] = (char)('0' + v % 10);
                    v /= 10;
                } while (v != 0);
                piece = pid + i;
                plen = sizeof(pid) - (size_t)i;
            }
        }
        if (n + plen >= len)
            return -1;
        memcpy(buf + n, piece, plen);
        n += plen;
    }
    buf[n] = '\0';
    return 0;
}

/* The log line prefix, as the logger writes it: "host:pid:tid [rank] NCCL WARN ". */
static void out_log_prefix(out_t *o, int rank)
{
    out_s(o, braid_flight_host);
    out_s(o, ":");
    out_i(o, getpid());
    out_s(o, ":");
    out_i(o, (int64_t)syscall(SYS_gettid));
    out_s(o, " [");
    out_i(o, rank);
    out_s(o, "] NCCL WARN ");
    memcpy(o->prefix, o->line, o->llen < sizeof(o->prefix) ? o->llen : sizeof(o->prefix));
    o->prefix_len = o->llen < sizeof(o->prefix) ? o->llen : sizeof(o->prefix);
    o->llen = 0;
}

/* Open the sink: the file, else the log (its descriptor in a signal handler). 0, or -1
 * when the dump would be shown nowhere. */
static int out_open(out_t *o, int rank, int in_signal)
{
    char path[1024];
    o->fd = -1;
    o->llen = o->blen = o->prefix_len = 0;
    if (braid_flight_file[0] != '\0') {
        if (dump_path(path, sizeof(path)) == 0)
            o->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (o->fd >= 0)
            return 0;
        if (!in_signal)
            BRAID_WARN("cannot open the flight recorder's file \"%s\" (BRAID_FLIGHT_RECORDER_"
                       "FILE=\"%s\"): %s; dumping to the log", path, braid_flight_file,
                       strerror(errno));
    }
    if (!in_signal)
        return braid_log_level_cur >= BRAID_LOG_WARN ? 0 : -1;
    o->fd = braid_log_warn_fd();
    if (o->fd < 0)
        return -1;
    out_log_prefix(o, rank);
    o->fd = dup(o->fd);   /* closed like a file's */
    return o->fd >= 0 ? 0 : -1;
}

static void out_close(out_t *o)
{
    out_flush(o);
    if (o->fd >= 0)
        close(o->fd);
}

/* ---- the dump ------------------------------------------------------------------------ */

/* A consistent copy of a record, taken without a lock. */
typedef struct snap {
    uint64_t id, seq, count, t_enq, t_start, t_check, t_end;
    uint32_t call;
    int32_t root, state, status, step, nsteps, waits_on, flags;
} snap_t;

#define LD(_f) atomic_load_explicit(&r->_f, memory_order_relaxed)

/* Record i of the ring, unless a newer op took its place meanwhile. */
static int snap_take(const braid_flight_t *f, uint64_t i, snap_t *s)
{
    braid_flight_rec_t *r = (braid_flight_rec_t *)&f->recs[i % f->n];
    s->id = atomic_load_explicit(&r->id, memory_order_acquire);
    if (s->id != i + 1)
        return 0;
    s->seq = LD(seq), s->count = LD(count), s->call = LD(call), s->root = LD(root);
    s->state = LD(state), s->status = LD(status), s->step = LD(step);
    s->nsteps = LD(nsteps), s->waits_on = LD(waits_on), s->flags = LD(flags);
    s->t_enq = LD(t_enq), s->t_start = LD(t_start), s->t_check = LD(t_check);
    s->t_end = LD(t_end);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&r->id, memory_order_relaxed) == s->id;
}

static int snap_kind(const snap_t *s)
{
    return (int)(s->call & 0xff);
}

static int snap_p2p(const snap_t *s)
{
    return snap_kind(s) == BRAID_COLL_SEND || snap_kind(s) == BRAID_COLL_RECV;
}

static const char *snap_op(const snap_t *s)
{
    static const char *const names[] = { "sum", "prod", "max", "min", "avg", "premulsum" };
    unsigned op = (s->call >> 16) & 0xff;
    return op < sizeof(names) / sizeof(names[0]) ? names[op] : "-";
}

static const char *snap_algo(const snap_t *s)
{
    int a = (int)(s->call >> 24);
    return a >= 1 && a <= braid_nalgos ? braid_algos[a - 1]->name : "-";
}

static const char *snap_state(const snap_t *s)
{
    switch (s->state) {
    case BRAID_FLIGHT_QUEUED: return "queued";
    case BRAID_FLIGHT_RUNNING: return "running";
    case BRAID_FLIGHT_DONE: return "done";
    case BRAID_FLIGHT_FAILED: return "failed";
    default: return "?";
    }
}

/* What the op waits for: "rank" (waits_on), "gpu", "stream", or "" (nothing, or done). */
static const char *snap_waits_for(const snap_t *s)
{
    int waiting = s->state == BRAID_FLIGHT_RUNNING || s->state == BRAID_FLIGHT_FAILED;
    if (waiting && s->waits_on >= 0)
        return "rank";
    if (waiting && s->waits_on == BRAID_FLIGHT_WAITS_GPU)
        return "gpu";
    if (s->state == BRAID_FLIGHT_QUEUED && s->waits_on == BRAID_FLIGHT_WAITS_STREAM)
        return "stream";
    return "";
}

typedef struct clocks {
    uint64_t mono_us, wall_us;
} clocks_t;

static uint64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* "  12.345" ms before the dump, or "  -". */
/* Columns of the text table. */
enum { C_CALL = 9, C_SEQ = 23, C_PEER = 30, C_COUNT = 36, C_TYPE = 48, C_OP = 57,
       C_ALGO = 67, C_STATE = 79, C_QUEUED = 111, C_STARTED = 122, C_CHECKED = 133,
       C_ENDED = 144 };

/* "12.345" ms before the dump, or "-". */
static void text_time(out_t *o, const clocks_t *c, uint64_t t, size_t col)
{
    out_col(o, col);
    if (t == 0)
        out_s(o, "-");
    else
        out_ms(o, c->mono_us > t ? c->mono_us - t : 0);
}

static void text_rec(out_t *o, const snap_t *s, const clocks_t *c)
{
    out_s(o, "# ");
    out_u(o, s->id);
    out_col(o, C_CALL);
    out_s(o, braid_coll_name((braid_coll_kind_t)snap_kind(s)));
    out_col(o, C_SEQ);
    out_u(o, s->seq);
    out_col(o, C_PEER);
    if (s->root >= 0)
        out_i(o, s->root);
    else
        out_s(o, "-");
    out_col(o, C_COUNT);
    out_u(o, s->count);
    out_col(o, C_TYPE);
    out_s(o, braid_dtype_name((braid_dtype_t)((s->call >> 8) & 0xff)));
    out_col(o, C_OP);
    out_s(o, snap_op(s));
    out_col(o, C_ALGO);
    out_s(o, snap_algo(s));
    out_col(o, C_STATE);
    out_s(o, snap_state(s));
    if (s->state == BRAID_FLIGHT_RUNNING || s->state == BRAID_FLIGHT_FAILED) {
        out_s(o, " step ");
        out_i(o, s->step);
        out_s(o, "/");
        out_i(o, s->nsteps);
        if (s->waits_on >= 0) {
            out_s(o, " waits on ");
            out_i(o, s->waits_on);
        } else if (s->waits_on == BRAID_FLIGHT_WAITS_GPU) {
            out_s(o, " waits on the GPU (braid's kernels)");
        }
    }
    if (s->state == BRAID_FLIGHT_QUEUED && s->waits_on == BRAID_FLIGHT_WAITS_STREAM)
        out_s(o, " waits for its stream (work queued before the call)");
    text_time(o, c, s->t_enq, C_QUEUED);
    text_time(o, c, s->t_start, C_STARTED);
    text_time(o, c, s->t_check, C_CHECKED);
    text_time(o, c, s->t_end, C_ENDED);
    if (s->state == BRAID_FLIGHT_FAILED) {
        out_s(o, "  ");
        out_s(o, braid_status_str((braid_status_t)s->status));
    }
    out_eol(o);
}

static void json_time(out_t *o, const char *key, const clocks_t *c, uint64_t t)
{
    out_s(o, key);
    if (t == 0)
        out_s(o, "null");
    else
        out_u(o, c->wall_us - (c->mono_us > t ? c->mono_us - t : 0));
}

static void json_rec(out_t *o, const braid_flight_t *f, const snap_t *s, const clocks_t *c)
{
    out_s(o, "{\"braid_flight\":1,\"type\":\"op\",\"comm\":\"");
    out_x16(o, f->nonce);
    out_s(o, "\",\"rank\":");
    out_i(o, f->rank);
    out_s(o, ",\"id\":");
    out_u(o, s->id);
    out_s(o, ",\"coll\":");
    out_js(o, braid_coll_name((braid_coll_kind_t)snap_kind(s)), 32);
    out_s(o, ",\"seq\":");
    out_u(o, s->seq);
    out_s(o, ",\"peer\":");
    out_i(o, snap_p2p(s) ? s->root : -1);
    out_s(o, ",\"root\":");
    out_i(o, snap_p2p(s) ? -1 : s->root);
    out_s(o, ",\"count\":");
    out_u(o, s->count);
    out_s(o, ",\"dtype\":");
    out_js(o, braid_dtype_name((braid_dtype_t)((s->call >> 8) & 0xff)), 32);
    out_s(o, ",\"op\":");
    out_js(o, snap_op(s), 32);
    out_s(o, ",\"algo\":");
    out_js(o, snap_algo(s), 64);
    out_s(o, ",\"state\":");
    out_js(o, snap_state(s), 16);
    out_s(o, ",\"status\":");
    out_js(o, s->state == BRAID_FLIGHT_FAILED ? braid_status_str(s->status) : "", 64);
    out_s(o, ",\"step\":");
    out_i(o, s->step);
    out_s(o, ",\"nsteps\":");
    out_i(o, s->nsteps);
    out_s(o, ",\"waits_on\":");
    int waiting = s->state == BRAID_FLIGHT_RUNNING || s->state == BRAID_FLIGHT_FAILED;
    out_i(o, waiting && s->waits_on >= 0 ? s->waits_on : -1);
    out_s(o, ",\"waits_for\":");
    out_js(o, snap_waits_for(s), 16);
    out_s(o, (s->flags & BRAID_FLIGHT_DEVICE) ? ",\"device\":true" : ",\"device\":false");
    json_time(o, ",\"t_enq_us\":", c, s->t_enq);
    json_time(o, ",\"t_start_us\":", c, s->t_start);
    json_time(o, ",\"t_check_us\":", c, s->t_check);
    json_time(o, ",\"t_end_us\":", c, s->t_end);
    out_s(o, "}");
    out_eol(o);
}

static void text_header(out_t *o, const braid_flight_t *f, const char *why, const char *detail,
                        int dump, uint64_t head, uint64_t first)
{
    out_s(o, "# braid flight recorder: comm ");
    out_x16(o, f->nonce);
    if (f->name[0] != '\0') {
        out_s(o, " \"");
        out_s(o, f->name);
        out_s(o, "\"");
    }
    out_s(o, ", rank ");
    out_i(o, f->rank);
    out_s(o, " of ");
    out_i(o, f->nranks);
    out_s(o, ", pid ");
    out_i(o, getpid());
    out_s(o, " on ");
    out_s(o, braid_flight_host);
    out_s(o, ", dump ");
    out_i(o, dump);
    out_s(o, " (");
    out_s(o, why);
    out_s(o, ")");
    if (detail != NULL && detail[0] != '\0') {
        out_s(o, ": ");
        out_mem(o, detail, strnlen(detail, DETAIL_MAX));
    }
    out_eol(o);
    out_s(o, "# ");
    out_u(o, head);
    out_s(o, " ops recorded, the last ");
    out_u(o, head - first);
    out_s(o, " here; times in ms before the dump");
    out_eol(o);
    static const struct { int col; const char *name; } cols[] = {
        { C_CALL, "call" }, { C_SEQ, "seq" }, { C_PEER, "peer" }, { C_COUNT, "count" },
        { C_TYPE, "type" }, { C_OP, "op" }, { C_ALGO, "algo" }, { C_STATE, "state" },
        { C_QUEUED, "queued" }, { C_STARTED, "started" }, { C_CHECKED, "checked" },
        { C_ENDED, "ended" },
    };
    out_s(o, "# id");
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        out_col(o, (size_t)cols[i].col);
        out_s(o, cols[i].name);
    }
    out_eol(o);
}

static void json_header(out_t *o, const braid_flight_t *f, const char *why, const char *detail,
                        int dump, uint64_t head, const clocks_t *c)
{
    out_s(o, "{\"braid_flight\":1,\"type\":\"comm\",\"comm\":\"");
    out_x16(o, f->nonce);
    out_s(o, "\",\"name\":");
    out_js(o, f->name, FLIGHT_NAME_MAX);
    out_s(o, ",\"rank\":");
    out_i(o, f->rank);
    out_s(o, ",\"nranks\":");
    out_i(o, f->nranks);
    out_s(o, ",\"host\":");
    out_js(o, braid_flight_host, FLIGHT_HOST_MAX);
    out_s(o, ",\"pid\":");
    out_i(o, getpid());
    out_s(o, ",\"reason\":");
    out_js(o, why, 64);
    out_s(o, ",\"detail\":");
    out_js(o, detail != NULL ? detail : "", DETAIL_MAX);
    out_s(o, ",\"dump\":");
    out_i(o, dump);
    out_s(o, ",\"time_us\":");
    out_u(o, c->wall_us);
    out_s(o, ",\"recorded\":");
    out_u(o, head);
    out_s(o, ",\"capacity\":");
    out_u(o, f->n);
    out_s(o, "}");
    out_eol(o);
}

void braid_flight_dump(braid_flight_t *f, const char *why, const char *detail, int in_signal)
{
    out_t o;
    snap_t s;
    if (f == NULL || out_open(&o, f->rank, in_signal) != 0)
        return;
    clocks_t c = { clock_us(CLOCK_MONOTONIC), clock_us(CLOCK_REALTIME) };
    int dump = atomic_fetch_add(&f->dumps, 1) + 1;
    uint64_t head = atomic_load_explicit(&f->head, memory_order_acquire);
    uint64_t first = head > f->n ? head - f->n : 0;
    text_header(&o, f, why, detail, dump, head, first);
    for (uint64_t i = first; i < head; i++)
        if (snap_take(f, i, &s))
            text_rec(&o, &s, &c);
    json_header(&o, f, why, detail, dump, head, &c);
    for (uint64_t i = first; i < head; i++)
        if (snap_take(f, i, &s))
            json_rec(&o, f, &s, &c);
    out_close(&o);
}
