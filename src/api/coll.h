/*
 * The argument checks the collective entry points share (src/api/coll.c, the NCCL and RCCL
 * collectives; src/api/coll_v.c, braid's uneven ones). Each fails with BRAID_ERR_INVALID
 * (or BRAID_ERR_USAGE) and a last-error text naming the call (`what`), the argument and its
 * value, and touches nothing.
 */
#ifndef BRAID_API_COLL_H
#define BRAID_API_COLL_H

#include "core/enqueue.h"

/* datatype (an ncclDataType_t value) is one braid knows. */
braid_status_t braid_api_check_dtype(const char *what, int datatype);

/* op (an ncclRedOp_t value; negative: the call has none) suits the call: a built-in
 * operator or a live ncclRedOpCreatePreMulSum operator of comm made for datatype, and
 * present where the call reduces. */
braid_status_t braid_api_check_op(const braid_comm_t *comm, const char *what, int op,
                                  braid_dtype_t datatype, int reduces);

/* A device call's stream is not being captured (CUDA graphs): braid has no graph support. */
braid_status_t braid_api_check_capture(const char *what, void *stream);

/*
 * Where the buffers are (has_send, has_recv: which of them the call uses on this rank):
 * device (or managed) memory makes the call a device call, ordered on the stream (sets
 * call->on_device, ordinal, stream); host memory keeps the synchronous host path. Device
 * memory on one side and pageable host memory on the other is refused, as are a capturing
 * stream and, where a GPU runtime is loaded that braid has no backend for, buffers the CPU
 * cannot read.
 */
braid_status_t braid_api_buffers_place(braid_comm_t *comm, const char *what, const void *sbuf,
                                       int has_send, const void *rbuf, int has_recv,
                                       void *stream, braid_call_t *call);

#endif
