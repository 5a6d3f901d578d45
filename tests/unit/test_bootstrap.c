/*
 * Bootstrap (src/core/bootstrap*.c, socket.c, topo/host.c): unique ids, ranks as threads
 * joining one id, all-gather and barrier, split children, concurrent jobs, refusals, a
 * missing rank, NCCL_COMM_ID, abort from another thread, and real processes where one dies.
 * Everything runs on loopback (BRAID_SOCKET_IFNAME=lo).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/status.h"
#include "topo/host.h"

#define MAX_RANKS 8
#define INFO_LEN 24

static void env_set(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
    braid_param_reload();
}

static double now_s(void)
{
    return (double)braid_time_ns() / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- ranks as threads ---- */

typedef struct rank_arg rank_arg_t;
struct rank_arg {
    braid_uid_t uid;
    int rank, nranks;
    int job;                           /* test-defined */
    braid_status_t st;                 /* of init */
    braid_bootstrap_t *bs;
    double elapsed;                    /* seconds spent in init */
    int bad_line;                      /* first failed check in the body, 0 if none */
    void (*body)(rank_arg_t *a);       /* runs after a successful init */
    int keep;                          /* do not destroy bs after the body */
    void *shared;                      /* test-defined */
};

/* Checks inside rank threads: cmocka asserts belong to the main thread. */
#define CHECK_T(_a, _cond)                                                                 \
    do {                                                                                   \
        if (!(_cond)) {                                                                    \
            if ((_a)->bad_line == 0)                                                       \
                (_a)->bad_line = __LINE__;                                                 \
            return;                                                                        \
        }                                                                                  \
    } while (0)

static void info_fill(uint8_t *info, int job, int rank)
{
    for (int i = 0; i < INFO_LEN; i++)
        info[i] = (uint8_t)(job * 31 + rank * 7 + i);
}

static void *rank_main(void *p)
{
    rank_arg_t *a = p;
    uint8_t info[INFO_LEN];
    double t0 = now_s();
    info_fill(info, a->job, a->rank);
    a->st = braid_bootstrap_init(&a->uid, a->rank, a->nranks, info, sizeof(info), &a->bs);
    a->elapsed = now_s() - t0;
    if (a->st == BRAID_OK && a->body != NULL)
        a->body(a);
    if (a->st == BRAID_OK && !a->keep) {
        braid_bootstrap_destroy(a->bs);
        a->bs = NULL;
    }
    return NULL;
}

static void ranks_run(rank_arg_t *a, int n)
{
    pthread_t tid[2 * MAX_RANKS];
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, rank_main, &a[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
}

static void ranks_setup(rank_arg_t *a, const braid_uid_t *uid, int nranks, int job,
                        void (*body)(rank_arg_t *))
{
    for (int r = 0; r < nranks; r++) {
        memset(&a[r], 0, sizeof(a[r]));
        a[r].uid = *uid;
        a[r].rank = r;
        a[r].nranks = nranks;
        a[r].job = job;
        a[r].body = body;
    }
}

static void ranks_assert_ok(const rank_arg_t *a, int n)
{
    for (int r = 0; r < n; r++) {
        if (a[r].st != BRAID_OK || a[r].bad_line != 0)
            print_error("rank %d: init status %d, failed check at line %d\n", a[r].rank,
                        a[r].st, a[r].bad_line);
        assert_int_equal(a[r].st, BRAID_OK);
        assert_int_equal(a[r].bad_line, 0);
    }
}

/* ---- bodies ---- */

/* Infos, a small and a large all-gather, a barrier. */
static void body_allgather(rank_arg_t *a)
{
    int n = a->nranks;
    size_t big = n > 4 ? 64 * 1024 : 512 * 1024;   /* more than socket buffers hold */
    uint32_t mine[5], all[MAX_RANKS * 5];
    uint8_t expect[INFO_LEN], *bmine, *ball;

    CHECK_T(a, braid_bootstrap_rank(a->bs) == a->rank && braid_bootstrap_nranks(a->bs) == n);
    for (int r = 0; r < n; r++) {
        info_fill(expect, a->job, r);
        CHECK_T(a, memcmp(braid_bootstrap_info(a->bs, r), expect, INFO_LEN) == 0);
        CHECK_T(a, braid_bootstrap_host_id(a->bs, r) == braid_host_id());
    }
    for (int i = 0; i < 5; i++)
        mine[i] = (uint32_t)(a->job * 1000000 + a->rank * 100 + i);
    CHECK_T(a, braid_bootstrap_allgather(a->bs, mine, all, sizeof(mine)) == BRAID_OK);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 5; i++)
            CHECK_T(a, all[r * 5 + i] == (uint32_t)(a->job * 1000000 + r * 100 + i));
    bmine = malloc(big);
    ball = malloc(big * (size_t)n);
    CHECK_T(a, bmine != NULL && ball != NULL);
    for (size_t i = 0; i < big; i++)
        bmine[i] = (uint8_t)(a->rank * 13 + i * 7);
    CHECK_T(a, braid_bootstrap_allgather(a->bs, bmine, ball, big) == BRAID_OK);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < big; i += 997)
            CHECK_T(a, ball[(size_t)r * big + i] == (uint8_t)(r * 13 + i * 7));
    free(bmine);
    free(ball);
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
}

