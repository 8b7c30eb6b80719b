// ringsync.hpp — a header-only C++20 wrapper over the C ABI in ringsync.h.
//
// Errors are exceptions at this layer: every call that fails throws
// ringsync::Error, which carries the rs_status_t and the library's message.
// Destructors never throw.
//
//   ringsync::Context ctx;                          // rank, size, socket from the environment
//   auto grads = ctx.alloc<float>(1 << 20);         // shared memory: zero copies
//   ctx.allreduce("grads", grads, RS_AVG);          // in place
//   std::vector<double> loss{local_loss};
//   ctx.allreduce("loss", loss, RS_SUM);            // plain memory works too (bounced)
//   ringsync::Request r = ctx.allgather_async("ids", mine, all);
//   ...
//   r.wait();
//
// Buffers are any contiguous sized range of a supported element type: std::vector,
// std::array, std::span, ringsync::SharedBuffer. A range of another element type
// is a compile error. A std::span over GPU memory (cudaMalloc) works too; see
// "GPU buffers" in ringsync.h for the stream semantics.
//
// Lifetimes: a Context owns its connection together with every SharedBuffer made
// from it; the connection closes when the Context and all those buffers are gone.
// A Request whose destructor runs while the collective is still pending WAITS for
// it (the daemon may still write into the buffers), ignoring its outcome; call
// wait() to see errors, or abandon() to let go without waiting.
#ifndef RINGSYNC_RINGSYNC_HPP
#define RINGSYNC_RINGSYNC_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ringsync/ringsync.h"

namespace ringsync {

// A failed call: the status and the library's message.
class Error : public std::runtime_error {
 public:
  Error(rs_status_t status, const std::string& message)
      : std::runtime_error(std::string("ringsync: ") + rs_status_string(status) + ": " + message),
        status_(status) {}
  rs_status_t status() const noexcept { return status_; }

 private:
  rs_status_t status_;
};

namespace detail {
inline void check(rs_status_t status) {
  if (status != RS_SUCCESS) throw Error(status, rs_last_error());
}
}  // namespace detail

// 16-bit floating-point elements, as raw bits (IEEE binary16 and bfloat16).
struct float16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};

// The rs_dtype_t of an element type.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> : std::integral_constant<rs_dtype_t, RS_F32> {};
template <>
struct dtype_of<double> : std::integral_constant<rs_dtype_t, RS_F64> {};
template <>
struct dtype_of<float16> : std::integral_constant<rs_dtype_t, RS_F16> {};
template <>
struct dtype_of<bfloat16> : std::integral_constant<rs_dtype_t, RS_BF16> {};
template <>
struct dtype_of<std::int32_t> : std::integral_constant<rs_dtype_t, RS_I32> {};
template <>
struct dtype_of<std::int64_t> : std::integral_constant<rs_dtype_t, RS_I64> {};
template <>
struct dtype_of<std::uint8_t> : std::integral_constant<rs_dtype_t, RS_U8> {};

template <typename T>
concept Element = requires {
  dtype_of<std::remove_cv_t<T>>::value;
};

// A contiguous, sized range of elements ringsync can move.
template <typename R>
concept Tensor = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    Element<std::ranges::range_value_t<R>>;

template <Tensor R>
using element_t = std::remove_cv_t<std::ranges::range_value_t<R>>;

// Connection parameters; empty strings and -1 mean "from the environment".
struct Config {
  std::string socket_path;
  std::string job_id;
  int local_rank = -1;
  int local_size = -1;
  std::chrono::milliseconds connect_timeout{0};  // 0: the library's default
};

