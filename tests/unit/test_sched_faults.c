/*
 * Schedules, simulated (see test_sched.c): send/recv groups, and what must fail: deadlocks
 * reported with the stuck ranks, mismatched calls reported as usage errors, a pull before
 * the peer's hello reported as an internal error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/sched_harness.h"

/* ---- send / recv ---- */

static void p2p_call(braid_sim_call_t *c, int rank, int n, braid_coll_kind_t kind, int peer,
                     size_t count, uint64_t seq, void *buf)
{
    memset(c, 0, sizeof(*c));
    c->rank = rank;
    c->coll = (braid_coll_t){ .kind = kind, .dtype = BRAID_INT32, .rank = rank, .nranks = n,
                              .root = peer, .count = count };
    if (kind == BRAID_COLL_SEND)
        c->sendbuf = buf;
    else
        c->recvbuf = buf;
    /* Both sides compare what the sender sends: kind Send, no root. */
    c->hdr = (braid_msg_hdr_t){ .seq = seq, .count = count, .kind = (uint8_t)kind,
                                .dtype = BRAID_INT32, .op = 255, .root = -1 };
    c->expect = c->hdr;
    c->expect.kind = BRAID_COLL_SEND;
}

/* A group on every rank: send to r + shift, receive from r - shift (shift 0: to itself). */
static void sendrecv_shift(int n, int shift, size_t count)
{
    int32_t *sbuf[MAXR], *rbuf[MAXR];
    braid_sim_call_t calls[2 * MAXR];
    braid_sim_result_t res;
    for (int r = 0; r < n; r++) {
        sbuf[r] = malloc(count * 4 + 4);
        rbuf[r] = malloc(count * 4 + 4);
        for (size_t i = 0; i < count; i++)
            sbuf[r][i] = (int32_t)(r * 100000 + (int)i);
        /* Half the ranks post the receive first: order across connections is free. */
        int first = r & 1;
        p2p_call(&calls[2 * r + first], r, n, BRAID_COLL_SEND, (r + shift) % n, count, 1, sbuf[r]);
        p2p_call(&calls[2 * r + !first], r, n, BRAID_COLL_RECV, (r - shift + n) % n, count, 1,
                 rbuf[r]);
    }
    if (braid_sim_run(&sh_cfg_tight, n, calls, 2 * n, &res) != 0)
        fail_msg("send/recv n=%d shift=%d count=%zu: %s", n, shift, count, res.msg);
    for (int r = 0; r < n; r++) {
        int from = (r - shift + n) % n;
        for (size_t i = 0; i < count; i++)
            if (rbuf[r][i] != (int32_t)(from * 100000 + (int)i))
                fail_msg("send/recv n=%d shift=%d: rank %d element %zu is %d", n, shift, r, i,
                         rbuf[r][i]);
        free(sbuf[r]);
        free(rbuf[r]);
    }
}

static void test_sendrecv(void **state)
{
    (void)state;
    for (int n = 1; n <= MAXR; n++)
        for (int shift = 0; shift < n; shift++) {
            sendrecv_shift(n, shift, shift == 1 ? 1009 : 7);
            if (shift == 0)
                sendrecv_shift(n, shift, 0);
        }
}

/* Two messages to the same peer in one group arrive in call order. */
static void test_sendrecv_ordered(void **state)
{
    int32_t a[50], b[30], ra[50], rb[30];
    braid_sim_call_t calls[4];
    braid_sim_result_t res;
    (void)state;
    for (int i = 0; i < 50; i++)
        a[i] = i;
    for (int i = 0; i < 30; i++)
        b[i] = 1000 + i;
    p2p_call(&calls[0], 0, 2, BRAID_COLL_SEND, 1, 50, 1, a);
    p2p_call(&calls[1], 0, 2, BRAID_COLL_SEND, 1, 30, 2, b);
    p2p_call(&calls[2], 1, 2, BRAID_COLL_RECV, 0, 50, 1, ra);
    p2p_call(&calls[3], 1, 2, BRAID_COLL_RECV, 0, 30, 2, rb);
    for (int run = 0; run < 2; run++) {
        braid_sim_cfg_t cfg = sh_cfg_tight;
        cfg.exec_run = run;     /* the checking loop, then the library's braid_exec_run */
        memset(ra, 0xff, sizeof(ra));
        memset(rb, 0xff, sizeof(rb));
        if (braid_sim_run(&cfg, 2, calls, 4, &res) != 0)
            fail_msg("two sends in a group: %s", res.msg);
        assert_memory_equal(ra, a, sizeof(a));
        assert_memory_equal(rb, b, sizeof(b));
    }
}

/* ---- what must fail ---- */

static void custom_call(braid_sim_call_t *c, int rank, int n, const braid_sched_t *s, void *buf)
{
    p2p_call(c, rank, n, BRAID_COLL_SEND, 0, 0, 1, buf);
    c->recvbuf = buf;
    c->expect.kind = BRAID_COLL_SEND;
    c->sched = s;
}