/* ---- tests: ids, parsing ---- */

static void test_uid(void **state)
{
    braid_uid_t uid, bad;
    (void)state;
    assert_true(sizeof(braid_uid_t) <= 128);
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    assert_int_equal(braid_bootstrap_check_uid(&uid), BRAID_OK);
    assert_int_equal(uid.flags, 0);
    bad = uid;
    bad.magic ^= 1;
    assert_int_equal(braid_bootstrap_check_uid(&bad), BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "magic"));
    bad = uid;
    bad.version = 99;
    assert_int_equal(braid_bootstrap_check_uid(&bad), BRAID_ERR_INVALID);
    bad = uid;
    memset(bad.addr, 0, sizeof(bad.addr));
    assert_int_equal(braid_bootstrap_check_uid(&bad), BRAID_ERR_INVALID);
    assert_int_equal(braid_bootstrap_check_uid(NULL), BRAID_ERR_INVALID);
    braid_bootstrap_t *bs = NULL;
    bad = uid;
    bad.magic = 0;
    assert_int_equal(braid_bootstrap_init(&bad, 0, 2, NULL, 0, &bs), BRAID_ERR_INVALID);
    assert_int_equal(braid_bootstrap_init(&uid, 2, 2, NULL, 0, &bs), BRAID_ERR_INVALID);
    assert_null(bs);
}

static void test_if_match(void **state)
{
    (void)state;
    assert_true(braid_socket_if_match("eth", "eth0"));
    assert_false(braid_socket_if_match("eth", "ib0"));
    assert_true(braid_socket_if_match("ib,eth", "eth1"));
    assert_false(braid_socket_if_match("^docker,lo", "docker0"));
    assert_false(braid_socket_if_match("^docker,lo", "lo"));
    assert_true(braid_socket_if_match("^docker,lo", "eth0"));
    assert_true(braid_socket_if_match("=eth0", "eth0"));
    assert_false(braid_socket_if_match("=eth0", "eth01"));
    assert_false(braid_socket_if_match("^=lo", "lo"));
    assert_true(braid_socket_if_match("^=lo", "lo0"));
}

static void test_parse_addr(void **state)
{
    braid_sockaddr_t a;
    char s[BRAID_SOCKADDR_STRLEN];
    (void)state;
    assert_int_equal(braid_socket_parse_addr("127.0.0.1:1234", &a), BRAID_OK);
    assert_string_equal(braid_sockaddr_str(&a, s, sizeof(s)), "127.0.0.1:1234");
    assert_int_equal(braid_socket_parse_addr("[::1]:80", &a), BRAID_OK);
    assert_string_equal(braid_sockaddr_str(&a, s, sizeof(s)), "[::1]:80");
    assert_int_equal(braid_socket_parse_addr("::1:81", &a), BRAID_OK);
    assert_string_equal(braid_sockaddr_str(&a, s, sizeof(s)), "[::1]:81");
    assert_int_equal(braid_socket_parse_addr("localhost:5000", &a), BRAID_OK);
    assert_int_equal(braid_socket_parse_addr("nocolon", &a), BRAID_ERR_INVALID);
    assert_int_equal(braid_socket_parse_addr("1.2.3.4:0", &a), BRAID_ERR_INVALID);
    assert_int_equal(braid_socket_parse_addr("1.2.3.4:99999", &a), BRAID_ERR_INVALID);
    assert_int_equal(braid_socket_parse_addr("[::1]80", &a), BRAID_ERR_INVALID);
}

