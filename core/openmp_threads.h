// In LibTorch's OpenMP build, LibTorch's intra-op thread count *is* OpenMP's (omp_get_max_threads),
// the same setting fednode's worker pool follows (core/parallel.h). On a thread's first
// parallel operation LibTorch sets it to its own default, the physical cores as its cpuinfo sees
// them: 1 on this project's 2-core machines, which silently made EM single-threaded in any process
// that had touched LibTorch (a 5-node chain on 60 000 features: 46 s instead of 35 s).
#pragma once

namespace fednode {

// Makes LibTorch start from OpenMP's own default (OMP_NUM_THREADS, else one thread per core),
// once per process, unless the count was already changed (by the application, or by LibTorch's
// first use on this thread). fednode's loader of libfednode_torch.so calls it as the library loads
// (and torch_threads() again), passing at::set_num_threads: core/ holds the one process-wide
// decision but stays free of LibTorch, which only methods/ and features/ compile against.
void adopt_openmp_thread_default(void (*set_torch_threads)(int));

// OpenMP's default as the library read it while loading.
int openmp_thread_default();

}  // namespace fednode