/* Two ranks that only receive from each other: reported as a deadlock naming both. */
static void test_deadlock_detected(void **state)
{
    braid_sched_t s[2];
    braid_sim_call_t calls[2];
    braid_sim_result_t res;
    unsigned char buf[2][256];
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], 1 - r, -1, braid_ref_none(),
                                         braid_ref(BRAID_BUF_RECV, 0), 16, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(braid_sim_run(&sh_cfg_tight, 2, calls, 2, &res), 0);
    assert_true(res.deadlock);
    assert_non_null(strstr(res.msg, "rank 0 "));
    assert_non_null(strstr(res.msg, "rank 1 "));
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

/* Both ranks send, in a stage of its own, before receiving: fine while the message fits
 * the FIFO (2 slots), a deadlock once it needs more slots than that. */
static void head_to_head(size_t slices, int want_deadlock)
{
    braid_sched_t s[2];
    braid_sim_call_t calls[2];
    braid_sim_result_t res;
    unsigned char buf[2][256];
    size_t bytes = slices * sh_cfg_tight.slot_size;
    for (int r = 0; r < 2; r++) {
        memset(buf[r], r, sizeof(buf[r]));
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], -1, 1 - r, braid_ref(BRAID_BUF_SEND, 0),
                                         braid_ref_none(), bytes, 0), BRAID_OK);
        braid_sched_stage(&s[r]);
        assert_int_equal(braid_sched_add(&s[r], 1 - r, -1, braid_ref_none(),
                                         braid_ref(BRAID_BUF_RECV, 128), bytes, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    int rc = braid_sim_run(&sh_cfg_tight, 2, calls, 2, &res);
    assert_int_equal(rc != 0, want_deadlock);
    assert_int_equal(res.deadlock, want_deadlock);
    if (!want_deadlock)
        assert_int_equal(buf[0][128], 1);
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

static void test_deadlock_head_to_head(void **state)
{
    (void)state;
    head_to_head(2, 0);
    head_to_head(3, 1);
}

static void mismatch(const tcase_t *a, const tcase_t *b)
{
    tcase_t tcs[2] = { *a, *b };
    rbuf_t rb[2];
    braid_sim_call_t calls[2];
    braid_sim_result_t res;
    for (int r = 0; r < 2; r++) {
        sh_rbuf_setup(&tcs[r], r, &rb[r]);
        sh_tc_call(&tcs[r], r, &rb[r], &calls[r]);
    }
    assert_int_not_equal(braid_sim_run(&sh_cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_USAGE);
    assert_false(res.deadlock);
    for (int r = 0; r < 2; r++)
        sh_rbuf_free(&rb[r]);
}

/* Ranks calling different collectives, or the same with different counts: usage error. */
static void test_mismatch_usage(void **state)
{
    tcase_t ar = { .kind = BRAID_COLL_ALLREDUCE, .dt = BRAID_FP32, .n = 2, .count = 8,
                   .cfg = sh_cfg_tight };
    tcase_t bc = ar, ar10 = ar, ag = ar;
    (void)state;
    bc.kind = BRAID_COLL_BROADCAST;
    ar10.count = 10;
    ag.kind = BRAID_COLL_ALLGATHER;
    mismatch(&ar, &bc);
    mismatch(&ar, &ar10);
    mismatch(&ag, &ar);
}

/* Same headers, different lengths: also a usage error, not a hang. */
static void test_mismatch_length(void **state)
{
    braid_sched_t s[2];
    braid_sim_call_t calls[2];
    braid_sim_result_t res;
    unsigned char buf[2][64] = { { 0 } };
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_add(&s[r], r ? 0 : -1, r ? -1 : 1,
                                         r ? braid_ref_none() : braid_ref(BRAID_BUF_SEND, 0),
                                         r ? braid_ref(BRAID_BUF_RECV, 0) : braid_ref_none(),
                                         r ? 8 : 16, 0), BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(braid_sim_run(&sh_cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_USAGE);
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

/* A pull before the peer's hello arrived is a braid bug, reported as such (not a crash). */
static void test_pull_without_hello(void **state)
{
    braid_sched_t s[2];
    braid_sim_call_t calls[2];
    braid_sim_result_t res;
    unsigned char buf[2][64] = { { 0 } };
    (void)state;
    for (int r = 0; r < 2; r++) {
        braid_sched_init(&s[r], 4);
        assert_int_equal(braid_sched_pull(&s[r], 1 - r, braid_ref(BRAID_BUF_SEND, 0),
                                          braid_ref_none(), braid_ref(BRAID_BUF_RECV, 0), 16, 0),
                         BRAID_OK);
        custom_call(&calls[r], r, 2, &s[r], buf[r]);
    }
    assert_int_not_equal(braid_sim_run(&sh_cfg_tight, 2, calls, 2, &res), 0);
    assert_int_equal(res.st, BRAID_ERR_INTERNAL);
    assert_non_null(strstr(res.msg, "before its hello"));
    for (int r = 0; r < 2; r++)
        braid_sched_free(&s[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_without_hello),
        cmocka_unit_test(test_sendrecv),
        cmocka_unit_test(test_sendrecv_ordered),
        cmocka_unit_test(test_deadlock_detected),
        cmocka_unit_test(test_deadlock_head_to_head),
        cmocka_unit_test(test_mismatch_usage),
        cmocka_unit_test(test_mismatch_length),
    };
    return cmocka_run_group_tests_name("sched_faults", tests, NULL, NULL);
}