static void test_find_if(void **state)
{
    braid_sockaddr_t a;
    char name[IF_NAMESIZE];
    (void)state;
    assert_int_equal(braid_socket_find_if(NULL, &a, name), BRAID_OK);
    assert_string_equal(name, "lo");
    assert_int_equal(a.sa.sa_family, AF_INET);
    env_set("BRAID_SOCKET_FAMILY", "AF_INET6");
    if (braid_socket_find_if(NULL, &a, name) == BRAID_OK)   /* where lo has ::1 */
        assert_int_equal(a.sa.sa_family, AF_INET6);
    env_set("BRAID_SOCKET_FAMILY", "AF_BOGUS");
    assert_int_equal(braid_socket_find_if(NULL, &a, name), BRAID_ERR_INVALID);
    env_set("BRAID_SOCKET_FAMILY", NULL);
    env_set("BRAID_SOCKET_IFNAME", "nosuchif9");
    assert_int_equal(braid_socket_find_if(NULL, &a, name), BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "nosuchif9"));
    env_set("BRAID_SOCKET_IFNAME", "^lo");         /* anything else, or an error naming it */
    if (braid_socket_find_if(NULL, &a, name) == BRAID_OK)
        assert_string_not_equal(name, "lo");
    env_set("BRAID_SOCKET_IFNAME", NULL);
    assert_int_equal(braid_socket_find_if(NULL, &a, name), BRAID_OK);   /* default order */
    env_set("BRAID_SOCKET_IFNAME", "lo");
}

static void test_host(void **state)
{
    uint64_t id = braid_host_id();
    (void)state;
    assert_true(id != 0);
    assert_true(braid_host_id() == id);
    assert_true(strlen(braid_host_name()) > 0);
    env_set("BRAID_HOSTID", "fake-host-1");
    assert_true(braid_host_id() != id);
    assert_true(braid_host_id() == braid_host_fnv1a(BRAID_FNV1A_INIT, "fake-host-1", 11));
    env_set("BRAID_HOSTID", NULL);
    assert_true(braid_host_id() == id);
}

/* ---- tests: joining ---- */

static void join_n(int n)
{
    rank_arg_t a[MAX_RANKS];
    braid_uid_t uid;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, n, n, body_allgather);
    ranks_run(a, n);
    ranks_assert_ok(a, n);
}

static void test_join_1(void **state)
{
    (void)state;
    join_n(1);
}

static void test_join_2(void **state)
{
    (void)state;
    join_n(2);
}

static void test_join_3(void **state)
{
    (void)state;
    join_n(3);
}

static void test_join_8(void **state)
{
    (void)state;
    join_n(8);
}

/* Over ::1 where loopback has IPv6 (skipped, and said so, where it has not). */
static void test_join_ipv6(void **state)
{
    braid_sockaddr_t addr;
    (void)state;
    env_set("BRAID_SOCKET_FAMILY", "AF_INET6");
    if (braid_socket_find_if(NULL, &addr, NULL) != BRAID_OK) {
        env_set("BRAID_SOCKET_FAMILY", NULL);
        skip();
    }
    join_n(3);
    env_set("BRAID_SOCKET_FAMILY", NULL);
}

