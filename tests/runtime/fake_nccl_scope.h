// The fake NCCL module (tests/runtime/fake_nccl.cpp) for a test: loaded by path as the NcclLibrary,
// with the fake driver's cuStreamSynchronize installed as its stream synchronisation.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <string>

#include "fake_cuda_driver.h"
#include "fake_nccl.h"
#include "ingot/runtime/nccl.h"

namespace ingot::testing {

/// The fake NCCL at `path` (the build's INGOT_FAKE_NCCL), ready for fake CUDA devices. Needs a
/// FakeCudaScope alive while collectives run.
class FakeNcclScope {
 public:
  explicit FakeNcclScope(const std::string& path, double timeout_seconds = 30.0)
      : library_(NcclLibrary::load(path)), module_(dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    if (module_ == nullptr) return;
    sym<void (*)(IngotFakeNcclStreamSync)>("ingot_fake_nccl_set_stream_sync")(
        +[](void* stream) { return fake_cuda::cuStreamSynchronize(static_cast<CUstream_st*>(stream)); });
    sym<void (*)(double)>("ingot_fake_nccl_set_timeout")(timeout_seconds);
    sym<void (*)()>("ingot_fake_nccl_reset_log")();
  }
  ~FakeNcclScope() {
    if (module_ != nullptr) dlclose(module_);
  }
  FakeNcclScope(const FakeNcclScope&) = delete;
  FakeNcclScope& operator=(const FakeNcclScope&) = delete;

  /// Whether the module loaded and resolved (else library()->unavailable_reason() says why).
  bool ok() const { return module_ != nullptr && library_->available(); }
  const std::shared_ptr<NcclLibrary>& library() const { return library_; }
  /// What the fake saw since this scope began.
  const FakeNcclLog& log() const { return *sym<const FakeNcclLog* (*)()>("ingot_fake_nccl_log")(); }

 private:
  template <class F>
  F sym(const char* name) const {
    return reinterpret_cast<F>(dlsym(module_, name));
  }
  std::shared_ptr<NcclLibrary> library_;
  void* module_;
};

}  // namespace ingot::testing
