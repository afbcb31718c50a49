#!/usr/bin/env bash
# Builds the self-contained GPU check bundle (docs/building.md, "The GPU check bundle").
#
#   tools/make_gpu_bundle.sh [--no-build]
#
# From the repository root (any working directory is fine): configures and builds the
# `gpu-bundle` CMake preset (-j2), copies the stripped multi-call executable `gpu_tests` into
# gpu_bundle/bin (with bin/ingot, a symbolic link to it: the `ingot` command line), every shared
# library it still loads (except glibc's and the CUDA driver/libraries, which the GPU machine
# provides) into gpu_bundle/lib and the Fashion-MNIST IDX files, decompressed (xz packs them
# better than their gzip), into gpu_bundle/data/fashion-mnist (from $FASHION_MNIST_DIR, default
# /usr/share/datasets/fashion-mnist; left out with a warning when missing), libdevice.10.bc into
# gpu_bundle/share/ingot (find_libdevice's last place), checks with ldd that
# nothing else is needed, writes gpu_bundle/MANIFEST.txt and packs gpu_bundle.tar.xz (xz -9).
# Both outputs are git-ignored.
# Prints the sizes; exits 1 when the archive is over 60 MiB (the GPU machine takes 64 MiB in all)
# or when a binary needs a library that is neither bundled nor part of glibc.
#   --no-build   repack from the existing build/gpu-bundle (no cmake run).
set -euo pipefail

readonly LIMIT_MIB=60
# The executables the GPU check runs: build-tree path relative to build/gpu-bundle. One binary,
# gpu_tests = the `runtime`, `ptx` and `gpu` suites and, invoked as `ingot`, the command line
# (cmake/gpu_bundle.cmake): ~100 MiB stripped, ~19 MiB compressed; a second executable would
# carry MLIR/LLVM again and not fit beside the data.
readonly BINARIES=(gpu_tests)
readonly DATA_SRC=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
readonly DATA_FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
# Libraries the GPU machine's own system provides (glibc) ...
readonly SYSTEM_LIBS='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1)$'
# ... and its CUDA install (dlopen'ed at run time; must never be bundled).
readonly CUDA_LIBS='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc)\.so'

build=1
case "${1:-}" in
  "") ;;
  --no-build) build=0 ;;
  *) echo "make_gpu_bundle.sh: unknown argument '$1' (expected nothing or --no-build)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
readonly BUILD_DIR=build/gpu-bundle
readonly OUT=gpu_bundle
readonly ARCHIVE=gpu_bundle.tar.xz

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

build_s=0
if [[ $build == 1 ]]; then
  start=$(date +%s)
  cmake --preset gpu-bundle
  cmake --build --preset gpu-bundle -j2
  build_s=$(($(date +%s) - start))
fi
for bin in "${BINARIES[@]}"; do
  [[ -x $BUILD_DIR/$bin ]] || { echo "make_gpu_bundle.sh: $BUILD_DIR/$bin missing; run without --no-build" >&2; exit 1; }
done

rm -rf "$OUT" "$ARCHIVE"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/data" "$OUT/share"

# Copies the shared libraries `ldd` resolves for $1 (on this machine) into lib/, named by soname.
copy_libs() {
  local name path
  while read -r name _ path _; do
    [[ $name =~ $SYSTEM_LIBS ]] && continue
    if [[ $name =~ $CUDA_LIBS ]]; then
      echo "make_gpu_bundle.sh: $1 links $name at load time; the CUDA libraries must be dlopen'ed" >&2
      exit 1
    fi
    if [[ $path == "not" ]]; then
      echo "make_gpu_bundle.sh: $1 needs $name, which is not found on this machine" >&2
      exit 1
    fi
    [[ -e $OUT/lib/$name ]] || cp -L "$path" "$OUT/lib/$name"
  done < <(ldd "$1" | grep '=>')
}

for bin in "${BINARIES[@]}"; do
  copy_libs "$BUILD_DIR/$bin"
  cp "$BUILD_DIR/$bin" "$OUT/bin/"
  strip --strip-all "$OUT/bin/$(basename "$bin")"
