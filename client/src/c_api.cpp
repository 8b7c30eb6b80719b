// The C ABI (ringsync/ringsync.h) over client::Context. Every function is a
// noexcept boundary: exceptions become RS_OUT_OF_MEMORY / RS_INTERNAL, and every
// failure leaves its message in the calling thread's rs_last_error().
#include <unistd.h>

#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "client/src/collective_call.h"
#include "client/src/context.h"
#include "client/src/device_memory.h"
#include "client/src/env.h"
#include "client/src/requests.h"
#include "common/log.h"
#include "ringsync/ringsync.h"

struct rs_context {
  std::unique_ptr<ringsync::client::Context> impl;
};

struct rs_request {
  std::shared_ptr<ringsync::client::RequestState> state;
};

namespace {

using ringsync::Status;
using ringsync::StatusCode;
using ringsync::client::CollectiveCall;
using ringsync::wire::CollectiveKind;

static_assert(static_cast<int>(StatusCode::kOk) == RS_SUCCESS);
static_assert(static_cast<int>(StatusCode::kInvalidArgument) == RS_INVALID_ARGUMENT);
static_assert(static_cast<int>(StatusCode::kMismatch) == RS_MISMATCH);
static_assert(static_cast<int>(StatusCode::kPeerLost) == RS_PEER_LOST);
static_assert(static_cast<int>(StatusCode::kTimeout) == RS_TIMEOUT);
static_assert(static_cast<int>(StatusCode::kProtocolError) == RS_PROTOCOL_ERROR);
static_assert(static_cast<int>(StatusCode::kOutOfMemory) == RS_OUT_OF_MEMORY);
static_assert(static_cast<int>(StatusCode::kClosed) == RS_CLOSED);
static_assert(static_cast<int>(StatusCode::kInternal) == RS_INTERNAL);

thread_local std::string t_last_error;

rs_status_t fail(rs_status_t code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

rs_status_t report(const Status& status) {
  if (status.ok()) return RS_SUCCESS;
  std::string message = status.message();
  if (message.empty()) message = ringsync::status_code_name(status.code());
  return fail(static_cast<rs_status_t>(status.code()), std::move(message));
}

rs_status_t invalid(const char* function, const std::string& what) {
  return fail(RS_INVALID_ARGUMENT, std::string(function) + ": " + what);
}

// Runs `body` (returning rs_status_t) with every exception turned into a status.
template <typename Body>
rs_status_t guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(RS_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(RS_INTERNAL,
                std::string(function) + ": unexpected error: " + e.what() + "; please report it");
  } catch (...) {
    return fail(RS_INTERNAL, std::string(function) + ": unexpected error; please report it");
  }
}

void configure_logging_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Status s = ringsync::log::configure_from_environment(ringsync::log::Level::kWarn);
    if (!s.ok()) RS_LOG(warn, "client") << "logging stays at its defaults: " << s.message();
  });
}

rs_status_t submit(const char* function, rs_context_t* ctx, const CollectiveCall& call,
                   rs_request_t** request) {
  return guarded(function, [&] {
    if (!ctx) return invalid(function, "ctx is NULL; connect with rs_connect() first");
    if (!request) return invalid(function, "request is NULL; pass where to store the request");
    *request = nullptr;
    auto state = ctx->impl->submit(call);
    if (!state.ok()) return report(state.status());
    *request = new rs_request{std::move(*state)};
    return RS_SUCCESS;
  });
}

// Waits up to timeout_ms (< 0: forever). Frees the request once it completed.
rs_status_t finish_wait(const char* function, rs_request_t* request, int timeout_ms) {
  return guarded(function, [&] {
    if (!request) return invalid(function, "request is NULL");
    std::optional<std::chrono::milliseconds> timeout;
    if (timeout_ms >= 0) timeout = std::chrono::milliseconds(timeout_ms);
    auto status = request->state->wait(timeout);
    if (!status) return RS_IN_PROGRESS;
    delete request;
    return report(*status);
  });
}

// Takes the request by reference: it is read only after the submission (an
// argument evaluated in the same call would be read in unspecified order).
rs_status_t blocking(rs_status_t submitted, rs_request_t* const& request) {
  if (submitted != RS_SUCCESS) return submitted;
  return rs_wait(request);
}

