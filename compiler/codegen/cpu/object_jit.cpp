// Split, parallel object compilation and linking of the CPU back end (object_jit.h).
#include "codegen/cpu/object_jit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "ingot/runtime/error.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace ingot::codegen::detail {

namespace {

[[noreturn]] void llvm_fail(const std::string& what, llvm::Error error) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("LLVM {} failed: {}", what, llvm::toString(std::move(error))),
              "this is a bug in ingot's CPU back end when the MLIR stages succeeded: report it with the IR "
              "dump (CpuCompileOptions::dump_dir)");
}

/// Adds to `out` the local globals `root` references, transitively (functions' instructions and
/// global variables' initialisers, through constant expressions).
void collect_locals(const llvm::GlobalValue* root, std::set<const llvm::GlobalValue*>& out) {
  std::vector<const llvm::GlobalValue*> work = {root};
  std::set<const llvm::Constant*> seen_constants;
  auto visit = [&](const llvm::Value* v, auto& self) -> void {
    if (const auto* gv = llvm::dyn_cast<llvm::GlobalValue>(v)) {
      // Local definitions and every global variable travel with their users; external
      // functions (kernels, library calls) are called by name.
      const bool travels = gv->hasLocalLinkage() || llvm::isa<llvm::GlobalVariable>(gv);
      if (travels && !gv->isDeclaration() && out.insert(gv).second) work.push_back(gv);
      return;
    }
    const auto* c = llvm::dyn_cast<llvm::Constant>(v);
    if (c == nullptr || !seen_constants.insert(c).second) return;
    for (const llvm::Use& op : c->operands()) self(op.get(), self);
  };
  out.insert(root);
  while (!work.empty()) {
    const llvm::GlobalValue* gv = work.back();
    work.pop_back();
    if (const auto* f = llvm::dyn_cast<llvm::Function>(gv)) {
      for (const llvm::BasicBlock& bb : *f) {
        for (const llvm::Instruction& inst : bb) {
          for (const llvm::Use& op : inst.operands()) visit(op.get(), visit);
        }
      }
    } else if (const auto* var = llvm::dyn_cast<llvm::GlobalVariable>(gv); var != nullptr && var->hasInitializer()) {
      visit(var->getInitializer(), visit);
    }
  }
}

/// A copy of `module` with the definitions in `keep` (others become declarations; unused
/// declarations dropped) as bitcode. Global variables are made internal in the copy: each part
/// has its own (they are constants: MLIR's memref.global constants, OpenMP's location records).
std::string part_bitcode(const llvm::Module& module, const std::set<const llvm::GlobalValue*>& keep) {
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> part =
      llvm::CloneModule(module, map, [&](const llvm::GlobalValue* gv) { return keep.count(gv) != 0; });
  for (llvm::GlobalVariable& var : part->globals()) {
    if (!var.isDeclaration()) var.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (llvm::Function& f : llvm::make_early_inc_range(part->functions())) {
    if (f.isDeclaration() && f.use_empty()) f.eraseFromParent();
  }
  for (llvm::GlobalVariable& var : llvm::make_early_inc_range(part->globals())) {
    if (var.isDeclaration() && var.use_empty()) var.eraseFromParent();
  }
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*part, os);
  os.flush();
  return bitcode;
}

std::unique_ptr<llvm::TargetMachine> host_machine(llvm::CodeGenOptLevel level) {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) llvm_fail("host detection", builder.takeError());
  builder->setCodeGenOptLevel(level);
  auto tm = builder->createTargetMachine();
  if (!tm) llvm_fail("target machine creation", tm.takeError());
  return std::move(*tm);
}

/// The host part's only IR optimisation: always-inline puts the step's entry and its C interface
/// into the packed entry (add_packed_entry; the host part's instruction selection on the 4-block
/// LM: 0.30 -> 0.12-0.20 s), instsimplify folds each extractvalue of an insertvalue
/// chain (MLIR's memref descriptors: the 4-block LM's entry had 20k extractvalue and 7.6k
/// insertvalue, 2.8k left after it) and dce drops the dead insertvalues. Instruction selection at
/// -O0 then takes 0.33 s instead of 0.79 s on that entry (llc-22, znver4).
llvm::Error simplify_host(llvm::Module* module) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder;
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (llvm::Error e = builder.parsePassPipeline(mpm, "always-inline,function(instsimplify,dce)")) return e;
  mpm.run(*module, mam);
  return llvm::Error::success();
}

/// LLVM's default -O<level> pipeline for a kernel part, tuned for `tm`'s CPU (what MLIR's
/// makeOptimizingTransformer builds; the tuning options are spelled out here: unrolling,
/// interleaving, loop and SLP vectorisation on, as clang -O2/-O3).
llvm::Error optimize_kernel(llvm::Module* module, llvm::TargetMachine* tm, int level) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = level > 1;
  tuning.SLPVectorization = level > 1;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(tm, tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  const std::array<llvm::OptimizationLevel, 4> kLevels = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                          llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  const llvm::OptimizationLevel o = kLevels[static_cast<size_t>(std::clamp(level, 0, 3))];
  llvm::ModulePassManager mpm =
      level <= 0 ? builder.buildO0DefaultPipeline(o) : builder.buildPerModuleDefaultPipeline(o);
  mpm.run(*module, mam);
  return llvm::Error::success();
}

