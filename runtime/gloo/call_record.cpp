// Agreement of ranks on each collective call (GlooOptions::verify_calls: the records of
// collective_common.h exchanged by a Gloo all-gather) and the state helpers of GlooCommunicator.
#include <gloo/allgather.h>

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "collective_common.h"
#include "gloo_state.h"
#include "ingot/runtime/array.h"
#include "socket.h"

namespace ingot {

namespace {

// Exchanges the records of all ranks (a Gloo all-gather of 16 int64 per rank).
std::vector<CallRecord> exchange(GlooCommunicator::State& s, const char* what, CallRecord& record) {
  std::vector<int64_t> flat(static_cast<size_t>(s.size()) * CallRecord::kFields);
  s.guarded(what, [&] {
    gloo::AllgatherOptions opts(s.context);
    opts.setInput(record.f.data(), CallRecord::kFields);
    opts.setOutput(flat.data(), flat.size());
    opts.setTag(s.next_tag++);
    opts.setTimeout(s.timeout);
    gloo::allgather(opts);
  });
  std::vector<CallRecord> all(static_cast<size_t>(s.size()));
  for (size_t r = 0; r < all.size(); ++r) {
    std::copy_n(flat.begin() + static_cast<ptrdiff_t>(r * CallRecord::kFields), CallRecord::kFields, all[r].f.begin());
  }
  return all;
}

}  // namespace

void agree_on_call(GlooCommunicator::State& s, const char* what, CallRecord record,
                   const std::optional<Error>& local_error) {
  set_call_status(record, local_error.has_value());
  if (!s.options.verify_calls || s.size() == 1) {
    if (local_error) throw *local_error;
    return;
  }
  check_call_records(what, exchange(s, what, record), local_error);
}

void GlooCommunicator::State::check_usable(const char* what) const {
  if (broken.empty()) return;
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("{} on rank {} of {}: the communicator is broken by an earlier "
                          "failure: {}",
                          what, rank(), size(), broken),
              "create a new process group");
}

Error GlooCommunicator::State::fail(const char* what, const std::string& cause) {
  broken = fmt::format("{} failed: {}", what, cause);
  return Error(ErrorCode::kFailedPrecondition,
               fmt::format("{} on rank {} of {} failed in Gloo (timeout {}): {}", what, rank(), size(),
                           net::seconds_text(timeout), cause),
               "a peer rank may have exited, stalled or called a different collective; this "
               "communicator can no longer be used");
}

}  // namespace ingot
