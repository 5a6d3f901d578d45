/*
 * The bootstrap root: one detached thread per job (per ncclGetUniqueId call, or started by
 * rank 0 under NCCL_COMM_ID).
 *
 *   accept -> read hello -> check magic, version, nonce, rank, nranks, info length
 *        a connection of another job (other nonce) gets a refusal and the root keeps waiting;
 *        disagreement inside the job (nranks, a rank twice) fails every connected rank.
 *   all nranks joined     -> send each rank the table, close, exit
 *   timeout (counted from the first rank's arrival) -> tell the connected ranks which ranks
 *        never joined, exit
 *
 * The root acknowledges each hello at once, so that a rank knows it talks to a braid root.
 * Ranks send nothing after their hello, so a joined rank's socket becoming readable means it
 * went away: died, or gave up. The job fails at once, naming it, rather than leave the
 * others waiting for it until the timeout.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/bootstrap_int.h"
#include "base/log.h"
#include "topo/host.h"

#define ROOT_HELLO_NS (5 * 1000000000ll)  /* a connection has this long to send its hello */
#define ROOT_REPLY_NS (5 * 1000000000ll)  /* and to take an error reply */

typedef struct bs_root {
    int lfd, wake_fd;
    uint64_t nonce;
    int timeout_s;
    int64_t deadline;            /* from the first rank's arrival */
    int nranks;                  /* -1 until the first rank */
    uint32_t info_len;
    int njoined;
    int *fds;                    /* per rank; -1: not joined */
    bs_rec_t *recs;
    uint8_t *infos;
    struct pollfd *pfds;         /* lfd, wake_fd, then one per rank */
    char where[BRAID_SOCKADDR_STRLEN];
    struct bs_root *next;        /* in root_list */
} bs_root_t;

static pthread_mutex_t root_lock = PTHREAD_MUTEX_INITIALIZER;
static bs_root_t *root_list;     /* running roots of this process, for cancel */

const char *braid_bootstrap_rec_str(const bs_rec_t *rec, char *buf, size_t len)
{
    snprintf(buf, len, "rank %d (host %.*s, pid %u)", rec->rank, BS_HOST_LEN, rec->host,
             rec->pid);
    return buf;
}

static void root_reply(int fd, braid_status_t st, const char *text)
{
    bs_reply_t reply;
    memset(&reply, 0, sizeof(reply));
    reply.magic = BS_PROTO_MAGIC;
    reply.status = st;
    snprintf(reply.text, sizeof(reply.text), "%s", text);
    reply.pid = (uint32_t)getpid();
    snprintf(reply.host, sizeof(reply.host), "%s", braid_host_name());
    (void)braid_socket_send_all(fd, &reply, sizeof(reply), braid_time_ns() + ROOT_REPLY_NS, -1);
}

