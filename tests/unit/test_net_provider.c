/*
 * Every network provider against the contract of transports/net/net.h, in one process over
 * the machine's own interface: listen / connect / accept, messages of 0 B to 4 MiB with
 * receives posted before and after the sends and 8 in flight, several listeners with
 * several senders each, and a message longer than its receive.
 *
 * `test_net_provider` runs every provider built into this library: the socket provider
 * always, OFI and UCX where configure found them (HAVE_OFI, HAVE_UCX); one that was built
 * and cannot start fails the test (a broken libfabric or UCX must not pass). The test is
 * skipped (exit 77) only where the machine has no network interface up at all, not even
 * loopback. `test_net_provider NAME` runs one, and fails if it cannot run. It ends with the
 * providers it ran. UCX is kept on TCP (UCX_TLS=tcp unless set).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cmocka.h>

#include "base/socket.h"
#include "base/status.h"
#include "transports/net/net.h"

static const braid_net_ops_t *P;   /* the provider under test */

#define WAIT_S 30

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A sender and a receiver connected through a listener. */
typedef struct pair {
    void *send, *recv;
} pair_t;

static void *listen_on(unsigned char *handle)
{
    void *l = NULL;
    memset(handle, 0, BRAID_NET_HANDLE_MAX);
    assert_int_equal(P->listen(0, handle, &l), BRAID_OK);
    assert_non_null(l);
    return l;
}

static void *accept_one(void *l)
{
    void *rc = NULL;
    double end = now_s() + WAIT_S;
    while (rc == NULL) {
        assert_int_equal(P->accept(l, &rc), BRAID_OK);
        assert_true(now_s() < end);
    }
    return rc;
}

static void pair_open(pair_t *p, void **listen_p)
{
    unsigned char h[BRAID_NET_HANDLE_MAX];
    *listen_p = listen_on(h);
    assert_int_equal(P->connect(0, h, &p->send), BRAID_OK);
    assert_non_null(p->send);
    p->recv = accept_one(*listen_p);
}

static void pair_close(pair_t *p)
{
    P->close_send(p->send);
    P->close_recv(p->recv);
}

/* Post until the provider takes it (a NULL request means "try again"). */
static void *post(int is_send, void *comm, void *buf, size_t len, void *mh)
{
    void *req = NULL;
    double end = now_s() + WAIT_S;
    while (req == NULL) {
        braid_status_t st = is_send ? P->isend(comm, buf, len, mh, &req)
                                    : P->irecv(comm, buf, len, mh, &req);
        assert_int_equal(st, BRAID_OK);
        assert_true(now_s() < end);
    }
    return req;
}

/* Test the requests until all are done; sizes of the receives into got (may be NULL). */
static void wait_all(void **reqs, int n, size_t *got)
{
    double end = now_s() + WAIT_S;
    int left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            int done = 0;
            size_t size = 0;
            if (reqs[i] == NULL)
                continue;
            assert_int_equal(P->test(reqs[i], &done, &size), BRAID_OK);
            if (done) {
                reqs[i] = NULL;
                if (got != NULL)
                    got[i] = size;
                left--;
            }
        }
        if (now_s() > end)
            fail_msg("%d of %d requests not done after %d s", left, n, WAIT_S);
    }
}

static void fill(unsigned char *b, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)(seed * 31u + i * 7u + (i >> 11));
}

/* n messages of `len` bytes on p, receives posted first or last; contents checked. Requests
 * and registrations: sends at [i], receives at [n + i]. */
