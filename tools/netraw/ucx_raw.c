/*
 * braid-ucx-raw: UCX alone, point to point. The two processes swap worker addresses over
 * the out-of-band socket (raw_common.h) and connect endpoints to them; the client tag-sends
 * -n messages of -s bytes with -W in flight (after -w warm-ups) and the server receives
 * them (-B: both do both at once); then an 8-byte tagged ping-pong of -l round trips.
 * UCX_* variables apply as UCX reads them (UCX_TLS=tcp for the numbers in
 * docs/PERFORMANCE.md).
 */
#include <ucp/api/ucp.h>

#include "raw_common.h"

#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_PING 3
#define TAG_MASK UINT64_MAX

typedef struct raw_ucx {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h ep;
} raw_ucx_t;

static void ucx_check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK)
        raw_die(what, ucs_status_string(status));
}

static void ucx_open(raw_ucx_t *u)
{
    ucp_config_t *config;
    ucx_check(ucp_config_read(NULL, NULL, &config), "ucp_config_read");
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                            .features = UCP_FEATURE_TAG };
    ucx_check(ucp_init(&params, config, &u->context), "ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t wparams = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                    .thread_mode = UCS_THREAD_MODE_SINGLE };
    ucx_check(ucp_worker_create(u->context, &wparams, &u->worker), "ucp_worker_create");
}

/* Swap worker addresses with the peer and connect an endpoint to it. */
static void ucx_connect_peer(raw_ucx_t *u, int oob)
{
    ucp_address_t *ours;
    size_t len;
    static char theirs[65536];
    ucx_check(ucp_worker_get_address(u->worker, &ours, &len), "ucp_worker_get_address");
    raw_oob_swap(oob, ours, len, theirs, sizeof(theirs));
    ucp_worker_release_address(u->worker, ours);
    /* No peer error handling: UCX 1.13 gives an endpoint made from a worker address with it
     * a single lane, where the provider's client-server endpoints stripe large messages
     * over every device UCX_TLS allows (lo and eth0 over loopback tcp). A peer failure
     * then ends this test through UCX's own fatal error instead of a failed request. */
    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address = (const ucp_address_t *)theirs,
    };
    ucx_check(ucp_ep_create(u->worker, &params, &u->ep), "ucp_ep_create");
}

/* Wait for a request (or an immediate result) and free it. */
static void ucx_wait(raw_ucx_t *u, ucs_status_ptr_t req, const char *what)
{
    ucs_status_t status;
    if (!UCS_PTR_IS_PTR(req)) {
        ucx_check(UCS_PTR_STATUS(req), what);
        return;
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS)
        ucp_worker_progress(u->worker);
    ucp_request_free(req);
    ucx_check(status, what);
}

static ucs_status_ptr_t ucx_send(raw_ucx_t *u, const void *buf, size_t len, uint64_t tag)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    return ucp_tag_send_nbx(u->ep, buf, len, tag, &param);
}

static ucs_status_ptr_t ucx_recv(raw_ucx_t *u, void *buf, size_t len, uint64_t tag)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    return ucp_tag_recv_nbx(u->worker, buf, len, tag, TAG_MASK, &param);
}

/* `count` messages with up to `window` in flight: sends from `sbuf`, receives into
 * `window` buffers at `rbuf` (NULL: that direction is not used). */
static void ucx_stream(raw_ucx_t *u, const raw_opts_t *o, const char *sbuf, char *rbuf,
                       int count)
{
    ucs_status_ptr_t *reqs = calloc(2 * (size_t)o->window, sizeof(*reqs));
    if (reqs == NULL)
        raw_die("calloc", "out of memory");
    for (int i = 0; i < count + o->window; i++) {
        int slot = i % o->window;
        if (i >= o->window && sbuf != NULL)
            ucx_wait(u, reqs[2 * slot], "tag send");
        if (i >= o->window && rbuf != NULL)
            ucx_wait(u, reqs[2 * slot + 1], "tag receive");
        if (i < count && sbuf != NULL)
            reqs[2 * slot] = ucx_send(u, sbuf, o->size, TAG_DATA);
        if (i < count && rbuf != NULL)
            reqs[2 * slot + 1] = ucx_recv(u, rbuf + (size_t)slot * o->size, o->size, TAG_DATA);
    }
    free(reqs);
}