CollectiveCall make_call(CollectiveKind kind, const char* name, const void* send, void* recv,
                         size_t count, int dtype, int op, int root) {
  CollectiveCall call;
  call.kind = kind;
  call.name = name;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.root = root;
  return call;
}

}  // namespace

extern "C" {

void rs_config_init(rs_config_t* config) noexcept {
  if (!config) return;
  config->socket_path = nullptr;
  config->job_id = nullptr;
  config->local_rank = -1;
  config->local_size = -1;
  config->connect_timeout_ms = 0;
}

const char* rs_status_string(rs_status_t status) noexcept {
  switch (status) {
    case RS_SUCCESS: return "success";
    case RS_INVALID_ARGUMENT: return "invalid argument";
    case RS_MISMATCH: return "mismatch";
    case RS_PEER_LOST: return "peer lost";
    case RS_TIMEOUT: return "timeout";
    case RS_PROTOCOL_ERROR: return "protocol error";
    case RS_OUT_OF_MEMORY: return "out of memory";
    case RS_CLOSED: return "closed";
    case RS_INTERNAL: return "internal error";
    case RS_IN_PROGRESS: return "in progress";
  }
  return "unknown status";
}

const char* rs_last_error(void) noexcept { return t_last_error.c_str(); }

size_t rs_dtype_size(rs_dtype_t dtype) noexcept {
  const int raw = static_cast<int>(dtype);
  if (raw < 0 || raw >= ringsync::kNumDTypes) return 0;
  return ringsync::dtype_size(static_cast<ringsync::DType>(raw));
}

rs_status_t rs_connect(const rs_config_t* config, rs_context_t** out) noexcept {
  return guarded("rs_connect", [&] {
    if (!out) return invalid("rs_connect", "out is NULL; pass where to store the context");
    *out = nullptr;
    configure_logging_once();
    auto settings = ringsync::client::resolve_settings(
        config, ringsync::client::process_environment(), getuid());
    if (!settings.ok()) return report(settings.status());
    auto context = ringsync::client::Context::connect(*settings);
    if (!context.ok()) return report(context.status());
    *out = new rs_context{std::move(*context)};
    return RS_SUCCESS;
  });
}

void rs_disconnect(rs_context_t* ctx) noexcept {
  guarded("rs_disconnect", [&] {
    delete ctx;
    return RS_SUCCESS;
  });
}

int rs_local_rank(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->local_rank() : -1; }

int rs_local_size(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->local_size() : -1; }
int rs_rank(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->rank() : -1; }
int rs_size(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->size() : -1; }
int rs_node_rank(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->node_rank() : -1; }
int rs_num_nodes(const rs_context_t* ctx) noexcept { return ctx ? ctx->impl->num_nodes() : -1; }

rs_status_t rs_alloc(rs_context_t* ctx, size_t bytes, void** out) noexcept {
  return guarded("rs_alloc", [&] {
    if (!ctx) return invalid("rs_alloc", "ctx is NULL; connect with rs_connect() first");
    if (!out) return invalid("rs_alloc", "out is NULL; pass where to store the address");
    *out = nullptr;
    auto ptr = ctx->impl->alloc(bytes);
    if (!ptr.ok()) return report(ptr.status());
    *out = *ptr;
    return RS_SUCCESS;
  });
}

rs_status_t rs_free(rs_context_t* ctx, void* ptr) noexcept {
  return guarded("rs_free", [&] {
    if (!ptr) return RS_SUCCESS;
    if (!ctx) return invalid("rs_free", "ctx is NULL; pass the context the buffer came from");
    return report(ctx->impl->free(ptr));
  });
}

rs_status_t rs_keep_state(rs_context_t* ctx, const char* name, const void* ptr, size_t bytes) noexcept {
  return guarded("rs_keep_state", [&] {
    if (!ctx) return invalid("rs_keep_state", "ctx is NULL; pass the context from rs_connect()");
    if (!name) return invalid("rs_keep_state", "name is NULL; name the state");
    if (!ptr) return invalid("rs_keep_state", "ptr is NULL; pass a buffer from rs_alloc()");
    return report(ctx->impl->keep_state(name, ptr, bytes));
  });
}

rs_status_t rs_fetch_state(rs_context_t* ctx, const char* name, void** ptr, size_t* bytes) noexcept {
  return guarded("rs_fetch_state", [&] {
    if (!ctx) return invalid("rs_fetch_state", "ctx is NULL; pass the context from rs_connect()");
    if (!name) return invalid("rs_fetch_state", "name is NULL; name the state");
    if (!ptr || !bytes) return invalid("rs_fetch_state", "ptr and bytes must not be NULL; they receive the state");
    *ptr = nullptr;
    *bytes = 0;
    auto fetched = ctx->impl->fetch_state(name);
    if (!fetched.ok()) return report(fetched.status());
    *ptr = fetched->first;
    *bytes = fetched->second;
    return RS_SUCCESS;
  });
}

rs_status_t rs_nodes_waiting(rs_context_t* ctx, int* waiting) noexcept {
  return guarded("rs_nodes_waiting", [&] {
    if (!ctx) return invalid("rs_nodes_waiting", "ctx is NULL; pass the context from rs_connect()");
    if (!waiting) return invalid("rs_nodes_waiting", "waiting is NULL; it receives the count");
    *waiting = 0;
    auto counted = ctx->impl->nodes_waiting();
    if (!counted.ok()) return report(counted.status());
    *waiting = static_cast<int>(*counted);
    return RS_SUCCESS;
  });
}

rs_status_t rs_allreduce_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t count, rs_dtype_t dtype, rs_op_t op,
                               rs_request_t** request) noexcept {
  return submit("rs_allreduce_async", ctx,
                make_call(CollectiveKind::kAllreduce, name, sendbuf, recvbuf, count, dtype, op, 0),
                request);
}