/// Optimises `module` with `optimize` and compiles it to an ELF object with `tm` (used by one
/// thread at a time).
std::string compile_module(llvm::Module& module, const std::string& name, llvm::TargetMachine& tm,
                           const std::function<llvm::Error(llvm::Module*)>& optimize) {
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple());
  if (llvm::Error e = optimize(&module)) llvm_fail(fmt::format("optimisation of '{}'", name), std::move(e));
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    throw Error(ErrorCode::kInternal, fmt::format("LLVM: the host target cannot emit object files for '{}'", name));
  }
  pm.run(module);
  return std::string(object.begin(), object.end());
}

}  // namespace

HostTarget host_target() {
  HostTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> features;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) features.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(features.begin(), features.end());
  for (const std::string& f : features) t.features += (t.features.empty() ? "" : ",") + f;
  return t;
}

std::vector<ModulePart> split_module(llvm::Module& module, const std::string& kernel_prefix) {
  // Constructors and the like, or a global that is not constant (state the entry and the kernels
  // would each get a copy of): keep the module whole.
  bool appending = false;
  for (const llvm::GlobalVariable& var : module.globals()) {
    appending |= var.hasAppendingLinkage() || (!var.isDeclaration() && !var.isConstant());
  }
  std::vector<const llvm::Function*> kernels;
  std::set<const llvm::GlobalValue*> host;
  for (const llvm::Function& f : module) {
    if (f.isDeclaration() || f.hasLocalLinkage()) continue;
    if (!appending && f.getName().starts_with(kernel_prefix)) {
      kernels.push_back(&f);
    } else {
      collect_locals(&f, host);
    }
  }
  std::vector<ModulePart> parts;
  if (appending) {
    for (const llvm::GlobalVariable& var : module.globals()) host.insert(&var);
    for (const llvm::Function& f : module) host.insert(&f);
  }
  // Without kernels the host part is the whole step, loops included: optimised like a kernel.
  parts.push_back({"host", part_bitcode(module, host), !kernels.empty()});
  for (const llvm::Function* k : kernels) {
    std::set<const llvm::GlobalValue*> keep;
    collect_locals(k, keep);
    parts.push_back({k->getName().str(), part_bitcode(module, keep), false});
  }
  return parts;
}

ObjectCompiler::ObjectCompiler(int opt_level)
    : opt_level_(opt_level),
      // Kernels: -O<opt_level>; LLVM's aggressive code generator at -O3, its default one below.
      kernel_tm_(host_machine(opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive : llvm::CodeGenOptLevel::Default)) {}

ObjectCompiler::~ObjectCompiler() = default;

std::string ObjectCompiler::compile(llvm::Module& module, bool host, const std::string& name) {
  if (!host) {
    return compile_module(module, name, *kernel_tm_,
                          [&](llvm::Module* m) { return optimize_kernel(m, kernel_tm_.get(), opt_level_); });
  }
  // The host part runs once per step and has no loops: no -O pipeline (-O0 measured 1.0 s faster
  // than -O3 on the 4-block LM's entry, bench/results/2026-12-01-compile-time.md), only
  // simplify_host, and the fast instruction selector (the LM's entry has thousands of calls in one
  // block, where the default selector's cost grows fastest).
  if (!host_tm_) host_tm_ = host_machine(llvm::CodeGenOptLevel::None);
  return compile_module(module, name, *host_tm_, simplify_host);
}

size_t parallel_threads(size_t jobs, int threads) {
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max<size_t>(1, std::min(jobs, static_cast<size_t>(threads > 0 ? threads : hw)));
}

