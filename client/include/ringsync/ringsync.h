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
 * trainer and daemon. Any other host pointer works too; it is copied through a
 * shared buffer that the request borrows from a per-connection pool (one copy in
 * before the collective, one copy out before the request reports completion).
 * The daemon reads and writes buffers from rs_alloc() where they are, for as
 * long as the collective runs: from submission until the request completes,
 * leave sendbuf unwritten and recvbuf alone.
 * GPU memory (cudaMalloc) works as well, with no copies through the trainer: see
 * "GPU buffers" below.
 *
 * Threads: one rs_context_t may be used from several threads at once. The
 * library starts no threads: a waiting thread reads the daemon's answers
 * itself. Waiting for a collective of up to 8 KiB, it polls for
 * $RINGSYNC_BUSY_POLL_US microseconds (default 1000; 0: never) before it
 * sleeps, which saves a wake-up (and spends up to that much CPU per wait,
 * yielding to other threads as it polls); for larger ones at most 50;
 * rs_test() and every submission read what has arrived without waiting.
 * A thread that waits longer than the daemon's heartbeat interval (a quarter
 * of its --rank-liveness-timeout) tells it, every interval, that this rank is
 * alive and waiting; a rank whose process stops is failed after the timeout.
 */
#ifndef RINGSYNC_RINGSYNC_H
#define RINGSYNC_RINGSYNC_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define RINGSYNC_API __attribute__((visibility("default")))
#else
#define RINGSYNC_API
#endif

/* No call throws: in C++ every function is noexcept. */
#ifdef __cplusplus
#define RINGSYNC_NOEXCEPT noexcept
#else
#define RINGSYNC_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define RINGSYNC_VERSION_MAJOR 0
#define RINGSYNC_VERSION_MINOR 1

/* The outcome of every call. RS_IN_PROGRESS is only returned by rs_test() and
 * rs_wait_timeout(). */
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
  RS_IN_PROGRESS = 9       /* rs_test(), rs_wait_timeout(): not completed yet */
} rs_status_t;

typedef enum { RS_F32 = 0, RS_F64, RS_F16, RS_BF16, RS_I32, RS_I64, RS_U8 } rs_dtype_t;
typedef enum { RS_SUM = 0, RS_AVG, RS_MIN, RS_MAX, RS_PROD } rs_op_t;

typedef struct rs_context rs_context_t; /* a connection to the daemon */
typedef struct rs_request rs_request_t; /* an asynchronous collective */

/* Connection parameters. Initialise with rs_config_init(), then set what you need
 * (a zero-initialised config asks for local_rank 0). When neither the config nor
 * the environment sets the rank and the size, the process is rank 0 of 1. */
typedef struct {
  const char* socket_path; /* NULL: $RINGSYNC_SOCKET, else the daemon's default path */
  const char* job_id;      /* NULL: $RINGSYNC_JOB_ID, else "default" */
  int local_rank;          /* -1: $RINGSYNC_LOCAL_RANK */
  int local_size;          /* -1 or 0: $RINGSYNC_LOCAL_SIZE */
  int connect_timeout_ms;  /* 0: 10000. How long to wait for the daemon's socket to accept */
} rs_config_t;

/* Fills *config with the defaults (NULL paths, ranks -1, timeout 0). */
RINGSYNC_API void rs_config_init(rs_config_t* config) RINGSYNC_NOEXCEPT;

/* Human-readable name of a status ("success", "mismatch", ...). Never NULL. */
RINGSYNC_API const char* rs_status_string(rs_status_t status) RINGSYNC_NOEXCEPT;

/* The message of the last failed call on this thread ("" if none). Valid until the
 * next ringsync call on this thread. */
RINGSYNC_API const char* rs_last_error(void) RINGSYNC_NOEXCEPT;

/* Size in bytes of one element of dtype, 0 for an invalid dtype. */
RINGSYNC_API size_t rs_dtype_size(rs_dtype_t dtype) RINGSYNC_NOEXCEPT;