/* Odd and even ranks each form a child; then all ranks in reverse order. */
static void body_split(rank_arg_t *a)
{
    int n = a->nranks, half = (n + 1 - a->rank % 2) / 2, crank = a->rank / 2;
    int members[MAX_RANKS], rev[MAX_RANKS], got[MAX_RANKS], me;
    braid_bootstrap_t *child, *whole;

    for (int i = 0; i < half; i++)
        members[i] = 2 * i + a->rank % 2;
    CHECK_T(a, braid_bootstrap_split(a->bs, crank, half, members, 100 + (uint64_t)(a->rank % 2),
                                     &child) == BRAID_OK);
    CHECK_T(a, braid_bootstrap_nonce(child) != braid_bootstrap_nonce(a->bs));
    CHECK_T(a, braid_bootstrap_rank(child) == crank && braid_bootstrap_nranks(child) == half);
    for (int i = 0; i < half; i++)
        CHECK_T(a, memcmp(braid_bootstrap_info(child, i),
                          braid_bootstrap_info(a->bs, members[i]), INFO_LEN) == 0);
    me = a->rank * 10;
    CHECK_T(a, braid_bootstrap_allgather(child, &me, got, sizeof(me)) == BRAID_OK);
    for (int i = 0; i < half; i++)
        CHECK_T(a, got[i] == members[i] * 10);
    for (int i = 0; i < n; i++)
        rev[i] = n - 1 - i;
    CHECK_T(a, braid_bootstrap_split(a->bs, n - 1 - a->rank, n, rev, 7, &whole) == BRAID_OK);
    CHECK_T(a, braid_bootstrap_allgather(whole, &me, got, sizeof(me)) == BRAID_OK);
    for (int i = 0; i < n; i++)
        CHECK_T(a, got[i] == (n - 1 - i) * 10);
    braid_bootstrap_destroy(child);              /* children first here */
    CHECK_T(a, braid_bootstrap_barrier(whole) == BRAID_OK);
    braid_bootstrap_destroy(whole);
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
}

static void test_split(void **state)
{
    rank_arg_t a[6];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 6, 1, body_split);
    ranks_run(a, 6);
    ranks_assert_ok(a, 6);
}

/* A child (and its child) keep working after the parent is destroyed. */
static void body_orphan(rank_arg_t *a)
{
    int n = a->nranks, members[MAX_RANKS], got[MAX_RANKS], me = a->rank + 1;
    braid_bootstrap_t *child, *grandchild;
    for (int i = 0; i < n; i++)
        members[i] = i;
    CHECK_T(a, braid_bootstrap_split(a->bs, a->rank, n, members, 9, &child) == BRAID_OK);
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
    braid_bootstrap_destroy(a->bs);
    a->bs = NULL;
    a->keep = 1;
    CHECK_T(a, braid_bootstrap_allgather(child, &me, got, sizeof(me)) == BRAID_OK);
    for (int i = 0; i < n; i++)
        CHECK_T(a, got[i] == i + 1);
    if (a->rank < 2) {                            /* ranks 0 and 1 make a grandchild */
        int pair[2] = { 0, 1 };
        CHECK_T(a, braid_bootstrap_split(child, a->rank, 2, pair, 3, &grandchild) == BRAID_OK);
        braid_bootstrap_destroy(child);
        child = NULL;
        CHECK_T(a, braid_bootstrap_allgather(grandchild, &me, got, sizeof(me)) == BRAID_OK);
        CHECK_T(a, got[0] == 1 && got[1] == 2);
        braid_bootstrap_destroy(grandchild);
    }
    braid_bootstrap_destroy(child);
}

static void test_child_outlives_parent(void **state)
{
    rank_arg_t a[4];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 4, 2, body_orphan);
    ranks_run(a, 4);
    ranks_assert_ok(a, 4);
}

/* Two children of one rank joined at once from two threads: one listener serves both. */
typedef struct child_arg {
    braid_bootstrap_t *bs;
    int value, nranks, ok;
} child_arg_t;

static void *child_main(void *p)
{
    child_arg_t *c = p;
    int got[MAX_RANKS];
    c->ok = braid_bootstrap_join(c->bs) == BRAID_OK &&
            braid_bootstrap_allgather(c->bs, &c->value, got, sizeof(int)) == BRAID_OK;
    for (int i = 0; c->ok && i < c->nranks; i++)
        c->ok = got[i] == c->value - braid_bootstrap_rank(c->bs) + i;
    return NULL;
}

