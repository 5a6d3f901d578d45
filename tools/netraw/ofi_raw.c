/*
 * braid-ofi-raw: libfabric alone, point to point, as the reference the network provider is
 * measured against. One FI_EP_RDM endpoint per side, chosen as the provider chooses (a
 * real fabric, else tcp;ofi_rxm on the interface the out-of-band socket uses; FI_PROVIDER
 * honoured), addresses swapped over the out-of-band socket (raw_common.h).
 *
 *   client: -w warmup then -n timed fi_tsend of -s bytes, -W in flight    (tag RAW_TAG_BW)
 *   server: the matching fi_trecv, -W posted         (-B: both sides do both at once)
 *   then -l rounds of an 8-byte ping-pong (client sends first)            (tag RAW_TAG_LAT)
 */
#include "raw_common.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#define RAW_TAG_BW 1
#define RAW_TAG_LAT 2
#define RAW_LAT_WARMUP 100
#define RAW_NAME_MAX 256

typedef struct raw_ofi {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    fi_addr_t peer;
} raw_ofi_t;

static void raw_fi_check(int rc, const char *what)
{
    if (rc != 0)
        raw_die(what, fi_strerror(rc < 0 ? -rc : rc));
}

static int raw_prov_has(const char *prov, const char *const *names)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", prov ? prov : "");
    for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save))
        for (int i = 0; names[i] != NULL; i++)
            if (strcmp(part, names[i]) == 0)
                return 1;
    return 0;
}

static int raw_prov_is_real(const char *prov)
{
    static const char *const eth[] = { "tcp", "udp", "sockets", "shm", "sm2", "net",
                                       "ofi_rxd", "rxd", NULL };
    return !raw_prov_has(prov, eth);
}

static int raw_prov_is_shm(const char *prov)
{
    static const char *const shm[] = { "shm", "sm2", NULL };
    return raw_prov_has(prov, shm);
}

/* 1: the info's source is the IP address `local`; 0: another IP; -1: not an IP address. */
static int raw_info_on(const struct fi_info *fi, const struct sockaddr_storage *local)
{
    const struct sockaddr *sa = fi->src_addr;
    if (sa == NULL || (fi->addr_format != FI_SOCKADDR && fi->addr_format != FI_SOCKADDR_IN &&
                       fi->addr_format != FI_SOCKADDR_IN6) ||
        (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return -1;
    if (sa->sa_family != local->ss_family)
        return 0;
    if (sa->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)sa)->sin_addr,
                      &((const struct sockaddr_in *)local)->sin_addr, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
                  &((const struct sockaddr_in6 *)local)->sin6_addr, 16) == 0;
}

static struct fi_info *raw_choose(struct fi_info *list, int real_only, int allow_shm,
                                  const struct sockaddr_storage *local)
{
    struct fi_info *fallback = NULL;
    for (struct fi_info *fi = list; fi != NULL; fi = fi->next) {
        const char *prov = fi->fabric_attr->prov_name;
        int real = raw_prov_is_real(prov), on = raw_info_on(fi, local);
        if ((real_only && !real) || (!allow_shm && raw_prov_is_shm(prov)))
            continue;
        if (on == 1)
            return fi;
        if (fallback == NULL && (real || on < 0))
            fallback = fi;
    }
    return fallback;
}

static struct fi_info *raw_getinfo(const char *prov)
{
    struct fi_info *hints = fi_allocinfo(), *list = NULL;
    int rc;
    if (hints == NULL)
        raw_die("fi_allocinfo", "out of memory");
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    if (prov != NULL)
        hints->fabric_attr->prov_name = strdup(prov);
    rc = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &list);
    fi_freeinfo(hints);
    if (rc != 0 && rc != -FI_ENODATA)
        raw_die("fi_getinfo", fi_strerror(-rc));
    return list;
}

/* As the provider: FI_PROVIDER's choice, else a real fabric, else tcp;ofi_rxm; on the
 * interface of the out-of-band connection's local address. */
static struct fi_info *raw_pick(int oob_fd)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    struct fi_info *list = raw_getinfo(NULL), *tcp = NULL, *pick, *out;
    char *env = NULL;
    int has_env = fi_param_get_str(NULL, "provider", &env) == 0 && env != NULL && env[0];
    int allow_shm = has_env && env[0] != '^' && strstr(env, "shm") != NULL;
    if (getsockname(oob_fd, (struct sockaddr *)&local, &len) != 0)
        raw_die("getsockname", strerror(errno));
    pick = raw_choose(list, 1, allow_shm, &local);
    if (pick == NULL && has_env)
        pick = raw_choose(list, 0, allow_shm, &local);
    if (pick == NULL && !has_env) {
        tcp = raw_getinfo("tcp;ofi_rxm");
        pick = raw_choose(tcp, 0, 0, &local);
    }
    if (pick == NULL)
        raw_die("fi_getinfo", has_env ? "no provider FI_PROVIDER allows fits"
                                      : "no real fabric, and no tcp;ofi_rxm on the "
                                        "interface of the out-of-band connection");
    out = fi_dupinfo(pick);
    fi_freeinfo(list);
    fi_freeinfo(tcp);
    return out;
}