/* Bandwidth: the client's time ends when the server acknowledges the last message. */
static double ucx_bandwidth(raw_ucx_t *u, const raw_opts_t *o, int oob, char *sbuf, char *rbuf)
{
    int is_client = o->host != NULL;
    char ack = 0;
    ucx_stream(u, o, sbuf, rbuf, o->warmup);
    raw_oob_barrier(oob);
    double t0 = raw_now();
    ucx_stream(u, o, sbuf, rbuf, o->iters);
    if (is_client)
        ucx_wait(u, ucx_recv(u, &ack, 1, TAG_ACK), "ack receive");
    else
        ucx_wait(u, ucx_send(u, &ack, 1, TAG_ACK), "ack send");
    double t = raw_now() - t0;
    if (rbuf != NULL) {   /* the last message's pattern: the bytes arrived intact */
        size_t slot = (size_t)((o->iters - 1) % o->window);
        const unsigned char *last = (unsigned char *)rbuf + slot * o->size;
        for (size_t i = 0; i < o->size; i += 4099)
            if (last[i] != (unsigned char)(i * 7 + 1))
                raw_die("data check", "a received byte differs from the one sent");
    }
    return t;
}

static double ucx_pingpong(raw_ucx_t *u, const raw_opts_t *o, int oob)
{
    uint64_t msg = 0;
    int is_client = o->host != NULL;
    raw_oob_barrier(oob);
    double t0 = raw_now();
    for (int i = 0; i < o->lat_iters; i++) {
        if (is_client) {
            ucx_wait(u, ucx_send(u, &msg, sizeof(msg), TAG_PING), "ping send");
            ucx_wait(u, ucx_recv(u, &msg, sizeof(msg), TAG_PING), "pong receive");
        } else {
            ucx_wait(u, ucx_recv(u, &msg, sizeof(msg), TAG_PING), "ping receive");
            ucx_wait(u, ucx_send(u, &msg, sizeof(msg), TAG_PING), "pong send");
        }
    }
    return raw_now() - t0;
}

static void ucx_close(raw_ucx_t *u, int oob)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };   /* flush, then close */
    raw_oob_barrier(oob);   /* both are done: neither side's close disturbs the other */
    ucs_status_ptr_t req = ucp_ep_close_nbx(u->ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS)
            ucp_worker_progress(u->worker);
        ucp_request_free(req);
    }
    ucp_worker_destroy(u->worker);
    ucp_cleanup(u->context);
}

int main(int argc, char **argv)
{
    raw_opts_t o;
    raw_ucx_t u;
    raw_parse(argc, argv, &o);
    int sends = o.host != NULL || o.both, recvs = o.host == NULL || o.both;
    char *sbuf = sends ? malloc(o.size) : NULL;
    char *rbuf = recvs ? calloc((size_t)o.window, o.size) : NULL;
    if ((sends && sbuf == NULL) || (recvs && rbuf == NULL))
        raw_die("malloc", "out of memory for the message buffers");
    for (size_t i = 0; sends && i < o.size; i++)
        sbuf[i] = (char)(i * 7 + 1);
    ucx_open(&u);
    int oob = raw_oob_connect(&o);
    ucx_connect_peer(&u, oob);
    double bw = ucx_bandwidth(&u, &o, oob, sbuf, rbuf);
    double lat = o.lat_iters > 0 ? ucx_pingpong(&u, &o, oob) : 0;
    raw_report("UCX", &o, bw, lat);
    ucx_close(&u, oob);
    close(oob);
    free(sbuf);
    free(rbuf);
    return 0;
}
