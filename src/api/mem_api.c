/*
 * Memory, registration, windows and PreMulSum operators. On host memory there is nothing to
 * pin or map: registration and windows record the range so that misuse is still caught.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/comm.h"

#define REG_MAGIC 0x62726567u /* "breg" */

typedef struct braid_reg {
    uint32_t magic;
    braid_comm_t *comm;
    void *buff;
    size_t size;
    int flags;
} braid_reg_t;

BRAID_API_TWIN(ncclMemAlloc);
ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    /* As NCCL, which hands both to cudaMalloc: a NULL ptr is cudaErrorInvalidValue
     * (ncclUnhandledCudaError), size 0 succeeds with *ptr = NULL. */
    if (ptr == NULL)
        return braid_api_result(braid_err(BRAID_ERR_DEVICE, "ncclMemAlloc: ptr is NULL (as "
                                          "cudaMalloc(NULL, %zu) in NCCL)", size));
    if (size == 0) {
        *ptr = NULL;
        return ncclSuccess;
    }
    void *p = NULL;
    int e = posix_memalign(&p, 4096, size);
    if (e != 0)
        return braid_api_result(braid_err(BRAID_ERR_NOMEM, "ncclMemAlloc: cannot allocate %zu "
                                          "bytes of host memory: %s", size, strerror(e)));
    *ptr = p;
    return ncclSuccess;
}

BRAID_API_TWIN(ncclMemFree);
ncclResult_t ncclMemFree(void *ptr)
{
    free(ptr);   /* NULL is a no-op, as for free() */
    return ncclSuccess;
}

static braid_status_t reg_make(braid_comm_t *comm, void *buff, size_t size, int flags,
                               const char *what, braid_reg_t **reg_p)
{
    if (reg_p == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: handle pointer is NULL", what);
    if (buff == NULL || size == 0)
        return braid_err(BRAID_ERR_INVALID, "%s: buffer %p of %zu bytes", what, buff, size);
    BRAID_CHECK(braid_comm_enter(comm, what, 1));
    braid_reg_t *reg = calloc(1, sizeof(*reg));
    braid_comm_leave(comm);
    if (reg == NULL)
        return braid_err(BRAID_ERR_NOMEM, "%s: out of memory", what);
    *reg = (braid_reg_t){ REG_MAGIC, comm, buff, size, flags };
    *reg_p = reg;
    return BRAID_OK;
}

/* As NCCL: a NULL handle is a no-op (ncclCommRegister may hand out NULL where it registers
 * nothing), one this communicator never gave out is misuse (ncclInvalidUsage). */
static braid_status_t reg_drop(braid_comm_t *comm, void *handle, const char *what)
{
    braid_reg_t *reg = handle;
    BRAID_CHECK(braid_comm_enter(comm, what, 0));
    braid_comm_leave(comm);
    if (handle == NULL)
        return BRAID_OK;
    if (reg->magic != REG_MAGIC || reg->comm != comm)
        return braid_err(BRAID_ERR_USAGE, "%s: handle %p was not registered with this "
                         "communicator", what, handle);
    reg->magic = 0;
    free(reg);
    return BRAID_OK;
}

BRAID_API_TWIN(ncclCommRegister);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    return braid_api_result(reg_make(comm, buff, size, 0, "ncclCommRegister",
                                     (braid_reg_t **)handle));
}

BRAID_API_TWIN(ncclCommDeregister);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return braid_api_result(reg_drop(comm, handle, "ncclCommDeregister"));
}

static braid_status_t window_register(braid_comm_t *comm, void *buff, size_t size,
                                      ncclWindow_t *win, int flags)
{
    const char *what = "ncclCommWindowRegister";
    if (flags & ~NCCL_WIN_COLL_SYMMETRIC)
        return braid_err(BRAID_ERR_INVALID, "%s: winFlags 0x%x has unknown bits", what, flags);
    if ((flags & NCCL_WIN_COLL_SYMMETRIC) && ((uintptr_t)buff % NCCL_WIN_REQUIRED_ALIGNMENT))
        return braid_err(BRAID_ERR_INVALID, "%s: buffer %p is not aligned to %d bytes, as "
                         "NCCL_WIN_COLL_SYMMETRIC requires", what, buff,
                         NCCL_WIN_REQUIRED_ALIGNMENT);
    return reg_make(comm, buff, size, flags, what, (braid_reg_t **)win);
}

