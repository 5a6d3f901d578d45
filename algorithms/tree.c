/*
 * Tree all-reduce: NCCL's double binary tree. Two binary trees over the same ranks, each
 * carrying half of the buffer: reduce up to the root, then broadcast the root's value down.
 *
 * Tree 0 is NCCL's bit-trick tree over positions 0..n-1 (ncclGetBtree): a position's
 * lowest set bit b gives its parent (p ^ b) | 2b (or p ^ b where that is past the end) and
 * its children p - b/2 and p + b/2 (b/2 halved until inside); position 0 is the root, with
 * one child. Tree 1 is tree 0 mirrored, p -> n-1-p, when n is even, or shifted by one,
 * p -> (p + 1) mod n, when n is odd (ncclGetDtree). Tree 0's interior positions are the even
 * ones, so tree 1's are the odd ones: every position is a leaf in at least one tree (odd n:
 * all but one), and each rank forwards about one buffer half down instead of two.
 *
 *   tree 0 (n = 12)                     tree 1: p -> 11 - p
 *   0---------------8                   3----------------11
 *            ______/ \                 / \______
 *           4         \               /         7
 *         /   \        \             /        /   \
 *       2       6       10         1        5      9
 *      / \     / \     /  \       / \      / \    / \
 *     1   3   5   7   9   11     0   2    4   6  8   10
 *
 * Positions are ranks taken host by host (topo->host_ranks; the identity without a
 * topology), so that most edges of both trees stay inside a host.
 *
 * Two stages. Up (both trees): a rank receives its children's partials one by one, adding
 * the first to pre(own) in recvbuff, the second to that partial, and sends the sum to its
 * parent; the root adds, applies FINAL and keeps the value in recvbuff. Down: the root
 * sends recvbuff to its children; a rank receives into recvbuff and forwards to its first
 * child in the same step, to its second with a copy-send (a step sends once). Up and down
 * cannot share a stage: the executor runs a stage's steps slice by slice in step order, so
 * a rank would wait for slice i to come back down before adding slice i+1, a round trip
 * through the tree per slice. In place, recvbuff == sendbuff: each step reads own data and
 * writes the partial at the same offsets, and nothing reads own data after that.
 *
 * Deadlock freedom, per stage: order every wait by (slice, tree, step). A receive waits for
 * a child (up) or the parent (down) at the same position, one level nearer the leaves
 * (up) or the root (down), which in turn waits only on ranks further that way; a send
 * waits for a slot that its receiver, having reached this position, has already freed
 * (FIFOs hold >= 2 slots and each link carries at most one message per slice and tree).
 * All ranks get the same bits: each half is reduced once, at its root, and only copied.
 */
#include "algorithms/model.h"
#include "exec/sched.h"

/* NCCL's binary tree over positions 0..n-1: parent (-1 at the root) and children (-1 when
 * absent) of position p. */
static void tree_btree(int n, int p, int *up_p, int kids[2])
{
    int bit = 1;
    while (bit < n && !(bit & p))
        bit <<= 1;
    kids[0] = kids[1] = -1;
    if (p == 0) {
        *up_p = -1;
        if (n > 1)
            kids[1] = bit >> 1;
        return;
    }
    int up = (p ^ bit) | (bit << 1), low = bit >> 1;
    *up_p = up < n ? up : p ^ bit;
    if (low)
        kids[0] = p - low;
    while (low && p + low >= n)
        low >>= 1;
    if (low)
        kids[1] = p + low;
}

/* Tree t's parent and children of position p, as positions. */
static void tree_node(int n, int t, int p, int *up_p, int kids[2])
{
    int mirror = n % 2 == 0;
    if (t == 0) {
        tree_btree(n, p, up_p, kids);
        return;
    }
    tree_btree(n, mirror ? n - 1 - p : braid_mod(p - 1, n), up_p, kids);
    int *nodes[3] = { up_p, &kids[0], &kids[1] };
    for (int i = 0; i < 3; i++)
        if (*nodes[i] >= 0)
            *nodes[i] = mirror ? n - 1 - *nodes[i] : (*nodes[i] + 1) % n;
}

/* Position <-> rank: the ranks host by host. */
static int tree_rank(const braid_coll_t *c, int p)
{
    return p < 0 || c->topo == NULL ? p : c->topo->host_ranks[p];
}

static int tree_pos(const braid_coll_t *c, int r)
{
    const braid_topo_t *t = c->topo;
    return t == NULL ? r : t->host_first[t->host_of[r]] + t->local_rank[r];
}

/* This rank's place in tree t, as ranks: parent, children (first nkids of kids). */
typedef struct tree_place {
    int up, nkids, kids[2];
} tree_place_t;

static void tree_place(const braid_coll_t *c, int t, tree_place_t *pl)
{
    int up, kids[2];
    tree_node(c->nranks, t, tree_pos(c, c->rank), &up, kids);
    pl->up = tree_rank(c, up);
    pl->nkids = 0;
    for (int i = 0; i < 2; i++)
        if (kids[i] >= 0)
            pl->kids[pl->nkids++] = tree_rank(c, kids[i]);
}

/*
 * Up: add the children's partials into pre(own), pass the sum to the parent.
 *
 *   leaf       send pre(own)                              "send"
 *   one child  recv, + pre(own), send (root: FINAL, keep)  "recvReduceSend"
 *   two        recv, + pre(own) -> recvbuff;               "recvReduceCopy"
 *              recv, + recvbuff, send (root: FINAL, keep)  "recvReduceSend"
 */