static void exchange(pair_t *p, size_t len, int n, int recv_first)
{
    unsigned char **buf = calloc(2 * (size_t)n, sizeof(*buf));
    void **req = calloc(2 * (size_t)n, sizeof(void *)), **mh = calloc(2 * (size_t)n, sizeof(void *));
    size_t *got = calloc(2 * (size_t)n, sizeof(size_t));
    assert_true(buf && req && mh && got);
    for (int i = 0; i < n; i++) {
        buf[i] = malloc(len + 1);
        buf[n + i] = calloc(1, len + 1);
        assert_true(buf[i] && buf[n + i]);
        fill(buf[i], len, (unsigned)i + 1);
        assert_int_equal(P->reg_mr(p->send, buf[i], len + 1, &mh[i]), BRAID_OK);
        assert_int_equal(P->reg_mr(p->recv, buf[n + i], len + 1, &mh[n + i]), BRAID_OK);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            if ((pass == 0) == (recv_first != 0))
                req[n + i] = post(0, p->recv, buf[n + i], len, mh[n + i]);
            else
                req[i] = post(1, p->send, buf[i], len, mh[i]);
        }
    wait_all(req, 2 * n, got);   /* drives both sides: one process holds both ends */
    for (int i = 0; i < n; i++) {
        assert_int_equal(got[n + i], len);
        assert_memory_equal(buf[n + i], buf[i], len);
        P->dereg_mr(p->send, mh[i]);
        P->dereg_mr(p->recv, mh[n + i]);
        free(buf[i]);
        free(buf[n + i]);
    }
    free(buf);
    free(req);
    free(mh);
    free(got);
}

static void test_sizes(void **state)
{
    static const size_t sizes[] = { 0, 1, 100, 4096, 1 << 20, 4 << 20 };
    pair_t p;
    void *l;
    (void)state;
    pair_open(&p, &l);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        exchange(&p, sizes[i], 1, 1);
        exchange(&p, sizes[i], 1, 0);
        exchange(&p, sizes[i], 8, i % 2);
    }
    pair_close(&p);
    P->close_listen(l);
}

/* Two listeners, two senders each: every message reaches the receiver it was sent to. */
static void test_many(void **state)
{
    pair_t p[4];
    void *l[2], *accepted[4], *reqs[8], *mh[8];
    unsigned char h[2][BRAID_NET_HANDLE_MAX];
    int idx[4], got_idx[4];
    (void)state;
    for (int i = 0; i < 2; i++)
        l[i] = listen_on(h[i]);
    for (int i = 0; i < 4; i++)
        assert_int_equal(P->connect(0, h[i / 2], &p[i].send), BRAID_OK);
    for (int i = 0; i < 4; i++)
        accepted[i] = accept_one(l[i / 2]);
    /* accepted in any order: a first message carrying the sender's index tells them apart */
    for (int i = 0; i < 4; i++) {
        idx[i] = i;
        got_idx[i] = -1;
        assert_int_equal(P->reg_mr(accepted[i], &got_idx[i], sizeof(int), &mh[4 + i]), BRAID_OK);
        reqs[4 + i] = post(0, accepted[i], &got_idx[i], sizeof(int), mh[4 + i]);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(P->reg_mr(p[i].send, &idx[i], sizeof(int), &mh[i]), BRAID_OK);
        reqs[i] = post(1, p[i].send, &idx[i], sizeof(int), mh[i]);
    }
    wait_all(reqs, 8, NULL);
    for (int i = 0; i < 4; i++) {
        assert_in_range(got_idx[i], 0, 3);
        assert_int_equal(got_idx[i] / 2, i / 2);   /* it came through the right listener */
        p[got_idx[i]].recv = accepted[i];
        P->dereg_mr(p[i].send, mh[i]);
        P->dereg_mr(accepted[i], mh[4 + i]);
    }
    for (int i = 0; i < 4; i++)
        exchange(&p[i], 1000 + (size_t)i, 4, i % 2);
    for (int i = 0; i < 4; i++)
        pair_close(&p[i]);
    P->close_listen(l[0]);
    P->close_listen(l[1]);
}