rs_status_t rs_broadcast_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t count, rs_dtype_t dtype, int root,
                               rs_request_t** request) noexcept {
  return submit(
      "rs_broadcast_async", ctx,
      make_call(CollectiveKind::kBroadcast, name, sendbuf, recvbuf, count, dtype, 0, root),
      request);
}

rs_status_t rs_allgather_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                               void* recvbuf, size_t sendcount, rs_dtype_t dtype,
                               rs_request_t** request) noexcept {
  return submit(
      "rs_allgather_async", ctx,
      make_call(CollectiveKind::kAllgather, name, sendbuf, recvbuf, sendcount, dtype, 0, 0),
      request);
}

rs_status_t rs_reduce_scatter_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                                    void* recvbuf, size_t recvcount, rs_dtype_t dtype, rs_op_t op,
                                    rs_request_t** request) noexcept {
  return submit(
      "rs_reduce_scatter_async", ctx,
      make_call(CollectiveKind::kReduceScatter, name, sendbuf, recvbuf, recvcount, dtype, op, 0),
      request);
}

rs_status_t rs_alltoall_async(rs_context_t* ctx, const char* name, const void* sendbuf,
                              void* recvbuf, size_t count, rs_dtype_t dtype,
                              rs_request_t** request) noexcept {
  return submit("rs_alltoall_async", ctx,
                make_call(CollectiveKind::kAlltoall, name, sendbuf, recvbuf, count, dtype, 0, 0),
                request);
}

rs_status_t rs_reduce_async(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                            size_t count, rs_dtype_t dtype, rs_op_t op, int root,
                            rs_request_t** request) noexcept {
  return submit("rs_reduce_async", ctx,
                make_call(CollectiveKind::kReduce, name, sendbuf, recvbuf, count, dtype, op, root), request);
}

rs_status_t rs_gather_async(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                            size_t sendcount, rs_dtype_t dtype, int root, rs_request_t** request) noexcept {
  return submit("rs_gather_async", ctx,
                make_call(CollectiveKind::kGather, name, sendbuf, recvbuf, sendcount, dtype, 0, root), request);
}

rs_status_t rs_scatter_async(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                             size_t recvcount, rs_dtype_t dtype, int root, rs_request_t** request) noexcept {
  return submit("rs_scatter_async", ctx,
                make_call(CollectiveKind::kScatter, name, sendbuf, recvbuf, recvcount, dtype, 0, root), request);
}

rs_status_t rs_barrier_async(rs_context_t* ctx, const char* name, rs_request_t** request) noexcept {
  return submit("rs_barrier_async", ctx,
                make_call(CollectiveKind::kBarrier, name, nullptr, nullptr, 0, 0, 0, 0), request);
}

rs_status_t rs_wait(rs_request_t* request) noexcept { return finish_wait("rs_wait", request, -1); }

