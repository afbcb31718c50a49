// Compilation cache keys and step manifests (step_cache.h).
#include "codegen/cpu/step_cache.h"

#include <elf.h>
#include <fmt/format.h>
#include <link.h>

#include <cstring>
#include <sstream>

#include "codegen/cpu/object_jit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "unknown"
#endif

namespace ingot::codegen::detail {

namespace {

/// The GNU build id (hex) of the loaded object that contains `address`, or "" when it has none.
std::string build_id_of(const void* address) {
  struct Search {
    uintptr_t address;
    std::string id;
  } search{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        bool contains = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) & ph = info->dlpi_phdr[i];
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && s->address >= start && s->address < start + ph.p_memsz) contains = true;
        }
        if (!contains) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) & ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) note;
            std::memcpy(&note, p, sizeof(note));
            const unsigned char* name = p + sizeof(note);
            const unsigned char* desc = name + ((note.n_namesz + 3) & ~3u);
            if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              for (unsigned k = 0; k < note.n_descsz; ++k) s->id += fmt::format("{:02x}", desc[k]);
              return 1;
            }
            p = desc + ((note.n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

std::string hex_digest(llvm::BLAKE3& hasher) {
  const auto digest = hasher.final();
  std::string hex;
  for (uint8_t b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

/// Hashes length-prefixed fields (so no two field lists hash alike by concatenation).
void add_field(llvm::BLAKE3& hasher, std::string_view field) {
  const std::string length = fmt::format("{}:", field.size());
  hasher.update(length);
  hasher.update(llvm::StringRef(field.data(), field.size()));
}

}  // namespace

std::string compiler_version() {
  std::string id = build_id_of(reinterpret_cast<const void*>(&compiler_version));
  if (id.empty()) id = std::string("built ") + __DATE__ " " __TIME__;  // no build id: this file's build time
  return fmt::format("ingot {} ({}); LLVM {}", INGOT_VERSION, id, LLVM_VERSION_STRING);
}

CacheContext cache_context(const CpuCompileOptions& options, const std::vector<PipelineStage>& stages,
                           const std::string& entry) {
  CacheContext c;
  c.version = compiler_version();
  c.target = host_target().key();
  c.options = fmt::format("entry={};opt_level={};", entry, options.opt_level);
  for (const PipelineStage& s : stages) c.options += fmt::format("stage {}={};", s.name, s.pipeline);
  return c;
}

std::string step_key(const CacheContext& context, const std::string& mlir_text) {
  llvm::BLAKE3 hasher;
  for (const std::string* f : {&context.version, &context.target, &context.options, &mlir_text}) add_field(hasher, *f);
  add_field(hasher, "step");
  return hex_digest(hasher);
}

std::string object_key(const CacheContext& context, bool host, std::string_view code, std::string_view lowering) {
  llvm::BLAKE3 hasher;
  // An object depends on the stages only through `code` and `lowering` (the stages still to run
  // on it), so kernels are shared across steps whose earlier stages differ.
  add_field(hasher, context.version);
  add_field(hasher, context.target);
  add_field(hasher, context.options.substr(0, context.options.find("stage ")));
  add_field(hasher, host ? "host" : "kernel");
  add_field(hasher, code);
  if (!lowering.empty()) add_field(hasher, lowering);
  return hex_digest(hasher);
}

std::string StepManifest::serialize() const {
  std::string text = fmt::format("ingot-step-manifest 4\n{} {} {} {} {} {}\nresult_arguments {}", stats.loop_nests,
                                 stats.library_calls, stats.copies, stats.kernel_functions, stats.scope_functions,
                                 stats.peak_alloc_bytes, result_arguments.size());
  for (int64_t a : result_arguments) text += fmt::format(" {}", a);
  text += "\n";
  for (const std::string& key : objects) text += key + "\n";
  return text;
}

std::optional<StepManifest> StepManifest::parse(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  int version = 0;
  StepManifest m;
  if (!(in >> magic >> version) || magic != "ingot-step-manifest" || version != 4) return std::nullopt;
  if (!(in >> m.stats.loop_nests >> m.stats.library_calls >> m.stats.copies >> m.stats.kernel_functions >>
        m.stats.scope_functions >> m.stats.peak_alloc_bytes) ||
      m.stats.peak_alloc_bytes < 0) {
    return std::nullopt;
  }
  std::string field;
  int64_t count = -1;
  if (!(in >> field >> count) || field != "result_arguments" || count < 0 || count > (int64_t{1} << 20)) {
    return std::nullopt;
  }
  m.result_arguments.resize(static_cast<size_t>(count));
  for (int64_t& a : m.result_arguments) {
    if (!(in >> a) || a < -1) return std::nullopt;
  }
  std::string key;
  while (in >> key) m.objects.push_back(key);
  if (m.objects.empty()) return std::nullopt;
  return m;
}

}  // namespace ingot::codegen::detail