/* Refuse one connection and keep serving the job. */
static void root_refuse(int fd, braid_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void root_refuse(int fd, braid_status_t st, const char *fmt, ...)
{
    char text[BS_TEXT_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    root_reply(fd, st, text);
    braid_socket_close(fd);
}

/* Fail the job: every connected rank (and `extra_fd`) gets the error; the ranks of this
 * process last, since one of them may end the process as soon as it has its reply. */
static braid_status_t root_fail(bs_root_t *root, int extra_fd, braid_status_t st,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static braid_status_t root_fail(bs_root_t *root, int extra_fd, braid_status_t st,
                                const char *fmt, ...)
{
    char text[BS_TEXT_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap root %s: %s", root->where, text); /* ranks warn */
    if (extra_fd >= 0) {
        root_reply(extra_fd, st, text);
        braid_socket_close(extra_fd);
    }
    for (int here = 0; here < 2; here++)
        for (int r = 0; r < root->nranks; r++) {
            if (root->fds[r] < 0 || (root->recs[r].pid == (uint32_t)getpid()) != here)
                continue;
            root_reply(root->fds[r], st, text);
            braid_socket_close(root->fds[r]);
            root->fds[r] = -1;
        }
    return st;
}

/* "3,5,10-12" for the ranks that have not joined, cut short with "..." if long. */
static int root_missing_str(const bs_root_t *root, char *buf, size_t len)
{
    size_t used = 0;
    int count = 0;
    buf[0] = '\0';
    for (int r = 0; r < root->nranks; r++) {
        int last = r;
        if (root->fds[r] >= 0)
            continue;
        while (last + 1 < root->nranks && root->fds[last + 1] < 0)
            last++;
        count += last - r + 1;
        if (used + 24 < len) {
            int n = last == r ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", r)
                              : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "",
                                         r, last);
            used += n > 0 ? (size_t)n : 0;
        } else if (used + 4 < len && strcmp(buf + used - 3, "...") != 0) {
            used += (size_t)snprintf(buf + used, len - used, ",...");
        }
        r = last;
    }
    return count;
}

static braid_status_t root_timeout(bs_root_t *root)
{
    char list[200];
    int missing = root_missing_str(root, list, sizeof(list));
    return root_fail(root, -1, BRAID_ERR_TIMEOUT,
                     "bootstrap: rank%s %s of %d did not join within %d s (root %s): %s "
                     "crashed, %s not started, or %s another unique id",
                     missing > 1 ? "s" : "", list, root->nranks, root->timeout_s, root->where,
                     missing > 1 ? "they" : "it", missing > 1 ? "were" : "was",
                     missing > 1 ? "use" : "uses");
}

/* The first rank of the job fixes nranks and the info length, and starts the clock. */
static braid_status_t root_first(bs_root_t *root, const bs_hello_t *h)
{
    size_t n = (size_t)h->nranks;
    root->fds = malloc(n * sizeof(*root->fds));
    root->recs = calloc(n, sizeof(*root->recs));
    root->infos = malloc(n * h->info_len + 1);
    root->pfds = malloc((n + 2) * sizeof(*root->pfds));
    if (root->fds == NULL || root->recs == NULL || root->infos == NULL || root->pfds == NULL) {
        BRAID_WARN("bootstrap root %s: out of memory for %d ranks", root->where, h->nranks);
        return BRAID_ERR_NOMEM;
    }
    for (size_t r = 0; r < n; r++)
        root->fds[r] = -1;
    root->nranks = h->nranks;
    root->info_len = h->info_len;
    root->deadline = braid_deadline_after_s(root->timeout_s);
    return BRAID_OK;
}

braid_status_t braid_bootstrap_hello_check(const bs_hello_t *h, uint64_t nonce,
                                           const char *where, char *why, size_t len)
{
    char who[160];
    braid_bootstrap_rec_str(&h->rec, who, sizeof(who));
    if (h->magic != BS_PROTO_MAGIC)
        snprintf(why, len, "bootstrap: a connection to the root at %s sent no braid hello",
                 where);
    else if (h->version != BS_PROTO_VERSION)
        snprintf(why, len, "bootstrap: %s speaks protocol %u but the root at %s speaks %u: "
                 "every rank must run the same braid", who, h->version, where,
                 BS_PROTO_VERSION);
    else if (h->nonce != nonce)
        snprintf(why, len, "bootstrap: the root at %s serves another job (nonce %016" PRIx64
                 ", not %016" PRIx64 "): the unique id is stale or belongs to another job",
                 where, nonce, h->nonce);
    else if (h->nranks <= 0 || h->nranks > BS_NRANKS_MAX || h->rec.rank < 0 ||
             h->rec.rank >= h->nranks || h->info_len > BS_INFO_MAX)
        snprintf(why, len, "bootstrap: %s of nranks %d (info %u bytes) is out of range", who,
                 h->nranks, h->info_len);
    else
        return BRAID_OK;
    return BRAID_ERR_INVALID;
}

/* Checks that concern only this connection: refused, the root goes on. 1 when refused. */
static int root_check_conn(bs_root_t *root, int fd, const bs_hello_t *h)
{
    char why[BS_TEXT_LEN], who[160];
    if (braid_bootstrap_hello_check(h, root->nonce, root->where, why, sizeof(why)) == BRAID_OK)
        return 0;
    if (h->version == BS_PROTO_VERSION && h->nonce != root->nonce)
        BRAID_WARN("bootstrap root %s: connection from another job (nonce %016" PRIx64 ", "
                   "this job is %016" PRIx64 ") from %s refused", root->where, h->nonce,
                   root->nonce, braid_bootstrap_rec_str(&h->rec, who, sizeof(who)));
    root_refuse(fd, BRAID_ERR_INVALID, "%s", why);
    return 1;
}

/* Checks against the ranks already there: a failure ends the job. */
static braid_status_t root_check_job(bs_root_t *root, int fd, const bs_hello_t *h)
{
    char who[160], other[160];
    int r = h->rec.rank;
    braid_bootstrap_rec_str(&h->rec, who, sizeof(who));
    if (h->nranks != root->nranks)
        return root_fail(root, fd, BRAID_ERR_INVALID, "bootstrap: %s says nranks is %d but "
                         "earlier ranks said %d: every rank must pass the same nranks",
                         who, h->nranks, root->nranks);
    if (h->info_len != root->info_len)
        return root_fail(root, fd, BRAID_ERR_INVALID, "bootstrap: %s sends %u bytes of info, "
                         "earlier ranks %u: the ranks run different braid builds", who,
                         h->info_len, root->info_len);
    if (root->fds[r] >= 0)
        return root_fail(root, fd, BRAID_ERR_INVALID, "bootstrap: rank %d joined twice: %s and "
                         "%s: each rank number must be used by one process", r,
                         braid_bootstrap_rec_str(&root->recs[r], other, sizeof(other)), who);
    return BRAID_OK;
}

/* Read and place one rank's hello. Errors returned end the job. */
static braid_status_t root_take(bs_root_t *root, int fd)
{
    int64_t deadline = braid_time_ns() + ROOT_HELLO_NS;
    uint8_t *info = NULL;
    bs_hello_t h;
    braid_status_t st;

    if (root->nranks > 0 && deadline > root->deadline)
        deadline = root->deadline;
    st = braid_socket_recv_all(fd, &h, sizeof(h), deadline, root->wake_fd);
    if (st == BRAID_OK && h.magic != BS_PROTO_MAGIC)
        st = BRAID_ERR_INVALID;
    /* Read the info even to refuse: closing on unread bytes would reset away the reply. */
    if (st == BRAID_OK && h.info_len <= BS_INFO_MAX) {
        info = malloc(h.info_len + 1);
        st = info == NULL ? BRAID_ERR_NOMEM
                          : braid_socket_recv_all(fd, info, h.info_len, deadline, root->wake_fd);
    }
    if (st < 0) {
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap root %s: dropped a connection that sent no "
                   "valid hello (%s)", root->where, braid_status_str(st));
        braid_socket_close(fd);
        free(info);
        return st == BRAID_ERR_ABORTED ? st : BRAID_OK;
    }
    if (root_check_conn(root, fd, &h)) {
        free(info);
        return BRAID_OK;
    }
    h.rec.host[BS_HOST_LEN - 1] = '\0';
    if (root->nranks < 0)
        st = root_first(root, &h);
    if (st == BRAID_OK)
        st = root_check_job(root, fd, &h);
    if (st == BRAID_OK) {
        char who[160];
        root->fds[h.rec.rank] = fd;
        root->recs[h.rec.rank] = h.rec;
        memcpy(root->infos + (size_t)h.rec.rank * root->info_len, info, h.info_len);
        root->njoined++;
        root_reply(fd, BRAID_INPROGRESS, "");   /* the ack: a braid root has it */
        BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap root %s: %s joined (%d of %d)", root->where,
                   braid_bootstrap_rec_str(&h.rec, who, sizeof(who)), root->njoined,
                   root->nranks);
    } else if (st == BRAID_ERR_NOMEM) {
        braid_socket_close(fd);
    }
    free(info);
    return st;
}

/* A joined rank's socket turned readable: it went away (it sends nothing after its hello),
 * so it died or gave up; the others would wait for it in vain. */
static braid_status_t root_drop(bs_root_t *root, int r)
{
    char who[160];
    braid_bootstrap_rec_str(&root->recs[r], who, sizeof(who));
    braid_socket_close(root->fds[r]);
    root->fds[r] = -1;
    root->njoined--;
    return root_fail(root, -1, BRAID_ERR_REMOTE, "bootstrap: %s left the bootstrap root at %s "
                     "before all %d ranks had joined (%d other%s had): its process exited, was "
                     "killed, or aborted its init", who, root->where, root->nranks,
                     root->njoined, root->njoined == 1 ? "" : "s");
}

static braid_status_t root_poll(bs_root_t *root)
{
    int n = 2;
    root->pfds[0] = (struct pollfd){ .fd = root->lfd, .events = POLLIN };
    root->pfds[1] = (struct pollfd){ .fd = root->wake_fd, .events = POLLIN };
    for (int r = 0; r < root->nranks; r++)
        root->pfds[n++] = (struct pollfd){ .fd = root->fds[r], .events = POLLIN };
    for (;;) {
        int64_t left = root->deadline == BRAID_DEADLINE_NONE
                           ? -1 : (root->deadline - braid_time_ns() + 999999) / 1000000;
        int rc = poll(root->pfds, (nfds_t)n, left < 0 ? -1 : left > 60000 ? 60000 : (int)left);
        if (rc < 0 && errno != EINTR) {
            BRAID_WARN("bootstrap root %s: poll failed: %s", root->where, strerror(errno));
            return BRAID_ERR_SYSTEM;
        }
        if (rc > 0)
            return root->pfds[1].revents ? BRAID_ERR_ABORTED : BRAID_OK;
        if (rc == 0 && braid_time_ns() >= root->deadline)
            return root_timeout(root);
    }
}

/* Wait until every rank has joined. Errors end the job (already reported). */
static braid_status_t root_gather(bs_root_t *root)
{
    while (root->nranks < 0 || root->njoined < root->nranks) {
        braid_status_t st;
        int fd;
        if (root->nranks < 0) {   /* before the first rank: no clock, no rank sockets */
            struct pollfd pfd = { .fd = root->lfd, .events = POLLIN };
            st = braid_socket_wait(&pfd, 1, BRAID_DEADLINE_NONE, 0, root->wake_fd);
        } else {
            st = root_poll(root);
            for (int r = 0; st == BRAID_OK && r < root->nranks; r++)
                if (root->fds[r] >= 0 && root->pfds[2 + r].revents)
                    st = root_drop(root, r);
        }
        while (st == BRAID_OK && braid_socket_accept(root->lfd, &fd) == BRAID_OK)
            st = root_take(root, fd);
        if (st < 0)
            return st;
    }
    return BRAID_OK;
}

static void root_send_tables(bs_root_t *root)
{
    size_t nrec = (size_t)root->nranks * sizeof(bs_rec_t);
    size_t ninfo = (size_t)root->nranks * root->info_len;
    bs_reply_t reply;
    memset(&reply, 0, sizeof(reply));
    reply.magic = BS_PROTO_MAGIC;
    reply.status = BRAID_OK;
    for (int r = 0; r < root->nranks; r++) {
        int64_t deadline = braid_deadline_after_s(root->timeout_s);
        braid_status_t st;
        st = braid_socket_send_all(root->fds[r], &reply, sizeof(reply), deadline, -1);
        if (st == BRAID_OK)
            st = braid_socket_send_all(root->fds[r], root->recs, nrec, deadline, -1);
        if (st == BRAID_OK)
            st = braid_socket_send_all(root->fds[r], root->infos, ninfo, deadline, -1);
        if (st < 0)
            BRAID_WARN("bootstrap root %s: could not send the table to rank %d: %s",
                       root->where, r, braid_status_str(st));
        braid_socket_close(root->fds[r]);
        root->fds[r] = -1;
    }
    BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap root %s: %d ranks joined, table sent",
               root->where, root->nranks);
}