rs_status_t rs_wait_timeout(rs_request_t* request, int timeout_ms) noexcept {
  return finish_wait("rs_wait_timeout", request, timeout_ms);
}

rs_status_t rs_test(rs_request_t* request) noexcept {
  return guarded("rs_test", [&] {
    if (!request) return invalid("rs_test", "request is NULL");
    auto status = request->state->test();
    if (!status) return RS_IN_PROGRESS;
    delete request;
    return report(*status);
  });
}

void rs_request_free(rs_request_t* request) noexcept {
  guarded("rs_request_free", [&] {
    if (!request) return RS_SUCCESS;
    request->state->abandon();
    delete request;
    return RS_SUCCESS;
  });
}

rs_status_t rs_register_device(rs_context_t* ctx, const void* ptr, size_t bytes) noexcept {
  return guarded("rs_register_device", [&] {
    if (!ctx) return invalid("rs_register_device", "ctx is NULL; connect with rs_connect() first");
    return report(ctx->impl->register_device(ptr, bytes));
  });
}

rs_status_t rs_unregister_device(rs_context_t* ctx, const void* ptr) noexcept {
  return guarded("rs_unregister_device", [&] {
    if (!ctx)
      return invalid("rs_unregister_device", "ctx is NULL; pass the context it was registered on");
    if (!ptr) return invalid("rs_unregister_device", "ptr is NULL");
    return report(ctx->impl->unregister_device(ptr));
  });
}

rs_status_t rs_set_device_stream(rs_context_t* ctx, void* stream) noexcept {
  return guarded("rs_set_device_stream", [&] {
    if (!ctx)
      return invalid("rs_set_device_stream", "ctx is NULL; connect with rs_connect() first");
    ctx->impl->set_device_stream(stream);
    return RS_SUCCESS;
  });
}

int rs_is_device_pointer(const void* ptr) noexcept {
  int answer = -1;
  const rs_status_t status = guarded("rs_is_device_pointer", [&] {
    auto found = ringsync::client::cuda_driver()->locate(ptr);
    if (!found.ok()) return report(found.status());
    answer = found->has_value() ? 1 : 0;
    return RS_SUCCESS;
  });
  return status == RS_SUCCESS ? answer : -1;
}

rs_status_t rs_allreduce(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                         size_t count, rs_dtype_t dtype, rs_op_t op) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_allreduce_async(ctx, name, sendbuf, recvbuf, count, dtype, op, &request),
                  request);
}

rs_status_t rs_broadcast(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                         size_t count, rs_dtype_t dtype, int root) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_broadcast_async(ctx, name, sendbuf, recvbuf, count, dtype, root, &request),
                  request);
}

rs_status_t rs_allgather(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                         size_t sendcount, rs_dtype_t dtype) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_allgather_async(ctx, name, sendbuf, recvbuf, sendcount, dtype, &request),
                  request);
}

rs_status_t rs_reduce_scatter(rs_context_t* ctx, const char* name, const void* sendbuf,
                              void* recvbuf, size_t recvcount, rs_dtype_t dtype, rs_op_t op) noexcept {
  rs_request_t* request = nullptr;
  return blocking(
      rs_reduce_scatter_async(ctx, name, sendbuf, recvbuf, recvcount, dtype, op, &request), request);
}

rs_status_t rs_alltoall(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf,
                        size_t count, rs_dtype_t dtype) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_alltoall_async(ctx, name, sendbuf, recvbuf, count, dtype, &request), request);
}

rs_status_t rs_reduce(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf, size_t count,
                      rs_dtype_t dtype, rs_op_t op, int root) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_reduce_async(ctx, name, sendbuf, recvbuf, count, dtype, op, root, &request), request);
}

rs_status_t rs_gather(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf, size_t sendcount,
                      rs_dtype_t dtype, int root) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_gather_async(ctx, name, sendbuf, recvbuf, sendcount, dtype, root, &request), request);
}

rs_status_t rs_scatter(rs_context_t* ctx, const char* name, const void* sendbuf, void* recvbuf, size_t recvcount,
                       rs_dtype_t dtype, int root) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_scatter_async(ctx, name, sendbuf, recvbuf, recvcount, dtype, root, &request), request);
}

rs_status_t rs_barrier(rs_context_t* ctx, const char* name) noexcept {
  rs_request_t* request = nullptr;
  return blocking(rs_barrier_async(ctx, name, &request), request);
}

}  // extern "C"
