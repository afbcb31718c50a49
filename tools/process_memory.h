// The process's memory figures shared by `ingot bench --json` and `ingot train --metrics-json`.
#pragma once

#include <sys/resource.h>

#include <cstdint>

namespace ingot::cli {

/// The process's peak resident set size so far, in bytes (getrusage's ru_maxrss, KiB on Linux;
/// the figure `/usr/bin/time -v` and Python's resource module report).
inline int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace ingot::cli