static void body_concurrent_children(rank_arg_t *a)
{
    int n = a->nranks, fwd[MAX_RANKS], rev[MAX_RANKS];
    child_arg_t c[2] = { { .nranks = n }, { .nranks = n } };
    pthread_t tid[2];
    for (int i = 0; i < n; i++) {
        fwd[i] = i;
        rev[i] = n - 1 - i;
    }
    CHECK_T(a, braid_bootstrap_split_create(a->bs, a->rank, n, fwd, 1, &c[0].bs) == BRAID_OK);
    CHECK_T(a, braid_bootstrap_split_create(a->bs, n - 1 - a->rank, n, rev, 2, &c[1].bs) ==
               BRAID_OK);
    c[0].value = 100 + a->rank;
    c[1].value = 200 + n - 1 - a->rank;
    /* even ranks start the second child first, so connections arrive out of order */
    for (int k = 0; k < 2; k++)
        CHECK_T(a, pthread_create(&tid[k], NULL, child_main, &c[(k + a->rank) % 2]) == 0);
    for (int k = 0; k < 2; k++)
        pthread_join(tid[k], NULL);
    CHECK_T(a, c[0].ok && c[1].ok);
    braid_bootstrap_destroy(c[0].bs);
    braid_bootstrap_destroy(c[1].bs);
}

static void test_concurrent_children(void **state)
{
    rank_arg_t a[3];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 3, 4, body_concurrent_children);
    ranks_run(a, 3);
    ranks_assert_ok(a, 3);
}

static void test_two_jobs(void **state)
{
    rank_arg_t a[8];
    braid_uid_t uid1, uid2;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid1), BRAID_OK);
    assert_int_equal(braid_bootstrap_get_uid(&uid2), BRAID_OK);
    assert_true(uid1.nonce != uid2.nonce);
    ranks_setup(a, &uid1, 4, 11, body_allgather);
    ranks_setup(a + 4, &uid2, 4, 12, body_allgather);
    ranks_run(a, 8);
    ranks_assert_ok(a, 8);
}

static void test_wrong_nonce(void **state)
{
    rank_arg_t a[2], stray[2];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(stray, &uid, 2, 0, NULL);
    stray[0].uid.nonce ^= 0x5555;
    rank_main(&stray[0]);
    assert_int_equal(stray[0].st, BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "another job"));
    assert_true(stray[0].elapsed < 2.0);
    ranks_setup(a, &uid, 2, 3, body_allgather);  /* the root still serves the real ranks */
    ranks_run(a, 2);
    ranks_assert_ok(a, 2);
}

static void test_rank_twice(void **state)
{
    rank_arg_t a[3];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 3, 0, NULL);
    a[1].rank = 0;
    ranks_run(a, 2);
    assert_int_equal(a[0].st, BRAID_ERR_INVALID);
    assert_int_equal(a[1].st, BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "joined twice"));
}

static void test_nranks_mismatch(void **state)
{
    rank_arg_t a[3];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 3, 0, NULL);
    a[1].nranks = 4;
    ranks_run(a, 2);
    assert_int_equal(a[0].st, BRAID_ERR_INVALID);
    assert_int_equal(a[1].st, BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "nranks"));
}

static void missing(int n, const int *skip, int nskip, const char *expect)
{
    rank_arg_t a[MAX_RANKS], run[MAX_RANKS];
    braid_uid_t uid;
    int k = 0;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, n, 0, NULL);
    for (int r = 0; r < n; r++) {
        int skipped = 0;
        for (int j = 0; j < nskip; j++)
            skipped |= skip[j] == r;
        if (!skipped)
            run[k++] = a[r];
    }
    ranks_run(run, k);
    for (int i = 0; i < k; i++) {
        assert_int_equal(run[i].st, BRAID_ERR_TIMEOUT);
        assert_true(run[i].elapsed >= 1.5 && run[i].elapsed < 6.0);
    }
    if (strstr(braid_err_last(), expect) == NULL)
        print_error("error '%s' does not name '%s'\n", braid_err_last(), expect);
    assert_non_null(strstr(braid_err_last(), expect));
}