/* Connects to the daemon and joins the job as local_rank of local_size. config may
 * be NULL (everything from the environment and the defaults). A multi-node job
 * is described by the environment: RINGSYNC_NODES (every node's daemon,
 * host:port, in node order) and RINGSYNC_NODE_RANK, or RINGSYNC_NUM_NODES with
 * a rendezvous store (the daemon's --rendezvous or RINGSYNC_RENDEZVOUS; then the
 * call returns once this node has its rank), and RINGSYNC_JOB_TOKEN (or
 * RINGSYNC_JOB_TOKEN_FILE, a file only its owner may read); without
 * RINGSYNC_LOCAL_RANK and RINGSYNC_LOCAL_SIZE, torchrun's, Open MPI's or Slurm's
 * variables give the ranks (docs/cluster.md, "Jobs and membership").
 * Fails with RS_INVALID_ARGUMENT if the rank is taken, the sizes disagree with
 * ranks already joined or the job's description is wrong (the message says
 * which setting), RS_CLOSED if no daemon answers within the timeout. */
RINGSYNC_API rs_status_t rs_connect(const rs_config_t* config,
                                    rs_context_t** out) RINGSYNC_NOEXCEPT;

/* Closes the connection and frees ctx. Pending requests complete with RS_CLOSED
 * (their handles stay valid: wait on or free them as usual). Every buffer from
 * rs_alloc() on ctx is unmapped: read results out first, and do not rs_free()
 * them afterwards. The daemon releases its side. ctx may be NULL. */
RINGSYNC_API void rs_disconnect(rs_context_t* ctx) RINGSYNC_NOEXCEPT;