/* A message longer than its receive: an error on the receiving side naming the sizes. */
static void test_truncated(void **state)
{
    pair_t p;
    void *l, *mh_s, *mh_r, *reqs[2];
    static char big[1000], small[100];
    (void)state;
    pair_open(&p, &l);
    assert_int_equal(P->reg_mr(p.send, big, sizeof(big), &mh_s), BRAID_OK);
    assert_int_equal(P->reg_mr(p.recv, small, sizeof(small), &mh_r), BRAID_OK);
    reqs[1] = post(0, p.recv, small, sizeof(small), mh_r);
    reqs[0] = post(1, p.send, big, sizeof(big), mh_s);
    braid_status_t st = BRAID_OK;
    double end = now_s() + WAIT_S;
    while (reqs[1] != NULL && now_s() < end) {
        int done = 0;
        if (reqs[0] != NULL) {
            braid_status_t s0 = P->test(reqs[0], &done, NULL);
            reqs[0] = s0 != BRAID_OK || done ? NULL : reqs[0];
        }
        st = P->test(reqs[1], &done, NULL);
        if (st != BRAID_OK || done)
            reqs[1] = NULL;
    }
    assert_int_equal(st, BRAID_ERR_REMOTE);
    const char *e = braid_err_last();
    if (strstr(e, "1000") == NULL || strstr(e, "100") == NULL)
        fail_msg("the truncation error does not name both sizes: %s", e);
    P->dereg_mr(p.send, mh_s);
    P->dereg_mr(p.recv, mh_r);
    pair_close(&p);
    P->close_listen(l);
}

/* 0 passed, 1 failed. */
static int run_provider(const braid_net_ops_t *prov)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_truncated),
    };
    if (prov->init() != BRAID_OK) {
        printf("FAIL %s: built into this library, but it cannot start: %s\n", prov->name,
               braid_err_last());
        return 1;
    }
    printf("%s: %s\n", prov->name, prov->version());
    P = prov;
    return cmocka_run_group_tests_name(prov->name, tests, NULL, NULL) ? 1 : 0;
}

typedef struct provider {
    const braid_net_ops_t *ops;
    int built;              /* configure found its library */
    const char *lib;
} provider_t;

int main(int argc, char **argv)
{
    const provider_t all[] = {
        { &braid_net_socket, 1, "" },
#ifdef HAVE_OFI
        { &braid_net_ofi, 1, "libfabric" },
#else
        { &braid_net_ofi, 0, "libfabric" },
#endif
#ifdef HAVE_UCX
        { &braid_net_ucx, 1, "UCX" },
#else
        { &braid_net_ucx, 0, "UCX" },
#endif
    };
    char ran[64] = "", absent[64] = "";
    int failed = 0, nran = 0, named = 0;
    braid_sockaddr_t addr;
    setenv("UCX_TLS", "tcp", 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* no interface up at all, not even loopback: the machine lacks what every provider needs
     * (a NCCL_SOCKET_IFNAME that selects nothing is a setting's error, and fails below) */
    if (braid_socket_find_if(NULL, &addr, NULL) == BRAID_ERR_SYSTEM) {
        printf("SKIP: test_net_provider: %s\n", braid_err_last());
        return 77;
    }
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        const provider_t *p = &all[i];
        if (argc > 1 && strcasecmp(argv[1], p->ops->name) != 0)
            continue;
        named = 1;
        if (!p->built && argc == 1) {
            printf("%s: not built into this library (configure found no %s): not run\n",
                   p->ops->name, p->lib);
            snprintf(absent + strlen(absent), sizeof(absent) - strlen(absent), " %s",
                     p->ops->name);
            continue;
        }
        failed |= run_provider(p->ops);
        nran++;
        snprintf(ran + strlen(ran), sizeof(ran) - strlen(ran), " %s", p->ops->name);
    }
    if (argc > 1 && !named) {
        fprintf(stderr, "test_net_provider: no provider named %s\n", argv[1]);
        return 2;
    }
    printf("test_net_provider: %d provider(s) run:%s%s%s\n", nran, ran,
           absent[0] ? "; not built:" : "", absent);
    return failed || nran == 0 ? 1 : 0;
}