static void test_missing_rank(void **state)
{
    static const int skip1[] = { 2 }, skip2[] = { 3, 5 };
    (void)state;
    env_set("BRAID_BOOTSTRAP_TIMEOUT", "2");
    missing(4, skip1, 1, "rank 2 of 4 did not join within 2 s");
    missing(8, skip2, 2, "ranks 3,5 of 8 did not join");
    env_set("BRAID_BOOTSTRAP_TIMEOUT", "30");
}

/* Rank 2 leaves (closes its sockets) while the others all-gather blocks larger than the
 * socket buffers: each of them reports rank 2, not its own neighbour. */
static void body_leaver(rank_arg_t *a)
{
    size_t big = 4u << 20;
    uint8_t *mine, *all;
    braid_status_t st;
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
    if (a->rank == 2)
        return;
    mine = calloc(1, big);
    all = malloc(big * (size_t)a->nranks);
    CHECK_T(a, mine != NULL && all != NULL);
    st = braid_bootstrap_allgather(a->bs, mine, all, big);
    free(mine);
    free(all);
    CHECK_T(a, st == BRAID_ERR_REMOTE);
    CHECK_T(a, strstr(braid_err_last(), "rank 2 (host") != NULL);
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_ERR_REMOTE);   /* stays failed */
}

static void test_peer_leaves(void **state)
{
    rank_arg_t a[4];
    braid_uid_t uid;
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 4, 5, body_leaver);
    ranks_run(a, 4);
    ranks_assert_ok(a, 4);
}

/*
 * A split where one member failed the parent's exchange before it (rank 2 says so on the
 * parent's ring, as a rank that saw a death there does) and never joins the child: the
 * members waiting for it learn why from the parent within a second, not at the timeout.
 */
static void body_split_watch(rank_arg_t *a)
{
    int members[3] = { 0, 1, 2 };
    atomic_int *done = a->shared;
    braid_bootstrap_t *child = NULL;
    CHECK_T(a, braid_bootstrap_barrier(a->bs) == BRAID_OK);
    if (a->rank == 2) {
        braid_bootstrap_setup_failed(a->bs, 2, BRAID_ERR_REMOTE);
        for (int i = 0; i < 3000 && atomic_load(done) < 2; i++)
            sleep_ms(10);   /* its links stay open: the others read the notice, not a close */
        return;
    }
    double t0 = now_s();
    CHECK_T(a, braid_bootstrap_split_create(a->bs, a->rank, 3, members, 11, &child) == BRAID_OK);
    braid_bootstrap_watch_parent(child, a->bs);
    braid_status_t st = braid_bootstrap_join(child);
    if (st == BRAID_OK) {   /* rank 1: rank 0's link came; rank 0's notice ends its barrier */
        for (int i = 0; i < 1000 && atomic_load(done) < 1; i++)
            sleep_ms(10);   /* the last error is the process's: rank 0 has read its own */
        st = braid_bootstrap_barrier(child);
    }
    char why[512];
    snprintf(why, sizeof(why), "%s", braid_err_last());
    braid_bootstrap_destroy(child);
    atomic_fetch_add(done, 1);
    /* rank 0 names rank 2; rank 1 too, or rank 0 (from the child's notice) where rank 0's
     * link came before it read the parent */
    int named = strstr(why, "rank 2 (host") != NULL ||
                (a->rank == 1 && strstr(why, "rank 0 (host") != NULL);
    if (st != BRAID_ERR_REMOTE || !named)
        print_error("rank %d: status %d: %s\n", a->rank, st, why);
    CHECK_T(a, st == BRAID_ERR_REMOTE && named);
    CHECK_T(a, now_s() - t0 < 5.0);
}

static void test_split_watch(void **state)
{
    rank_arg_t a[3];
    braid_uid_t uid;
    atomic_int done = 0;
    (void)state;
    env_set("BRAID_BOOTSTRAP_TIMEOUT", "20");
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 3, 12, body_split_watch);
    for (int r = 0; r < 3; r++)
        a[r].shared = &done;
    ranks_run(a, 3);
    ranks_assert_ok(a, 3);
    env_set("BRAID_BOOTSTRAP_TIMEOUT", "30");
}