done
ln -s gpu_tests "$OUT/bin/ingot"
chmod u+w "$OUT"/lib/*
strip --strip-unneeded "$OUT"/lib/*

# The data of the GPU training run (tools/gpu_check.sh), decompressed.
if [[ -f $DATA_SRC/${DATA_FILES[0]}.gz ]]; then
  mkdir -p "$OUT/data/fashion-mnist"
  for f in "${DATA_FILES[@]}"; do
    gzip -dc "$DATA_SRC/$f.gz" > "$OUT/data/fashion-mnist/$f"
  done
else
  echo "make_gpu_bundle.sh: warning: no Fashion-MNIST in $DATA_SRC; the bundle has no data (the GPU training run will be skipped)" >&2
fi
# libdevice, where find_libdevice looks beside the executable (bin/../share/ingot), in case the
# GPU machine's CUDA install lacks nvvm/ (a driver-only or pip-wheel install).
readonly LIBDEVICE=/usr/local/cuda/nvvm/libdevice/libdevice.10.bc
if [[ -f $LIBDEVICE ]]; then
  mkdir -p "$OUT/share/ingot"
  cp "$LIBDEVICE" "$OUT/share/ingot/"
else
  echo "make_gpu_bundle.sh: warning: no $LIBDEVICE; the bundle carries no libdevice" >&2
fi
# The text the benchmark's LM trains on (ingot bench --lm-text): the GPU machine may lack base-files.
if [[ -f /usr/share/common-licenses/GPL-3 ]]; then cp /usr/share/common-licenses/GPL-3 "$OUT/data/GPL-3"; fi

# The check the GPU machine relies on: each bundled binary resolves every library either to the
# bundle's lib/ (through its RPATH $ORIGIN/../lib) or to glibc.
ldd_report=$OUT/LDD.txt
: > "$ldd_report"
bad=0
for bin in "$OUT"/bin/*; do
  [[ -L $bin ]] && continue  # bin/ingot: the same file as gpu_tests
  echo "== $(basename "$bin")" >> "$ldd_report"
  while read -r name _ path _; do
    if [[ $name =~ $SYSTEM_LIBS ]]; then
      echo "   system  $name => $path" >> "$ldd_report"
    elif [[ $path != "not" && $(realpath "$path") == "$(realpath "$OUT/lib")/"* ]]; then
      echo "   bundled $name" >> "$ldd_report"
    else
      echo "   OUTSIDE $name => $path" >> "$ldd_report"
      bad=1
    fi
  done < <(ldd "$bin" | grep '=>')
done
cat "$ldd_report"
if [[ $bad == 1 ]]; then
  echo "make_gpu_bundle.sh: a bundled binary loads a library from outside the bundle (see OUTSIDE above)" >&2
  exit 1
fi

# The newest glibc symbol version any bundled file needs: the GPU machine's glibc must be at least
# this recent.
glibc=$(objdump -T "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
{
  echo "ingot GPU check bundle"
  echo "commit:  $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!gpu_bundle' 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built:   $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(ldd --version | head -1)"
  echo "needs:   $glibc or newer, x86-64, /usr/local/cuda/bin/ptxas for the ptx suite"
  echo "run:     tools/gpu_check.sh OUT_DIR (from the repository root)"
  echo "files:"
  (cd "$OUT" && find bin lib data share -type f -printf '  %-40p %s bytes\n' | sort)
  (cd "$OUT" && find bin -type l -printf '  %-40p -> %l\n')
} > "$OUT/MANIFEST.txt"

xz_start=$(date +%s)
tar -cf - "$OUT" | xz -9 -T1 > "$ARCHIVE"
xz_s=$(($(date +%s) - xz_start))

bytes_bin=$(du -cb "$OUT"/bin/gpu_tests | tail -1 | cut -f1)
bytes_lib=$(du -cb "$OUT"/lib/* | tail -1 | cut -f1)
bytes_xz=$(stat -c %s "$ARCHIVE")
echo
cat "$OUT/MANIFEST.txt"
echo
echo "binaries (stripped): $(mib "$bytes_bin")"
echo "libraries:           $(mib "$bytes_lib")"
echo "uncompressed total:  $(mib $((bytes_bin + bytes_lib)))"
echo "$ARCHIVE:   $(mib "$bytes_xz") (xz -9 in ${xz_s} s; limit $LIMIT_MIB MiB)"
[[ $build == 1 ]] && echo "build:               ${build_s} s"
if ((bytes_xz > LIMIT_MIB * 1048576)); then
  echo "make_gpu_bundle.sh: $ARCHIVE is over $LIMIT_MIB MiB" >&2
  exit 1
fi