BRAID_API_TWIN(ncclCommWindowRegister);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags)
{
    return braid_api_result(window_register(comm, buff, size, win, winFlags));
}

BRAID_API_TWIN(ncclCommWindowDeregister);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return braid_api_result(reg_drop(comm, win, "ncclCommWindowDeregister"));
}

/* ---- PreMulSum operators ------------------------------------------------------------- */

static braid_status_t premul_create(ncclRedOp_t *op, void *scalar, ncclDataType_t dt,
                                    ncclScalarResidence_t res, braid_comm_t *comm)
{
    const char *what = "ncclRedOpCreatePreMulSum";
    if (op == NULL || scalar == NULL)
        return braid_err(BRAID_ERR_INVALID, "%s: %s is NULL", what, op == NULL ? "op" : "scalar");
    if ((unsigned)dt >= ncclNumTypes)
        return braid_err(BRAID_ERR_INVALID, "%s: datatype %d is out of range [0, %d)", what,
                         (int)dt, (int)ncclNumTypes);
    if (res != ncclScalarDevice && res != ncclScalarHostImmediate)
        return braid_err(BRAID_ERR_INVALID, "%s: residence %d is neither ncclScalarDevice nor "
                         "ncclScalarHostImmediate", what, (int)res);
    BRAID_CHECK(braid_comm_enter(comm, what, 1));
    pthread_mutex_lock(&comm->lock);
    int idx = 0;
    while (idx < comm->npremuls && comm->premuls[idx].in_use)
        idx++;
    braid_status_t st = BRAID_OK;
    if (idx == comm->npremuls) {
        braid_premul_t *p = realloc(comm->premuls, (size_t)(idx + 1) * sizeof(*p));
        if (p == NULL)
            st = braid_err(BRAID_ERR_NOMEM, "%s: out of memory", what);
        else
            comm->premuls = p, comm->npremuls++;
    }
    if (st == BRAID_OK) {
        braid_premul_t *pm = &comm->premuls[idx];
        memset(pm, 0, sizeof(*pm));
        pm->in_use = 1;
        pm->dtype = (braid_dtype_t)dt;
        pm->residence = (int)res;
        if (res == ncclScalarHostImmediate)
            pm->value = braid_scalar_load((braid_dtype_t)dt, scalar);
        else
            pm->ptr = scalar;   /* read when each call starts */
        *op = (ncclRedOp_t)(ncclNumOps + idx);
    }
    pthread_mutex_unlock(&comm->lock);
    braid_comm_leave(comm);
    return st;
}

BRAID_API_TWIN(ncclRedOpCreatePreMulSum);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
    return braid_api_result(premul_create(op, scalar, datatype, residence, comm));
}

static braid_status_t premul_destroy(ncclRedOp_t op, braid_comm_t *comm)
{
    const char *what = "ncclRedOpDestroy";
    BRAID_CHECK(braid_comm_enter(comm, what, 0));
    braid_status_t st = BRAID_OK;
    int idx = (int)op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    if ((int)op < ncclNumOps)
        st = braid_err(BRAID_ERR_INVALID, "%s: op %d is a built-in operator, not one made by "
                       "ncclRedOpCreatePreMulSum", what, (int)op);
    else if (idx >= comm->npremuls || !comm->premuls[idx].in_use)
        st = braid_err(BRAID_ERR_INVALID, "%s: op %d is not a live operator of this "
                       "communicator", what, (int)op);
    else
        comm->premuls[idx].in_use = 0;
    pthread_mutex_unlock(&comm->lock);
    braid_comm_leave(comm);
    return st;
}

BRAID_API_TWIN(ncclRedOpDestroy);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    return braid_api_result(premul_destroy(op, comm));
}