/* A port nobody listens on (closed at once; the race with other programs is harmless). */
static int free_port(void)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    port = ntohs(sin.sin_port);
    close(fd);
    return port;
}

static void test_comm_id(void **state)
{
    rank_arg_t a[3];
    braid_uid_t uid, uid2;
    char text[64];
    (void)state;
    snprintf(text, sizeof(text), "127.0.0.1:%d", free_port());
    env_set("BRAID_COMM_ID", text);
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    assert_int_equal(braid_bootstrap_get_uid(&uid2), BRAID_OK);
    assert_int_equal(uid.flags, BRAID_UID_ROOT_AT_RANK0);
    assert_memory_equal(&uid, &uid2, sizeof(uid));   /* every rank may make its own */
    for (int round = 0; round < 3; round++) {        /* the port is reused job after job */
        ranks_setup(a, &uid, 3, 20 + round, body_allgather);
        ranks_run(a, 3);
        ranks_assert_ok(a, 3);
    }
    env_set("BRAID_COMM_ID", "::1:notaport");
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_ERR_INVALID);
    env_set("BRAID_COMM_ID", NULL);
}

/* ---- abort ---- */

typedef struct abort_arg {
    braid_bootstrap_t *bs;
    int join;                      /* 1: join, 0: barrier */
    braid_status_t st;
    double elapsed;
} abort_arg_t;

static void *abort_waiter(void *p)
{
    abort_arg_t *w = p;
    double t0 = now_s();
    w->st = w->join ? braid_bootstrap_join(w->bs) : braid_bootstrap_barrier(w->bs);
    w->elapsed = now_s() - t0;
    return NULL;
}

static void abort_while_waiting(abort_arg_t *w)
{
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, abort_waiter, w), 0);
    sleep_ms(300);
    braid_bootstrap_abort(w->bs);
    pthread_join(tid, NULL);
    assert_int_equal(w->st, BRAID_ERR_ABORTED);
    assert_true(w->elapsed < 2.0);
}

static void test_abort_barrier(void **state)
{
    rank_arg_t a[2];
    braid_uid_t uid;
    abort_arg_t w = { 0 };
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    ranks_setup(a, &uid, 2, 0, NULL);
    a[0].keep = a[1].keep = 1;
    ranks_run(a, 2);
    ranks_assert_ok(a, 2);
    w.bs = a[0].bs;                 /* rank 1 never enters the barrier */
    abort_while_waiting(&w);
    assert_int_equal(braid_bootstrap_barrier(a[0].bs), BRAID_ERR_ABORTED);
    assert_int_equal(braid_bootstrap_barrier(a[1].bs), BRAID_ERR_REMOTE);  /* told by rank 0 */
    assert_non_null(strstr(braid_err_last(), "aborted"));
    braid_bootstrap_destroy(a[0].bs);
    braid_bootstrap_destroy(a[1].bs);
}

static void test_abort_join(void **state)
{
    braid_uid_t uid;
    abort_arg_t w = { .join = 1 };
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);
    assert_int_equal(braid_bootstrap_create(&uid, 0, 2, NULL, 0, &w.bs), BRAID_OK);
    abort_while_waiting(&w);          /* rank 1 never comes */
    braid_bootstrap_destroy(w.bs);
}

/* ---- real processes ---- */

#define FORK_N 4
#define FORK_VICTIM 2

typedef struct fork_msg {
    int rank, phase;               /* 0: after allgather, 1: after barrier */
    int st;
    double elapsed;
    int pids[FORK_N];
    char err[1024];
} fork_msg_t;

