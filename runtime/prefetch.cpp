// PrefetchQueue: argument checks, thread start and the one instantiation the trainer uses
// (ArrayBatch); the protocol itself is the class template in include/ingot/runtime/prefetch.h.
#include "ingot/runtime/prefetch.h"

#include <fmt/format.h>

#include <system_error>

namespace ingot {
namespace detail {

void check_prefetch_arguments(bool has_producer, int64_t slots) {
  if (!has_producer) {
    throw Error(ErrorCode::kInvalidArgument, "PrefetchQueue: the producer function is empty",
                "pass a callable returning std::optional<Batch> (std::nullopt at the end of the data)");
  }
  if (slots < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("PrefetchQueue: slots must be >= 1, got {}", slots),
                "use 2 (the trainer contract's two-slot queue) unless measurements say otherwise");
  }
}

std::thread start_prefetch_thread(std::function<void()> body) {
  try {
    return std::thread(std::move(body));
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("PrefetchQueue: could not start the producer thread: {}", e.what()),
                "the process may have reached its thread limit; stop or destroy unused queues");
  }
}

void reject_producer_thread_call(const char* call) {
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("PrefetchQueue::{}() called from the queue's own producer thread "
                          "(inside the producer or distribute function)",
                          call),
              "return std::nullopt from the producer to end the data, or throw to report an error");
}

}  // namespace detail

template class PrefetchQueue<ArrayBatch>;

PrefetchQueue<ArrayBatch>::Distribute distribute_to(std::vector<NamedSharding> shardings) {
  return [shardings = std::move(shardings)](ArrayBatch batch) {
    if (batch.size() != shardings.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("distribute_to: the batch has {} arrays, {} shardings were given", batch.size(),
                              shardings.size()),
                  "give one NamedSharding per array of a batch");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      try {
        batch[i] = device_put_async(batch[i], shardings[i]);
      } catch (const Error& e) {
        throw e.with_context(fmt::format("distribute_to: array {} of the batch", i));
      }
    }
    return batch;
  };
}

}  // namespace ingot