static braid_status_t tree_up(braid_sched_t *s, const tree_place_t *pl, size_t off,
                              size_t bytes)
{
    braid_ref_t own = braid_ref(BRAID_BUF_SEND, off), acc = braid_ref(BRAID_BUF_RECV, off);
    int root = pl->up < 0;
    if (pl->nkids == 0)
        return braid_sched_add(s, -1, pl->up, own, root ? acc : braid_ref_none(), bytes,
                               BRAID_STEP_REDUCE | (root ? BRAID_STEP_FINAL : 0));
    for (int i = 0; i < pl->nkids; i++) {
        int last = i == pl->nkids - 1;
        uint32_t flags = BRAID_STEP_REDUCE | (i > 0 ? BRAID_STEP_ACC : 0) |
                         (last && root ? BRAID_STEP_FINAL : 0);
        BRAID_CHECK(braid_sched_add(s, pl->kids[i], last ? pl->up : -1, i > 0 ? acc : own,
                                    !last || root ? acc : braid_ref_none(), bytes, flags));
    }
    return BRAID_OK;
}

/*
 * Down: the root's value from the parent into recvbuff and on to the children.
 *
 *   root       send recvbuff to each child                 "send"
 *   other      recv -> recvbuff, send to child 0;          "recvCopySend" ("recv": leaf)
 *              send recvbuff to child 1                    "send"
 */
static braid_status_t tree_down(braid_sched_t *s, const tree_place_t *pl, size_t off,
                                size_t bytes)
{
    braid_ref_t val = braid_ref(BRAID_BUF_RECV, off);
    int first = 0;
    if (pl->up >= 0) {
        BRAID_CHECK(braid_sched_add(s, pl->up, pl->nkids > 0 ? pl->kids[0] : -1,
                                    braid_ref_none(), val, bytes, 0));
        first = 1;
    }
    for (int i = first; i < pl->nkids; i++)
        BRAID_CHECK(braid_sched_add(s, -1, pl->kids[i], val, braid_ref_none(), bytes, 0));
    return BRAID_OK;
}

static braid_status_t tree_build(const braid_coll_t *c, braid_sched_t *s)
{
    size_t es = braid_dtype_size(c->dtype), first[2], len[2];
    tree_place_t pl[2];
    if (c->kind != BRAID_COLL_ALLREDUCE)
        return BRAID_ERR_UNSUPPORTED;
    for (int t = 0; t < 2; t++) {
        braid_chunk(c->count, 2, t, &first[t], &len[t]);
        tree_place(c, t, &pl[t]);
        BRAID_CHECK(tree_up(s, &pl[t], first[t] * es, len[t] * es));
    }
    if (c->nranks == 1)
        return BRAID_OK;
    braid_sched_stage(s);
    for (int t = 0; t < 2; t++)
        BRAID_CHECK(tree_down(s, &pl[t], first[t] * es, len[t] * es));
    return BRAID_OK;
}

/* Most tree edges that leave one host in one direction, over 2: the NIC share of a stage
 * (an edge carries half the buffer, one rank sends at most one buffer per stage). */
static double tree_nic_share(const braid_coll_t *c)
{
    const braid_topo_t *t = c->topo;
    int n = c->nranks, most = 0;
    if (t == NULL || t->nhosts < 2)
        return 1.0;
    for (int h = 0; h < t->nhosts; h++) {
        int out[2] = { 0, 0 };      /* edges leaving h going up, going down */
        for (int p = t->host_first[h]; p < t->host_first[h + 1]; p++)
            for (int tr = 0; tr < 2; tr++) {
                int up, kids[2];
                tree_node(n, tr, p, &up, kids);
                out[0] += up >= 0 && t->host_of[tree_rank(c, up)] != h;
                for (int i = 0; i < 2; i++)
                    out[1] += kids[i] >= 0 && t->host_of[tree_rank(c, kids[i])] != h;
            }
        most = out[0] > most ? out[0] : most;
        most = out[1] > most ? out[1] : most;
    }
    return most > 2 ? most / 2.0 : 1.0;
}

/*
 * Two stages (up, down) of D = ceil(log2 n) levels, each moving about one buffer through a
 * rank's links (two halves, one per tree, each in slices) plus D-1 slices of fill; one
 * buffer reduced:
 *   2 * (D * (alpha + step) + (b + (D-1) * slice(b/2)) * beta * share + cuts(b/2, 2))
 *   + b * gamma
 */
static double tree_cost(const braid_coll_t *c, const braid_model_t *m)
{
    int n = c->nranks, d = braid_log2_ceil(n);    /* levels of the trees */
    double b = (double)braid_coll_bytes(c);
    braid_link_t l = braid_coll_worst(c);
    if (c->kind != BRAID_COLL_ALLREDUCE)
        return BRAID_COST_NONE;
    if (n == 1)
        return braid_model_local(m, b);
    double share = tree_nic_share(c);
    return 2 * (d * (m->alpha[l] + m->step) + b * braid_model_beta(m, l, share) +
                braid_model_fill(m, l, b / 2, d, share) + braid_model_cuts(m, l, b / 2, 2)) +
           b * m->gamma + braid_model_passes(m, c, 2 * b);
}

const braid_algo_t braid_algo_tree = {
    .name = "tree",
    .colls = (1u << BRAID_COLL_ALLREDUCE),
    .build = tree_build,
    .cost = tree_cost,
};
