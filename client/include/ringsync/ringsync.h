/*
 * ringsync.h — the C ABI of the ringsync client library (libringsync.so).
 *
 * A trainer process connects to the ringsyncd daemon on its node, optionally
 * allocates shared buffers from it, and submits collectives. Collectives are
 * matched across the local ranks of a job by tensor name, so ranks may submit
 * in different orders. Every call returns an rs_status_t; on failure
 * rs_last_error() holds a message for this thread saying what went wrong.
 *
 * Buffers: data inside a buffer from rs_alloc() moves with zero copies between
 * trainer and daemon. Any other host pointer works too; it is staged through a
 * per-request shared buffer (one copy in before the collective, one copy out
 * when it completes).
 *
 * Threads: one rs_context_t may be used from several threads at once. Waiting
 * blocks the calling thread without spinning.
 */
#ifndef RINGSYNC_RINGSYNC_H
#define RINGSYNC_RINGSYNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RINGSYNC_VERSION_MAJOR 0
#define RINGSYNC_VERSION_MINOR 1

/* The outcome of every call. RS_IN_PROGRESS is only returned by rs_test(). */
typedef enum {
  RS_SUCCESS = 0,
  RS_INVALID_ARGUMENT = 1, /* bad argument, unknown buffer, out-of-range rank... */
  RS_MISMATCH = 2,         /* local ranks disagree on a collective (dtype, count, op, root) */
  RS_PEER_LOST = 3,        /* another rank or daemon of the job went away */
  RS_TIMEOUT = 4,          /* not all ranks submitted within the daemon's collective timeout */
  RS_PROTOCOL_ERROR = 5,   /* the daemon or client sent something malformed */
  RS_OUT_OF_MEMORY = 6,    /* shared memory could not be allocated or mapped */
  RS_CLOSED = 7,           /* the connection to the daemon is closed */
  RS_INTERNAL = 8,         /* a bug: please report it with the message */
  RS_IN_PROGRESS = 9       /* rs_test(): the request has not completed yet */
} rs_status_t;

typedef enum { RS_F32 = 0, RS_F64, RS_F16, RS_BF16, RS_I32, RS_I64, RS_U8 } rs_dtype_t;
typedef enum { RS_SUM = 0, RS_AVG, RS_MIN, RS_MAX, RS_PROD } rs_op_t;

typedef struct rs_context rs_context_t; /* a connection to the daemon */
typedef struct rs_request rs_request_t; /* an asynchronous collective */

/* Connection parameters. Zero-initialise, then set what you need. */
typedef struct {
  const char* socket_path; /* NULL: $RINGSYNC_SOCKET, else the daemon's default path */
  const char* job_id;      /* NULL: $RINGSYNC_JOB_ID, else "default" */
  int local_rank;          /* -1: $RINGSYNC_LOCAL_RANK */
  int local_size;          /* -1 or 0: $RINGSYNC_LOCAL_SIZE */
  int connect_timeout_ms;  /* 0: 10000. How long to wait for the daemon's socket to accept */
} rs_config_t;

/* Fills *config with the defaults (NULL paths, ranks -1, timeout 0). */
void rs_config_init(rs_config_t* config);

/* Human-readable name of a status ("success", "mismatch", ...). Never NULL. */
const char* rs_status_string(rs_status_t status);

/* The message of the last failed call on this thread ("" if none). Valid until the
 * next ringsync call on this thread. */
const char* rs_last_error(void);

/* Size in bytes of one element of dtype, 0 for an invalid dtype. */
size_t rs_dtype_size(rs_dtype_t dtype);

/* Connects to the daemon and joins the job as local_rank of local_size.
 * Fails with RS_INVALID_ARGUMENT if the rank is taken or the sizes disagree with
 * ranks already joined, RS_CLOSED if no daemon answers within the timeout. */
rs_status_t rs_connect(const rs_config_t* config, rs_context_t** out);

/* Closes the connection. Pending requests complete with RS_CLOSED; shared buffers
 * stay mapped until rs_free(); the daemon releases its side. ctx may be NULL. */
void rs_disconnect(rs_context_t* ctx);

int rs_local_rank(const rs_context_t* ctx);
int rs_local_size(const rs_context_t* ctx);

/* Allocates `bytes` of shared memory from the daemon, mapped into this process.
 * Collectives whose data lie inside such buffers cost zero copies. */
rs_status_t rs_alloc(rs_context_t* ctx, size_t bytes, void** out);

/* Releases a buffer from rs_alloc(). It must not be used by a pending request. */
rs_status_t rs_free(rs_context_t* ctx, void* ptr);

/* Allreduce of `count` elements across the job's local ranks. Every rank's recvbuf
 * receives op(sendbuf of every rank). In place when sendbuf == recvbuf. RS_AVG
 * divides the sum by the number of ranks (integers: truncating division). */
rs_status_t rs_allreduce_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t count, rs_dtype_t dtype, rs_op_t op,
                               rs_request_t** request);

/* Broadcast of `count` elements from local rank `root`: every rank's recvbuf receives
 * root's sendbuf. Only root's sendbuf is read (others may pass NULL). In place when
 * sendbuf == recvbuf on root. */
rs_status_t rs_broadcast_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t count, rs_dtype_t dtype, int root,
                               rs_request_t** request);

/* Allgather: each rank contributes `sendcount` elements; recvbuf (sendcount * size
 * elements) receives them in rank order. In place when
 * sendbuf == recvbuf + rank * sendcount * element size. */
rs_status_t rs_allgather_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t sendcount, rs_dtype_t dtype,
                               rs_request_t** request);

/* Barrier: completes once every local rank has entered a barrier of this name. */
rs_status_t rs_barrier_async(rs_context_t* ctx, const char* name, rs_request_t** request);

/* Blocks until the request completes and frees it. Returns the collective's status. */
rs_status_t rs_wait(rs_request_t* request);

/* Like rs_wait() but gives up after timeout_ms, returning RS_IN_PROGRESS and keeping
 * the request (wait again, or rs_request_free()). timeout_ms < 0 waits forever. */
rs_status_t rs_wait_timeout(rs_request_t* request, int timeout_ms);

/* Non-blocking: RS_IN_PROGRESS while pending; otherwise the final status, and the
 * request is freed. */
rs_status_t rs_test(rs_request_t* request);

/* Abandons a request without waiting; its buffers must not be reused until the daemon
 * has answered (wait on a later collective or barrier). request may be NULL. */
void rs_request_free(rs_request_t* request);

/* Blocking forms: submit, then rs_wait(). */
rs_status_t rs_allreduce(rs_context_t* ctx, const char* name, const void* sendbuf,
                         void* recvbuf, size_t count, rs_dtype_t dtype, rs_op_t op);
rs_status_t rs_broadcast(rs_context_t* ctx, const char* name, const void* sendbuf,
                         void* recvbuf, size_t count, rs_dtype_t dtype, int root);
rs_status_t rs_allgather(rs_context_t* ctx, const char* name, const void* sendbuf,
                         void* recvbuf, size_t sendcount, rs_dtype_t dtype);
rs_status_t rs_barrier(rs_context_t* ctx, const char* name);

#ifdef __cplusplus
}
#endif

#endif /* RINGSYNC_RINGSYNC_H */