static void fork_child(const braid_uid_t *uid, int rank, int wfd, int gofd)
{
    fork_msg_t m = { .rank = rank };
    braid_bootstrap_t *bs;
    int pid = getpid();
    char go;
    double t0;
    m.st = braid_bootstrap_init(uid, rank, FORK_N, &pid, sizeof(pid), &bs);
    if (m.st == BRAID_OK)
        m.st = braid_bootstrap_allgather(bs, &pid, m.pids, sizeof(pid));
    if (write(wfd, &m, sizeof(m)) != sizeof(m) || m.st != BRAID_OK)
        _exit(1);
    if (rank == FORK_VICTIM)
        pause();                   /* the parent kills it */
    if (read(gofd, &go, 1) != 1)
        _exit(1);
    t0 = now_s();
    m.phase = 1;
    m.st = braid_bootstrap_barrier(bs);
    m.elapsed = now_s() - t0;
    snprintf(m.err, sizeof(m.err), "%s", braid_err_last());
    if (write(wfd, &m, sizeof(m)) != sizeof(m))
        _exit(1);
    braid_bootstrap_destroy(bs);
    _exit(0);
}

static void test_processes(void **state)
{
    int up[2], go[2], pids[FORK_N];
    braid_uid_t uid;
    fork_msg_t m;
    char victim[64];
    (void)state;
    assert_int_equal(braid_bootstrap_get_uid(&uid), BRAID_OK);   /* root thread stays here */
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(go), 0);
    for (int r = 0; r < FORK_N; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            close(up[0]);
            close(go[1]);
            fork_child(&uid, r, up[1], go[0]);
        }
    }
    close(up[1]);
    close(go[0]);
    for (int i = 0; i < FORK_N; i++) {
        assert_int_equal(read(up[0], &m, sizeof(m)), sizeof(m));
        assert_int_equal(m.phase, 0);
        assert_int_equal(m.st, BRAID_OK);
        assert_memory_equal(m.pids, pids, sizeof(pids));
    }
    kill(pids[FORK_VICTIM], SIGKILL);
    waitpid(pids[FORK_VICTIM], NULL, 0);
    assert_int_equal(write(go[1], "xxx", FORK_N - 1), FORK_N - 1);
    snprintf(victim, sizeof(victim), "rank %d (host %s, pid %d)", FORK_VICTIM,
             braid_host_name(), pids[FORK_VICTIM]);
    for (int i = 0; i < FORK_N - 1; i++) {
        assert_int_equal(read(up[0], &m, sizeof(m)), sizeof(m));
        if (strstr(m.err, victim) == NULL)
            print_error("rank %d: '%s' does not name '%s'\n", m.rank, m.err, victim);
        assert_int_equal(m.phase, 1);
        assert_int_equal(m.st, BRAID_ERR_REMOTE);
        assert_non_null(strstr(m.err, victim));
        assert_true(m.elapsed < 3.0);
    }
    for (int r = 0; r < FORK_N; r++) {
        int status = 0;
        if (r != FORK_VICTIM) {
            waitpid(pids[r], &status, 0);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    close(up[0]);
    close(go[1]);
}

static int group_setup(void **state)
{
    (void)state;
    env_set("BRAID_SOCKET_IFNAME", "lo");
    env_set("BRAID_BOOTSTRAP_TIMEOUT", "30");
    env_set("BRAID_COMM_ID", NULL);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_processes),   /* first: fork while few threads exist */
        cmocka_unit_test(test_uid),
        cmocka_unit_test(test_if_match),
        cmocka_unit_test(test_parse_addr),
        cmocka_unit_test(test_find_if),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_join_1),
        cmocka_unit_test(test_join_2),
        cmocka_unit_test(test_join_3),
        cmocka_unit_test(test_join_8),
        cmocka_unit_test(test_join_ipv6),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_child_outlives_parent),
        cmocka_unit_test(test_concurrent_children),
        cmocka_unit_test(test_two_jobs),
        cmocka_unit_test(test_wrong_nonce),
        cmocka_unit_test(test_rank_twice),
        cmocka_unit_test(test_nranks_mismatch),
        cmocka_unit_test(test_missing_rank),
        cmocka_unit_test(test_peer_leaves),
        cmocka_unit_test(test_split_watch),
        cmocka_unit_test(test_comm_id),
        cmocka_unit_test(test_abort_barrier),
        cmocka_unit_test(test_abort_join),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
