// _ringsync_torch: the Python face of ProcessGroupRingsync, for
// ringsync/torch/distributed.py (which users never need to see).
//
// The groups are handed to Python as torch's own c10d.ProcessGroup type, as torch's
// c10d extensions do (its Python class for ProcessGroup is registered by
// torch.distributed); what is ringsync-specific goes through the functions below.
#include <cstdint>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>

#include "client/torch/process_group.h"

namespace py = pybind11;

namespace ringsync::torch_backend {
namespace {

using GroupPtr = c10::intrusive_ptr<ProcessGroupRingsync>;

// Every group created, weakly, so that close_all() can close the live ones at exit
// before ringsync.shutdown() disconnects.
std::mutex groups_mutex;
std::vector<c10::weak_intrusive_ptr<ProcessGroupRingsync>> groups;

bool python_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// The group's `release`: calls the Python callable once, with the GIL. While the
// interpreter shuts down it is left alone (and leaked): exit disconnects anyway.
std::function<void()> python_release(py::object callable) {
  auto* held = new py::object(std::move(callable));
  return [held] {
    if (!python_usable()) return;
    py::gil_scoped_acquire gil;
    try {
      (*held)();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("ringsync process group: releasing the connection");
    }
    delete held;
  };
}

ProcessGroupRingsync& ringsync_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto* group = dynamic_cast<ProcessGroupRingsync*>(pg.get());
  TORCH_CHECK(group != nullptr, "not a ringsync process group (backend ",
              pg->getBackendName(), ")");
  return *group;
}

std::chrono::milliseconds millis(double seconds) {
  TORCH_CHECK(seconds >= 0, "drain must be >= 0 seconds, not ", seconds);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

c10::intrusive_ptr<c10d::ProcessGroup> create(std::uintptr_t ctx, int rank, int size,
                                              std::string group_id, py::object release) {
  auto group = c10::make_intrusive<ProcessGroupRingsync>(
      reinterpret_cast<rs_context_t*>(ctx), rank, size, std::move(group_id),
      python_release(std::move(release)));
  std::lock_guard<std::mutex> lock(groups_mutex);
  // Forget the groups that are gone, so the list stays as long as the live ones.
  std::vector<c10::weak_intrusive_ptr<ProcessGroupRingsync>> live;
  for (auto& weak : groups)
    if (!weak.expired()) live.push_back(weak);
  live.emplace_back(group);
  groups.swap(live);
  return group;
}

std::size_t close_all(double drain) {
  std::vector<GroupPtr> live;
  {
    std::lock_guard<std::mutex> lock(groups_mutex);
    for (auto& weak : groups)
      if (auto group = weak.lock()) live.push_back(std::move(group));
    groups.clear();
  }
  std::size_t abandoned = 0;
  for (auto& group : live) abandoned += group->close(millis(drain));
  return abandoned;
}

}  // namespace
}  // namespace ringsync::torch_backend

PYBIND11_MODULE(_ringsync_torch, m) {
  using namespace ringsync::torch_backend;
  m.doc() = "torch.distributed's ringsync backend (see ringsync.torch.distributed)";
  // torch.distributed registers the Python type of c10d::ProcessGroup that create()
  // returns.
  py::module_::import("torch.distributed");

  m.def("create", &create, py::arg("ctx"), py::arg("rank"), py::arg("size"),
        py::arg("group_id"), py::arg("release"),
        "A ringsync process group on the rs_context_t* `ctx` (an int); `release()` is "
        "called once when the group stops using it.");
  m.def(
      "close",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, double drain) {
        return ringsync_group(pg).close(millis(drain));
      },
      py::arg("pg"), py::arg("drain"), py::call_guard<py::gil_scoped_release>(),
      "Closes a ringsync group: no more collectives, up to `drain` seconds for those pending "
      "(the rest fail), then the connection is released. Returns how many were abandoned.");
  m.def("close_all", &close_all, py::arg("drain"), py::call_guard<py::gil_scoped_release>(),
        "close() for every ringsync group still alive.");
  m.def(
      "submitted",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        return ringsync_group(pg).submitted();
      },
      py::arg("pg"), "How many collectives the group has submitted.");
  m.def(
      "rs_rank_address", [] { return reinterpret_cast<std::uintptr_t>(&rs_rank); },
      "The address of rs_rank in the libringsync.so this module uses (to check that the "
      "Python package uses the same one).");
}
