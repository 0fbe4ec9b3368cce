#include "methods/blas_threads.h"

#include <mutex>

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace fednode {
namespace {
std::mutex blas_mutex;
int blas_users = 0;
int blas_saved_threads = 1;
}  // namespace

BlasSingleThread::BlasSingleThread() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (blas_users++ == 0) {
    blas_saved_threads = openblas_get_num_threads();
    if (blas_saved_threads != 1) openblas_set_num_threads(1);
  }
}

BlasSingleThread::~BlasSingleThread() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (--blas_users == 0 && blas_saved_threads != 1) openblas_set_num_threads(blas_saved_threads);
}

}  // namespace fednode