static void raw_open(raw_ofi_t *r, int oob_fd)
{
    struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
    struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
    char name[RAW_NAME_MAX], peer[RAW_NAME_MAX];
    size_t len = sizeof(name);
    r->info = raw_pick(oob_fd);
    if (r->info->domain_attr->av_type != FI_AV_UNSPEC)
        av_attr.type = r->info->domain_attr->av_type;
    raw_fi_check(fi_fabric(r->info->fabric_attr, &r->fabric, NULL), "fi_fabric");
    raw_fi_check(fi_domain(r->fabric, r->info, &r->domain, NULL), "fi_domain");
    raw_fi_check(fi_av_open(r->domain, &av_attr, &r->av, NULL), "fi_av_open");
    raw_fi_check(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL), "fi_cq_open");
    raw_fi_check(fi_endpoint(r->domain, r->info, &r->ep, NULL), "fi_endpoint");
    raw_fi_check(fi_ep_bind(r->ep, &r->av->fid, 0), "fi_ep_bind(av)");
    raw_fi_check(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    raw_fi_check(fi_enable(r->ep), "fi_enable");
    raw_fi_check(fi_getname(&r->ep->fid, name, &len), "fi_getname");
    raw_oob_swap(oob_fd, name, len, peer, sizeof(peer));
    if (fi_av_insert(r->av, peer, 1, &r->peer, 0, NULL) != 1)
        raw_die("fi_av_insert", "the peer's address was not inserted");
}

static void raw_close(raw_ofi_t *r)
{
    fi_close(&r->ep->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->av->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
}

/* Registration where the provider asks for it (FI_MR_LOCAL); NULL descriptor otherwise. */
static struct fid_mr *raw_reg(raw_ofi_t *r, void *buf, size_t len)
{
    struct fid_mr *mr = NULL;
    if (!(r->info->domain_attr->mr_mode & FI_MR_LOCAL))
        return NULL;
    raw_fi_check(fi_mr_reg(r->domain, buf, len, FI_SEND | FI_RECV, 0, (uint64_t)(uintptr_t)buf,
                           0, &mr, NULL), "fi_mr_reg");
    if (r->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        raw_fi_check(fi_mr_bind(mr, &r->ep->fid, 0), "fi_mr_bind");
        raw_fi_check(fi_mr_enable(mr), "fi_mr_enable");
    }
    return mr;
}

/* Read completions: each completed context is handed to `done` (may be NULL); dies on an
 * error completion. Returns how many completed. */
static int raw_poll(raw_ofi_t *r, void (*done)(void *arg, void *ctx, size_t len), void *arg)
{
    struct fi_cq_tagged_entry ent[16];
    ssize_t n = fi_cq_read(r->cq, ent, 16);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry e = { 0 };
        char buf[256];
        const char *text = "";
        if (fi_cq_readerr(r->cq, &e, 0) > 0)
            text = fi_cq_strerror(r->cq, e.prov_errno, e.err_data, buf, sizeof(buf));
        fprintf(stderr, "raw: completion error: %s (%s)\n", fi_strerror(e.err), text);
        exit(1);
    }
    if (n < 0)
        raw_die("fi_cq_read", fi_strerror((int)-n));
    for (ssize_t i = 0; i < n; i++)
        if (done != NULL)
            done(arg, ent[i].op_context, ent[i].len);
    return (int)n;
}

typedef struct raw_stream {
    raw_ofi_t *r;
    struct fi_context2 *ctx;     /* one per window slot */
    int *free_slots, nfree, window;
    size_t size;
    int sending;
    char *buf;                   /* window slots of size bytes */
    int posted, done;
} raw_stream_t;

/* A completion: its context says which stream (of the two at most) and which slot. */
static void raw_stream_done(void *arg, void *ctx, size_t len)
{
    raw_stream_t *ss = arg, *s = &ss[0];
    if ((struct fi_context2 *)ctx < s->ctx || (struct fi_context2 *)ctx >= s->ctx + s->window)
        s = &ss[1];
    int slot = (int)((struct fi_context2 *)ctx - s->ctx);
    if (!s->sending && len != s->size)
        raw_die("fi_trecv", "a message of the wrong size arrived");
    s->free_slots[s->nfree++] = slot;
    s->done++;
}

/* Post what the window allows of `count` messages on stream s. */
static void raw_stream_post(raw_stream_t *s, void *desc, int count)
{
    while (s->posted < count && s->nfree > 0) {
        int slot = s->free_slots[s->nfree - 1];
        char *p = s->buf + (size_t)slot * s->size;
        ssize_t rc = s->sending
            ? fi_tsend(s->r->ep, p, s->size, desc, s->r->peer, RAW_TAG_BW, &s->ctx[slot])
            : fi_trecv(s->r->ep, p, s->size, desc, FI_ADDR_UNSPEC, RAW_TAG_BW, 0,
                       &s->ctx[slot]);
        if (rc == -FI_EAGAIN)
            break;
        raw_fi_check((int)rc, s->sending ? "fi_tsend" : "fi_trecv");
        s->nfree--;
        s->posted++;
    }
}