void run_parallel(size_t jobs, int threads, const std::function<void(size_t, size_t)>& job,
                  const std::function<void(int64_t, int64_t)>& progress) {
  const size_t n_threads = parallel_threads(jobs, threads);
  std::atomic<size_t> next{0};
  std::mutex mutex;  // guards done, first_error and the progress callback
  int64_t done = 0;
  std::exception_ptr first_error;
  auto worker = [&](size_t thread) {
    try {
      for (size_t i = next++; i < jobs; i = next++) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (first_error) return;
        }
        job(i, thread);
        std::lock_guard<std::mutex> lock(mutex);
        ++done;
        if (progress) progress(done, static_cast<int64_t>(jobs));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(n_threads);
  for (size_t t = 1; t < n_threads; ++t) {
    try {
      pool.emplace_back(worker, t);
    } catch (const std::system_error&) {
      break;  // no more threads to be had (a thread or address-space limit): fewer threads do the jobs
    }
  }
  worker(0);
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

std::vector<std::string> compile_objects(const std::vector<ModulePart>& parts, const ObjectCompileOptions& options) {
  std::vector<std::string> objects(parts.size());
  std::vector<std::unique_ptr<ObjectCompiler>> compilers(parallel_threads(parts.size(), options.threads));
  run_parallel(
      parts.size(), options.threads,
      [&](size_t i, size_t thread) {
        if (!compilers[thread]) compilers[thread] = std::make_unique<ObjectCompiler>(options.opt_level);
        llvm::LLVMContext ctx;
        auto module = llvm::parseBitcodeFile(llvm::MemoryBufferRef(parts[i].bitcode, parts[i].name), ctx);
        if (!module) llvm_fail(fmt::format("reading part '{}'", parts[i].name), module.takeError());
        objects[i] = compilers[thread]->compile(**module, parts[i].host, parts[i].name);
      },
      options.progress);
  return objects;
}

LinkedObjects::~LinkedObjects() = default;

void* LinkedObjects::lookup(const std::string& symbol) {
  auto address = jit_->lookup(symbol);
  if (!address) llvm_fail(fmt::format("lookup of '{}'", symbol), address.takeError());
  return address->toPtr<void*>();
}

std::unique_ptr<LinkedObjects> LinkedObjects::link(const std::vector<std::string>& objects,
                                                   const std::vector<std::pair<std::string, void*>>& symbols,
                                                   const std::vector<std::string>& runtime_libraries,
                                                   bool perf_jitdump) {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) llvm_fail("host detection", builder.takeError());
  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(std::move(*builder))
          .setObjectLinkingLayerCreator([perf_jitdump](llvm::orc::ExecutionSession& session)
                                            -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
            auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                session, [](const llvm::MemoryBuffer&) { return std::make_unique<llvm::SectionMemoryManager>(); });
            if (perf_jitdump) {
              if (llvm::JITEventListener* perf = llvm::JITEventListener::createPerfJITEventListener()) {
                layer->registerJITEventListener(*perf);
              }
            }
            return layer;
          })
          .create();
  if (!jit) llvm_fail("JIT creation", jit.takeError());
  llvm::orc::JITDylib& lib = (*jit)->getMainJITDylib();
  llvm::orc::SymbolMap map;
  for (const auto& [name, address] : symbols) {
    map[(*jit)->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address), llvm::JITSymbolFlags::Exported};
  }
  if (llvm::Error e = lib.define(llvm::orc::absoluteSymbols(std::move(map))))
    llvm_fail("symbol definition", std::move(e));
  const char prefix = (*jit)->getDataLayout().getGlobalPrefix();
  for (const std::string& path : runtime_libraries) {
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(path.c_str(), prefix);
    if (!generator) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("CpuCompileOptions::runtime_libraries: cannot load '{}': {}", path,
                              llvm::toString(generator.takeError())),
                  "install the package that provides it (scripts/install-deps.sh) or fix the path");
    }
    lib.addGenerator(std::move(*generator));
  }
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process) llvm_fail("process symbol search", process.takeError());
  lib.addGenerator(std::move(*process));
  for (size_t i = 0; i < objects.size(); ++i) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(objects[i], fmt::format("ingot-object-{}", i));
    if (llvm::Error e = (*jit)->addObjectFile(std::move(buffer)))
      llvm_fail(fmt::format("adding object {}", i), std::move(e));
  }
  std::unique_ptr<LinkedObjects> linked(new LinkedObjects());
  linked->jit_ = std::move(*jit);
  return linked;
}

void add_packed_entry(llvm::Module& module, const std::string& entry) {
  llvm::Function* ciface = module.getFunction("_mlir_ciface_" + entry);
  if (ciface == nullptr || !ciface->getReturnType()->isVoidTy()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the compiled module has no function '_mlir_ciface_{}' returning nothing", entry),
                "the entry function needs the attribute llvm.emit_c_interface and results as out-params "
                "(the default pipeline's bufferize stage)");
  }
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  auto* packed = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false),
                                        llvm::GlobalValue::ExternalLinkage, "ingot_packed_" + entry, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", packed));
  std::vector<llvm::Value*> args;
  for (unsigned i = 0; i < ciface->arg_size(); ++i) {
    llvm::Value* slot = b.CreateConstGEP1_64(ptr, packed->getArg(0), i);
    llvm::Value* storage = b.CreateLoad(ptr, slot);
    args.push_back(b.CreateLoad(ciface->getFunctionType()->getParamType(i), storage));
  }
  b.CreateCall(ciface, args);
  b.CreateRetVoid();
  for (llvm::Function* f : {ciface, module.getFunction(entry)}) {
    if (f == nullptr || f->isDeclaration()) continue;
    f->setLinkage(llvm::GlobalValue::InternalLinkage);
    f->addFnAttr(llvm::Attribute::AlwaysInline);
  }
}

}  // namespace ingot::codegen::detail