static void root_free(bs_root_t *root)
{
    for (int r = 0; r < root->nranks; r++)
        braid_socket_close(root->fds[r]);
    braid_socket_close(root->lfd);
    braid_socket_close(root->wake_fd);
    free(root->fds);
    free(root->recs);
    free(root->infos);
    free(root->pfds);
    free(root);
}

static void root_unlist(bs_root_t *root)
{
    pthread_mutex_lock(&root_lock);
    for (bs_root_t **p = &root_list; *p != NULL; p = &(*p)->next) {
        if (*p == root) {
            *p = root->next;
            break;
        }
    }
    pthread_mutex_unlock(&root_lock);
}

static void *root_main(void *arg)
{
    bs_root_t *root = arg;
    if (root_gather(root) == BRAID_OK) {
        braid_socket_close(root->lfd);   /* no later job may queue behind this one */
        root->lfd = -1;
        root_send_tables(root);
    }
    root_unlist(root);
    root_free(root);
    return NULL;
}

/* Start the detached thread with every signal blocked: signals belong to the application. */
static int root_thread_start(bs_root_t *root)
{
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t all, old;
    int rc;
    sigfillset(&all);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&tid, &attr, root_main, root);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

braid_status_t braid_bootstrap_root_start(braid_sockaddr_t *addr, int reuse_addr, uint64_t nonce,
                                          int timeout_s)
{
    bs_root_t *root = calloc(1, sizeof(*root));
    braid_status_t st;
    int rc;
    if (root == NULL)
        return braid_err(BRAID_ERR_NOMEM, "bootstrap: no memory for a root");
    root->nranks = -1;
    root->nonce = nonce;
    root->timeout_s = timeout_s;
    root->deadline = BRAID_DEADLINE_NONE;
    root->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (root->wake_fd < 0) {
        free(root);
        return braid_err(BRAID_ERR_SYSTEM, "bootstrap: eventfd failed: %s", strerror(errno));
    }
    st = braid_socket_listen(addr, reuse_addr, &root->lfd);
    if (st < 0) {
        root->lfd = -1;
        root_free(root);
        return st;
    }
    braid_sockaddr_str(addr, root->where, sizeof(root->where));
    pthread_mutex_lock(&root_lock);
    root->next = root_list;
    root_list = root;
    pthread_mutex_unlock(&root_lock);
    rc = root_thread_start(root);
    if (rc != 0) {
        root_unlist(root);
        root_free(root);
        return braid_err(BRAID_ERR_SYSTEM, "bootstrap: cannot start the root thread: %s",
                         strerror(rc));
    }
    BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap root listening on %s (nonce %016" PRIx64 ")",
               root->where, nonce);
    return BRAID_OK;
}

void braid_bootstrap_root_cancel(uint64_t nonce)
{
    uint64_t one = 1;
    pthread_mutex_lock(&root_lock);
    for (bs_root_t *root = root_list; root != NULL; root = root->next)
        if (root->nonce == nonce && write(root->wake_fd, &one, sizeof(one)) < 0)
            BRAID_INFO(BRAID_SUB_BOOTSTRAP, "bootstrap: could not wake the root: %s",
                       strerror(errno));
    pthread_mutex_unlock(&root_lock);
}