/* `count` messages on each of the `n` streams (1, or 2 for both ways), the windows full;
 * seconds taken. */
static double raw_stream_run(raw_stream_t *ss, int n, void *desc, int count)
{
    double t0 = raw_now();
    for (int i = 0; i < n; i++)
        ss[i].posted = ss[i].done = 0;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < n; i++) {
            raw_stream_post(&ss[i], desc, count);
            busy |= ss[i].done < count;
        }
        if (!busy)
            break;
        raw_poll(ss[0].r, raw_stream_done, ss);
    }
    return raw_now() - t0;
}

static double raw_bandwidth(raw_ofi_t *r, const raw_opts_t *o, int oob_fd)
{
    int n = o->both ? 2 : 1;
    size_t bytes = o->size * (size_t)o->window;
    char *buf = malloc(bytes * (size_t)n);
    struct fid_mr *mr;
    raw_stream_t s[2] = {
        { .r = r, .size = o->size, .window = o->window, .sending = o->host != NULL },
        { .r = r, .size = o->size, .window = o->window, .sending = o->host == NULL },
    };
    void *desc;
    double secs;
    if (buf == NULL)
        raw_die("bandwidth buffers", "out of memory");
    memset(buf, 0x5a, bytes * (size_t)n);
    for (int i = 0; i < n; i++) {
        s[i].buf = buf + bytes * (size_t)i;
        s[i].ctx = calloc((size_t)o->window, sizeof(*s[i].ctx));
        s[i].free_slots = calloc((size_t)o->window, sizeof(int));
        if (s[i].ctx == NULL || s[i].free_slots == NULL)
            raw_die("bandwidth buffers", "out of memory");
        for (int k = 0; k < o->window; k++)
            s[i].free_slots[s[i].nfree++] = k;
    }
    mr = raw_reg(r, buf, bytes * (size_t)n);
    desc = mr ? fi_mr_desc(mr) : NULL;
    if (o->warmup > 0)
        raw_stream_run(s, n, desc, o->warmup);
    raw_oob_barrier(oob_fd);
    secs = raw_stream_run(s, n, desc, o->iters);
    raw_oob_barrier(oob_fd);
    if (mr != NULL)
        fi_close(&mr->fid);
    for (int i = 0; i < n; i++) {
        free(s[i].free_slots);
        free(s[i].ctx);
    }
    free(buf);
    return secs;
}

static void raw_wait(raw_ofi_t *r, int want)
{
    int got = 0;
    while (got < want)
        got += raw_poll(r, NULL, NULL);
}

/* One round: the client sends then receives, the server receives then answers. */
static void raw_round(raw_ofi_t *r, uint64_t *msg, void *desc, struct fi_context2 *ctx,
                      int client)
{
    ssize_t rc;
    raw_fi_check((int)fi_trecv(r->ep, &msg[1], 8, desc, FI_ADDR_UNSPEC, RAW_TAG_LAT, 0, &ctx[1]),
                 "fi_trecv");
    if (!client)
        raw_wait(r, 1);
    while ((rc = fi_tsend(r->ep, &msg[0], 8, desc, r->peer, RAW_TAG_LAT, &ctx[0])) ==
           -FI_EAGAIN)
        raw_poll(r, NULL, NULL);
    raw_fi_check((int)rc, "fi_tsend");
    raw_wait(r, client ? 2 : 1);
}

static double raw_latency(raw_ofi_t *r, const raw_opts_t *o, int oob_fd)
{
    uint64_t *msg = calloc(2, sizeof(uint64_t));
    struct fi_context2 ctx[2];
    struct fid_mr *mr;
    void *desc;
    double t0;
    if (msg == NULL)
        raw_die("latency buffers", "out of memory");
    mr = raw_reg(r, msg, 2 * sizeof(uint64_t));
    desc = mr ? fi_mr_desc(mr) : NULL;
    for (int i = 0; i < RAW_LAT_WARMUP; i++)
        raw_round(r, msg, desc, ctx, !!o->host);
    raw_oob_barrier(oob_fd);
    t0 = raw_now();
    for (int i = 0; i < o->lat_iters; i++)
        raw_round(r, msg, desc, ctx, !!o->host);
    t0 = raw_now() - t0;
    raw_oob_barrier(oob_fd);
    if (mr != NULL)
        fi_close(&mr->fid);
    free(msg);
    return t0;
}

int main(int argc, char **argv)
{
    raw_opts_t o;
    raw_ofi_t r = { 0 };
    char lib[160];
    double bw, lat = 0;
    int fd;
    raw_parse(argc, argv, &o);
    fd = raw_oob_connect(&o);
    raw_open(&r, fd);
    snprintf(lib, sizeof(lib), "libfabric %s", r.info->fabric_attr->prov_name);
    fprintf(stderr, "%s: domain %s, fabric %s\n", lib, r.info->domain_attr->name,
            r.info->fabric_attr->name);
    bw = raw_bandwidth(&r, &o, fd);
    if (o.lat_iters > 0)
        lat = raw_latency(&r, &o, fd);
    raw_report(lib, &o, bw, lat);
    raw_close(&r);
    close(fd);
    return 0;
}
