// The library's one pool of worker threads, for loops whose iterations are independent: the EM
// and k-means passes, sampling, and the conversion of multi-megabyte tensors to and from the wire.
#pragma once

#include <cstddef>
#include <functional>

namespace fednode {

// Runs body(chunk_index) for every chunk in [0, chunks), on the calling thread and, if
// `parallel`, on the worker threads of a small pool (as many threads in all as
// omp_get_max_threads(), so OMP_NUM_THREADS and omp_set_num_threads apply). Idle workers
// block on a condition variable rather than spin: on a busy machine spinning threads take
// the cores from the ones doing the work. A call made while the pool is busy (another thread,
// or a body calling in) runs its chunks on its own thread. The first exception thrown by a
// body is rethrown here after every chunk has finished or been skipped; which one is "first"
// depends on timing, so a caller that must report deterministically catches in the body.
void for_each_chunk(size_t chunks, bool parallel, const std::function<void(size_t)>& body);

// The same, for callers that must report errors as a serial loop would: every chunk runs, and
// the exception rethrown is the one of the lowest chunk index that threw, whatever the timing.
void for_each_chunk_ordered(size_t chunks, bool parallel, const std::function<void(size_t)>& body);

// How many threads a parallel call uses in all (omp_get_max_threads()): callers size their
// batches by it.
int parallel_threads();

}  // namespace fednode