// An asynchronous collective. Move-only; see the lifetime note at the top
// (assigning over a pending Request waits for it, like destroying it).
class Request {
 public:
  Request() = default;
  explicit Request(rs_request_t* request) noexcept : request_(request) {}
  Request(Request&& other) noexcept : request_(std::exchange(other.request_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      finish_quietly();
      request_ = std::exchange(other.request_, nullptr);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { finish_quietly(); }

  // Whether a collective is still attached (not yet seen complete).
  bool pending() const noexcept { return request_ != nullptr; }

  // Blocks until the collective completes; throws Error if it failed.
  void wait() {
    if (!request_) return;
    detail::check(rs_wait(std::exchange(request_, nullptr)));
  }

  // Waits up to `timeout`: true once complete (throws Error if it failed).
  bool wait_for(std::chrono::milliseconds timeout) {
    if (!request_) return true;
    const rs_status_t s = rs_wait_timeout(request_, static_cast<int>(timeout.count()));
    if (s == RS_IN_PROGRESS) return false;
    request_ = nullptr;
    detail::check(s);
    return true;
  }

  // Never blocks: true once complete (throws Error if it failed).
  bool test() {
    if (!request_) return true;
    const rs_status_t s = rs_test(request_);
    if (s == RS_IN_PROGRESS) return false;
    request_ = nullptr;
    detail::check(s);
    return true;
  }

  // Lets go without waiting (rs_request_free): the buffers stay off limits until
  // a later collective completes, and a bounced result is discarded.
  void abandon() noexcept { rs_request_free(std::exchange(request_, nullptr)); }

 private:
  void finish_quietly() noexcept {
    if (request_) rs_wait(std::exchange(request_, nullptr));
  }
  rs_request_t* request_ = nullptr;
};

// `count` elements of shared memory from the daemon (rs_alloc / rs_free).
// Collectives on it move no bytes through the trainer. Move-only.
template <Element T>
class SharedBuffer {
 public:
  SharedBuffer() = default;
  // An empty buffer for count 0.
  SharedBuffer(std::shared_ptr<rs_context_t> ctx, std::size_t count) : ctx_(std::move(ctx)) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (count == 0) return;
    if (count > SIZE_MAX / sizeof(T))
      throw Error(RS_INVALID_ARGUMENT,
                  std::to_string(count) + " elements overflow the address space");
    void* p = nullptr;
    detail::check(rs_alloc(ctx_.get(), count * sizeof(T), &p));
    data_ = static_cast<T*>(p);
    size_ = count;
  }
  SharedBuffer(SharedBuffer&& other) noexcept
      : ctx_(std::move(other.ctx_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  SharedBuffer& operator=(SharedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      ctx_ = std::move(other.ctx_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  // Frees the buffer; a pending request must not use it any more (wait first).
  ~SharedBuffer() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + size_; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }
  std::span<T> span() const noexcept { return {data_, size_}; }

 private:
  void release() noexcept {
    if (data_) rs_free(ctx_.get(), data_);
    data_ = nullptr;
    size_ = 0;
    ctx_.reset();
  }
  std::shared_ptr<rs_context_t> ctx_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Whether ptr points into GPU memory collectives would register (rs_is_device_pointer).
inline bool is_device_pointer(const void* ptr) {
  const int answer = rs_is_device_pointer(ptr);
  if (answer < 0) throw Error(RS_INVALID_ARGUMENT, rs_last_error());
  return answer == 1;
}

// A connection to the node's ringsyncd (rs_connect / rs_disconnect). Move-only.
class Context {
 public:
  explicit Context(const Config& config = {}) {
    rs_config_t c;
    rs_config_init(&c);
    c.socket_path = config.socket_path.empty() ? nullptr : config.socket_path.c_str();
    c.job_id = config.job_id.empty() ? nullptr : config.job_id.c_str();
    c.local_rank = config.local_rank;
    c.local_size = config.local_size;
    c.connect_timeout_ms = static_cast<int>(config.connect_timeout.count());
    rs_context_t* raw = nullptr;
    detail::check(rs_connect(&c, &raw));
    ctx_.reset(raw, rs_disconnect);
  }
  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) noexcept = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  rs_context_t* get() const noexcept { return ctx_.get(); }
  int local_rank() const noexcept { return rs_local_rank(ctx_.get()); }
  int local_size() const noexcept { return rs_local_size(ctx_.get()); }
  int rank() const noexcept { return rs_rank(ctx_.get()); }
  int size() const noexcept { return rs_size(ctx_.get()); }
  int node_rank() const noexcept { return rs_node_rank(ctx_.get()); }
  int num_nodes() const noexcept { return rs_num_nodes(ctx_.get()); }

  template <Element T>
  SharedBuffer<T> alloc(std::size_t count) {
    return SharedBuffer<T>(ctx_, count);
  }

  // Allreduce: recv = op over every rank's send. Sizes must match.
  template <Tensor S, Tensor R>
  Request allreduce_async(const std::string& name, const S& send, R&& recv, rs_op_t op = RS_SUM) {
    same_element<S, R>();
    expect_size(name, std::ranges::size(recv), std::ranges::size(send), "recv");
    rs_request_t* r = nullptr;
    detail::check(rs_allreduce_async(ctx_.get(), name.c_str(), std::ranges::data(send),
                                     std::ranges::data(recv), std::ranges::size(send),
                                     dtype_of<element_t<S>>::value, op, &r));
    return Request(r);
  }
  template <Tensor S, Tensor R>
  void allreduce(const std::string& name, const S& send, R&& recv, rs_op_t op = RS_SUM) {
    allreduce_async(name, send, recv, op).wait();
  }
  // In place.
  template <Tensor D>
  Request allreduce_async(const std::string& name, D&& data, rs_op_t op = RS_SUM) {
    return allreduce_async(name, data, data, op);
  }
  template <Tensor D>
  void allreduce(const std::string& name, D&& data, rs_op_t op = RS_SUM) {
    allreduce_async(name, data, data, op).wait();
  }

  // Broadcast in place: every rank's `data` receives root's `data`.
  template <Tensor D>
  Request broadcast_async(const std::string& name, D&& data, int root) {
    rs_request_t* r = nullptr;
    detail::check(rs_broadcast_async(ctx_.get(), name.c_str(), std::ranges::data(data),
                                     std::ranges::data(data), std::ranges::size(data),
                                     dtype_of<element_t<D>>::value, root, &r));
    return Request(r);
  }
  template <Tensor D>
  void broadcast(const std::string& name, D&& data, int root) {
    broadcast_async(name, data, root).wait();
  }

  // Allgather: recv (send.size() * size() elements) receives every rank's
  // send in rank order.
  template <Tensor S, Tensor R>
  Request allgather_async(const std::string& name, const S& send, R&& recv) {
    same_element<S, R>();
    expect_size(name, std::ranges::size(recv),
                std::ranges::size(send) * static_cast<std::size_t>(size()), "recv");
    rs_request_t* r = nullptr;
    detail::check(rs_allgather_async(ctx_.get(), name.c_str(), std::ranges::data(send),
                                     std::ranges::data(recv), std::ranges::size(send),
                                     dtype_of<element_t<S>>::value, &r));
    return Request(r);
  }
  template <Tensor S, Tensor R>
  void allgather(const std::string& name, const S& send, R&& recv) {
    allgather_async(name, send, recv).wait();
  }

  // Reduce-scatter: send holds recv.size() * size() elements; recv receives op
  // over every rank's block rank() of send.
  template <Tensor S, Tensor R>
  Request reduce_scatter_async(const std::string& name, const S& send, R&& recv, rs_op_t op = RS_SUM) {
    same_element<S, R>();
    expect_size(name, std::ranges::size(send),
                std::ranges::size(recv) * static_cast<std::size_t>(size()), "send");
    rs_request_t* r = nullptr;
    detail::check(rs_reduce_scatter_async(ctx_.get(), name.c_str(), std::ranges::data(send),
                                          std::ranges::data(recv), std::ranges::size(recv),
                                          dtype_of<element_t<S>>::value, op, &r));
    return Request(r);
  }
  template <Tensor S, Tensor R>
  void reduce_scatter(const std::string& name, const S& send, R&& recv, rs_op_t op = RS_SUM) {
    reduce_scatter_async(name, send, recv, op).wait();
  }

  // Alltoall: send and recv hold size() blocks of equal size; block j of send
  // goes to rank j, block i of recv comes from rank i. Not in place.
  template <Tensor S, Tensor R>
  Request alltoall_async(const std::string& name, const S& send, R&& recv) {
    same_element<S, R>();
    expect_size(name, std::ranges::size(recv), std::ranges::size(send), "recv");
    const auto ranks = static_cast<std::size_t>(size());
    if (std::ranges::size(send) % ranks != 0)
      throw Error(RS_INVALID_ARGUMENT, "alltoall '" + name + "': " + std::to_string(std::ranges::size(send)) +
                                           " elements do not split into " + std::to_string(ranks) +
                                           " equal blocks, one per rank");
    rs_request_t* r = nullptr;
    detail::check(rs_alltoall_async(ctx_.get(), name.c_str(), std::ranges::data(send),
                                    std::ranges::data(recv), std::ranges::size(send) / ranks,
                                    dtype_of<element_t<S>>::value, &r));
    return Request(r);
  }
  template <Tensor S, Tensor R>
  void alltoall(const std::string& name, const S& send, R&& recv) {
    alltoall_async(name, send, recv).wait();
  }

  Request barrier_async(const std::string& name) {
    rs_request_t* r = nullptr;
    detail::check(rs_barrier_async(ctx_.get(), name.c_str(), &r));
    return Request(r);
  }
  void barrier(const std::string& name) { barrier_async(name).wait(); }

  // GPU memory (see ringsync.h): register the allocation holding `data` up front,
  // forget it (before cudaFree), and choose the stream submissions wait for.
  template <Tensor D>
  void register_device(const D& data) {
    detail::check(rs_register_device(ctx_.get(), std::ranges::data(data),
                                     std::ranges::size(data) * sizeof(element_t<D>)));
  }
  void unregister_device(const void* ptr) { detail::check(rs_unregister_device(ctx_.get(), ptr)); }
  void set_device_stream(void* stream) { detail::check(rs_set_device_stream(ctx_.get(), stream)); }

  // Committed state the daemon keeps for this rank (rs_keep_state / rs_fetch_state):
  // keep_state copies `bytes` into a new shared buffer the daemon then holds;
  // fetch_state returns what is kept (empty when nothing is).
  void keep_state(const std::string& name, std::span<const std::byte> bytes) {
    SharedBuffer<std::uint8_t> buffer(ctx_, bytes.size());
    std::memcpy(buffer.data(), bytes.data(), bytes.size());
    detail::check(rs_keep_state(ctx_.get(), name.c_str(), buffer.data(), bytes.size()));
  }
  // Nodes waiting to join the job's next run (rs_nodes_waiting; elastic jobs).
  int nodes_waiting() {
    int waiting = 0;
    detail::check(rs_nodes_waiting(ctx_.get(), &waiting));
    return waiting;
  }
  std::vector<std::byte> fetch_state(const std::string& name) {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    detail::check(rs_fetch_state(ctx_.get(), name.c_str(), &ptr, &bytes));
    if (ptr == nullptr) return {};
    const auto* first = static_cast<const std::byte*>(ptr);
    std::vector<std::byte> state(first, first + bytes);
    rs_free(ctx_.get(), ptr);
    return state;
  }

 private:
  template <typename S, typename R>
  static constexpr void same_element() {
    static_assert(std::is_same_v<element_t<S>, element_t<R>>,
                  "send and recv must hold the same element type");
  }
  static void expect_size(const std::string& name, std::size_t actual, std::size_t expected,
                          const char* what) {
    if (actual != expected)
      throw Error(RS_INVALID_ARGUMENT, "'" + name + "': " + what + " holds " +
                                           std::to_string(actual) + " elements, expected " +
                                           std::to_string(expected));
  }

  std::shared_ptr<rs_context_t> ctx_;
};

}  // namespace ringsync

#endif  // RINGSYNC_RINGSYNC_HPP