/* This process's local rank and the job's local size; -1 for a NULL ctx. */
RINGSYNC_API int rs_local_rank(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;
RINGSYNC_API int rs_local_size(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;

/* Across a multi-node job (the daemon says which node this is): the global rank
 * node_rank * local_size + local_rank, and the job's size num_nodes * local_size.
 * On a daemon serving one node, rank = local rank and size = local size.
 * Broadcast roots are global ranks; allgather results, reduce-scatter and
 * alltoall blocks are ordered by global rank.
 * -1 for a NULL ctx. */
RINGSYNC_API int rs_rank(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;
RINGSYNC_API int rs_size(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;
RINGSYNC_API int rs_node_rank(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;
RINGSYNC_API int rs_num_nodes(const rs_context_t* ctx) RINGSYNC_NOEXCEPT;

/* Allocates `bytes` (> 0) of shared memory from the daemon, mapped into this process.
 * Collectives whose data lie inside such buffers cost zero copies. */
RINGSYNC_API rs_status_t rs_alloc(rs_context_t* ctx, size_t bytes, void** out) RINGSYNC_NOEXCEPT;

/* Releases a buffer from rs_alloc() (ptr as rs_alloc() returned it; NULL does
 * nothing). Fails with RS_INVALID_ARGUMENT while a pending request uses it. */
RINGSYNC_API rs_status_t rs_free(rs_context_t* ctx, void* ptr) RINGSYNC_NOEXCEPT;

/* Committed state the daemon keeps for this rank (what ringsync.elastic commits).
 *
 * rs_keep_state: the first `bytes` (> 0) of the buffer from rs_alloc() that starts
 * at `ptr` become this rank's state `name` (1 to 4096 bytes) on this node; the
 * daemon holds that memory from now on, also after this process exits, and
 * forgets what it kept under `name` before. Do not write the buffer afterwards
 * (keep the next state in another buffer; rs_free() this one when done with it).
 * Kept per job and local rank; gone --kept-state-linger after the job's last rank
 * left the node, and refused (RS_OUT_OF_MEMORY) past --max-kept-state-bytes.
 *
 * rs_fetch_state: the state `name` kept for this job and local rank on this node,
 * copied into a new buffer (as from rs_alloc(); rs_free() it): *ptr and *bytes.
 * RS_SUCCESS with *ptr = NULL and *bytes = 0 when none is kept. */
RINGSYNC_API rs_status_t rs_keep_state(rs_context_t* ctx, const char* name, const void* ptr,
                                       size_t bytes) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_fetch_state(rs_context_t* ctx, const char* name, void** ptr,
                                        size_t* bytes) RINGSYNC_NOEXCEPT;

/* How many nodes wait to join this job's next run (*waiting): an elastic job
 * (RINGSYNC_MIN_NODES/RINGSYNC_MAX_NODES) whose current run has room for them;
 * 0 for every other job. The ranks learn of them at different moments: agree
 * (e.g. an allreduce of the count with RS_MAX) before ending the run at a step
 * boundary so that they join, as ringsync.elastic does at each commit. */
RINGSYNC_API rs_status_t rs_nodes_waiting(rs_context_t* ctx, int* waiting) RINGSYNC_NOEXCEPT;

/* Ranks below are global ranks (rs_rank(): the local rank on a one-node daemon).
 *
 * Allreduce of `count` elements across the job's ranks. Every rank's recvbuf
 * receives op(sendbuf of every rank). In place when sendbuf == recvbuf. RS_AVG
 * divides the sum by the number of ranks (integers: truncating division). */
RINGSYNC_API rs_status_t rs_allreduce_async(rs_context_t* ctx, const char* name,
                                            const void* sendbuf, void* recvbuf, size_t count,
                                            rs_dtype_t dtype, rs_op_t op,
                                            rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Broadcast of `count` elements from rank `root`: every rank's recvbuf receives
 * root's sendbuf. Only root's sendbuf is read (others may pass NULL). In place when
 * sendbuf == recvbuf on root. */
RINGSYNC_API rs_status_t rs_broadcast_async(rs_context_t* ctx, const char* name,
                                            const void* sendbuf, void* recvbuf, size_t count,
                                            rs_dtype_t dtype, int root,
                                            rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Allgather: each rank contributes `sendcount` elements; recvbuf (sendcount * rs_size()
 * elements) receives them in global rank order. In place when
 * sendbuf == recvbuf + rank * sendcount * element size. */
RINGSYNC_API rs_status_t rs_allgather_async(rs_context_t* ctx, const char* name,
                                            const void* sendbuf, void* recvbuf, size_t sendcount,
                                            rs_dtype_t dtype,
                                            rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Reduce-scatter: each rank's sendbuf holds recvcount * rs_size() elements, in
 * rs_size() blocks of recvcount; rank i's recvbuf (recvcount elements) receives
 * op over every rank's block i. In place when
 * recvbuf == sendbuf + rank * recvcount * element size (as in NCCL). RS_AVG
 * divides by the number of ranks, as for allreduce. Between nodes the daemons
 * run the ring's reduce-scatter phase only. */
RINGSYNC_API rs_status_t rs_reduce_scatter_async(rs_context_t* ctx, const char* name,
                                                 const void* sendbuf, void* recvbuf,
                                                 size_t recvcount, rs_dtype_t dtype, rs_op_t op,
                                                 rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Alltoall: sendbuf and recvbuf each hold count * rs_size() elements, in
 * rs_size() blocks of count; block j of rank i's sendbuf lands in block i of
 * rank j's recvbuf. Not in place: the two ranges must not overlap
 * (RS_INVALID_ARGUMENT). Between nodes the daemons exchange pairwise. */
RINGSYNC_API rs_status_t rs_alltoall_async(rs_context_t* ctx, const char* name,
                                           const void* sendbuf, void* recvbuf, size_t count,
                                           rs_dtype_t dtype,
                                           rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Reduce of `count` elements to rank `root`: root's recvbuf receives op(sendbuf
 * of every rank), as rs_allreduce_async() computes it; no other rank's recvbuf is
 * written (they may pass NULL, as MPI_Reduce and ncclReduce allow). In place when
 * sendbuf == recvbuf on root. Host buffers only for now (GPU buffers:
 * RS_INVALID_ARGUMENT). Between nodes the daemons run the allreduce's algorithms,
 * so the traffic is an allreduce's. */
RINGSYNC_API rs_status_t rs_reduce_async(rs_context_t* ctx, const char* name,
                                         const void* sendbuf, void* recvbuf, size_t count,
                                         rs_dtype_t dtype, rs_op_t op, int root,
                                         rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Gather to rank `root`: each rank contributes `sendcount` elements; root's
 * recvbuf (sendcount * rs_size() elements) receives them in global rank order;
 * no other rank's recvbuf is written (they may pass NULL). In place when
 * sendbuf == recvbuf + root * sendcount * element size on root. Host buffers
 * only for now. Between nodes the daemons run the ring allgather. */
RINGSYNC_API rs_status_t rs_gather_async(rs_context_t* ctx, const char* name,
                                         const void* sendbuf, void* recvbuf, size_t sendcount,
                                         rs_dtype_t dtype, int root,
                                         rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Scatter from rank `root`: root's sendbuf holds recvcount * rs_size() elements,
 * in rs_size() blocks of recvcount; rank i's recvbuf (recvcount elements)
 * receives block i. Only root's sendbuf is read (others may pass NULL). In
 * place when recvbuf == sendbuf + root * recvcount * element size on root.
 * Host buffers only for now. Between nodes the daemons run the ring broadcast
 * of root's whole sendbuf. */
RINGSYNC_API rs_status_t rs_scatter_async(rs_context_t* ctx, const char* name,
                                          const void* sendbuf, void* recvbuf, size_t recvcount,
                                          rs_dtype_t dtype, int root,
                                          rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Barrier: completes once every local rank has entered a barrier of this name. */
RINGSYNC_API rs_status_t rs_barrier_async(rs_context_t* ctx, const char* name,
                                          rs_request_t** request) RINGSYNC_NOEXCEPT;

/* Blocks until the request completes and frees it. Returns the collective's status. */
RINGSYNC_API rs_status_t rs_wait(rs_request_t* request) RINGSYNC_NOEXCEPT;

/* Like rs_wait() but gives up after timeout_ms, returning RS_IN_PROGRESS and keeping
 * the request (wait again, or rs_request_free()). timeout_ms < 0 waits forever. */
RINGSYNC_API rs_status_t rs_wait_timeout(rs_request_t* request, int timeout_ms) RINGSYNC_NOEXCEPT;

/* Non-blocking: RS_IN_PROGRESS while pending; otherwise the final status, and the
 * request is freed. */
RINGSYNC_API rs_status_t rs_test(rs_request_t* request) RINGSYNC_NOEXCEPT;

/* Abandons a request without waiting. Until the collective has finished on every
 * node the daemon may still read its send buffer and write its receive buffer (a
 * buffer from rs_alloc() can carry the whole ring transfer); a later collective or
 * barrier completing does not prove it has, as operations overlap. So abandon only
 * requests whose buffers you leave alone until rs_disconnect(). The result of a
 * bounced request (plain host memory) is discarded. request may be NULL. */
RINGSYNC_API void rs_request_free(rs_request_t* request) RINGSYNC_NOEXCEPT;

/* GPU buffers. The collectives above also take pointers into GPU memory from
 * cudaMalloc (a PyTorch CUDA tensor's data_ptr() with the default allocator).
 * They are recognised through the CUDA driver the process has loaded already;
 * libringsync links no CUDA library, and in a process without one every pointer
 * is host memory. A rank passes its send and receive buffers both on the GPU or
 * both on the host, and the local ranks of a collective all pass the same kind
 * (RS_MISMATCH otherwise). The allocation holding a buffer is registered with
 * the daemon on first use (one round trip; the daemon maps it with CUDA IPC) and
 * stays registered until rs_unregister_device() or rs_disconnect(). Memory from
 * the CUDA virtual memory API or a memory pool (cudaMallocAsync, PyTorch's
 * expandable segments) cannot be shared that way: RS_INVALID_ARGUMENT.
 *
 * Stream semantics: the library synchronizes. Submitting a collective on GPU
 * memory first waits until the device work queued so far is finished: all work
 * of the buffer's CUDA context (cuCtxSynchronize), or only that of the stream
 * given to rs_set_device_stream(). So the caller needs no synchronization of its
 * own before the call. From submission until the request completes, the caller
 * must not write the buffers (nor read recvbuf); at completion the daemon's
 * device work is finished, and any later kernel sees the results.
 *
 * A daemon that cannot use a GPU (built without CUDA, no device visible to it)
 * refuses the registration: the collective fails with RS_INVALID_ARGUMENT and a
 * message saying why, and the connection stays usable for host memory.
 */

/* Registers the GPU allocation holding [ptr, ptr + bytes) now instead of at its
 * first collective, so that the round trip is paid up front and a refusal shows
 * early. RS_SUCCESS when it is registered already. RS_INVALID_ARGUMENT for host
 * memory, memory CUDA IPC cannot share, or a daemon without GPU support (the
 * message says which). */
RINGSYNC_API rs_status_t rs_register_device(rs_context_t* ctx, const void* ptr,
                                            size_t bytes) RINGSYNC_NOEXCEPT;

/* Forgets the registration of the GPU allocation holding ptr and tells the daemon,
 * without waiting for it: the daemon unmaps the allocation after it reads the
 * message and once no collective uses it. Call it before cudaFree() of memory
 * that collectives used: while the daemon's mapping is open, CUDA keeps the
 * memory allocated even after cudaFree() (until the library finds other memory
 * at that address, or rs_disconnect()). RS_INVALID_ARGUMENT when no registered
 * allocation holds ptr or a pending request uses it. */
RINGSYNC_API rs_status_t rs_unregister_device(rs_context_t* ctx,
                                              const void* ptr) RINGSYNC_NOEXCEPT;

/* What a collective on GPU memory waits for before it is submitted: the work
 * queued so far on `stream` (a cudaStream_t, e.g. PyTorch's
 * torch.cuda.current_stream().cuda_stream) when the caller writes its buffers on
 * that stream only, or, for NULL (the default), all work of the buffer's context.
 * Applies to later submissions on ctx from every thread. */
RINGSYNC_API rs_status_t rs_set_device_stream(rs_context_t* ctx, void* stream) RINGSYNC_NOEXCEPT;

/* 1 when ptr points into GPU memory collectives would register (cudaMalloc), 0
 * for host memory (pinned and managed memory included, and every pointer of a
 * process without the CUDA driver loaded), -1 on error (see rs_last_error()). */
RINGSYNC_API int rs_is_device_pointer(const void* ptr) RINGSYNC_NOEXCEPT;

/* Blocking forms: submit, then rs_wait(). */
RINGSYNC_API rs_status_t rs_allreduce(rs_context_t* ctx, const char* name, const void* sendbuf,
                                      void* recvbuf, size_t count, rs_dtype_t dtype,
                                      rs_op_t op) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_broadcast(rs_context_t* ctx, const char* name, const void* sendbuf,
                                      void* recvbuf, size_t count, rs_dtype_t dtype,
                                      int root) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_allgather(rs_context_t* ctx, const char* name, const void* sendbuf,
                                      void* recvbuf, size_t sendcount,
                                      rs_dtype_t dtype) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_reduce_scatter(rs_context_t* ctx, const char* name,
                                           const void* sendbuf, void* recvbuf, size_t recvcount,
                                           rs_dtype_t dtype, rs_op_t op) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_alltoall(rs_context_t* ctx, const char* name, const void* sendbuf,
                                     void* recvbuf, size_t count,
                                     rs_dtype_t dtype) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_reduce(rs_context_t* ctx, const char* name, const void* sendbuf,
                                   void* recvbuf, size_t count, rs_dtype_t dtype, rs_op_t op,
                                   int root) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_gather(rs_context_t* ctx, const char* name, const void* sendbuf,
                                   void* recvbuf, size_t sendcount, rs_dtype_t dtype,
                                   int root) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_scatter(rs_context_t* ctx, const char* name, const void* sendbuf,
                                    void* recvbuf, size_t recvcount, rs_dtype_t dtype,
                                    int root) RINGSYNC_NOEXCEPT;
RINGSYNC_API rs_status_t rs_barrier(rs_context_t* ctx, const char* name) RINGSYNC_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* RINGSYNC_RINGSYNC_H */
