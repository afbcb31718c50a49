// Shared by the libFuzzer targets (tests/fuzz/README.md): the rule every target checks is the
// project's — bad input is an ingot::Error, never a crash, a hang, a leak or another exception.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "ingot/runtime/error.h"

namespace ingot::fuzz {

/// Runs `parse`; an ingot::Error is the expected outcome for bad input. Any other exception
/// breaks the "no std:: exception escapes a public call" rule: reported and aborted, so
/// libFuzzer saves the input as a crash.
template <class F>
void expect_only_ingot_errors(const char* target, F&& parse) {
  try {
    parse();
  } catch (const Error&) {
    // refused cleanly
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: a std::exception escaped: %s\n", target, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: a non-std exception escaped\n", target);
    std::abort();
  }
}

}  // namespace ingot::fuzz
