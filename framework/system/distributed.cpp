#include "framework/system/distributed.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "framework/base/error.hpp"

#ifdef TRILEMMA_MPI
#include <mpi.h>
#endif

namespace tri::dist {

namespace {

int g_rank = 0, g_size = 1, g_local_size = 1;
bool g_initialised = false;

// The job size an MPI launcher gave this process (1 when it does not say before MPI_Init), or
// 0 when none started it: Open MPI's mpirun, a PMIx launcher (srun --mpi=pmix) or a PMI one
// (MPICH's hydra, srun --mpi=pmi2).
int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") || std::getenv("PMI_RANK") ? 1 : 0;
}

#ifdef TRILEMMA_MPI
template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype mpi_type<int64_t>() { return MPI_INT64_T; }
#endif

// The identity with one rank (and always without MPI).
template <class T>
void rank_order_sum([[maybe_unused]] T* data, int64_t n) {
  const int P = g_size;
  if (P == 1 || n == 0) return;
#ifdef TRILEMMA_MPI
  if (n > INT_MAX) throw Error("allreduce: " + std::to_string(n) + " values in one call (at most " + std::to_string(INT_MAX) + ")");
  // Chunk c, [n c / P, n (c + 1) / P), is summed by rank c.
  std::vector<int> count(static_cast<size_t>(P)), displ(static_cast<size_t>(P));
  for (int c = 0; c < P; ++c) {
    displ[size_t(c)] = int(n * c / P);
    count[size_t(c)] = int(n * (c + 1) / P) - displ[size_t(c)];
  }
  const int mine = count[size_t(g_rank)];
  // Kept between calls: a fresh buffer of a model's size costs its page faults at every step.
  static std::vector<T> parts;  // rank r's values of my chunk at r * mine, then their sum first
  parts.resize(size_t(mine) * size_t(P));
  std::vector<int> from_count(static_cast<size_t>(P), mine), from_displ(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) from_displ[size_t(r)] = r * mine;
  MPI_Alltoallv(data, count.data(), displ.data(), mpi_type<T>(), parts.data(), from_count.data(),
                from_displ.data(), mpi_type<T>(), MPI_COMM_WORLD);
  T* sum = parts.data();  // rank 0's values, then + rank 1's, ...
  for (int r = 1; r < P; ++r) {
    const T* part = parts.data() + size_t(r) * size_t(mine);
    for (int i = 0; i < mine; ++i) sum[i] += part[i];
  }
  MPI_Allgatherv(sum, mine, mpi_type<T>(), data, count.data(), displ.data(), mpi_type<T>(),
                 MPI_COMM_WORLD);
#endif
}

#ifdef TRILEMMA_MPI
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
#endif

}  // namespace

bool built_with_mpi() {
#ifdef TRILEMMA_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_library() {
#ifdef TRILEMMA_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, size_t(len));
  const size_t end = s.find_first_of(",\n");  // "Open MPI v4.1.4, package: ..."
  return end == std::string::npos ? s : s.substr(0, end);
#else
  return "";
#endif
}

void init() {
  if (g_initialised) return;
  g_initialised = true;
  const int launched = launcher_size();
  if (launched == 0) return;
#ifdef TRILEMMA_MPI
  MPI_Init(nullptr, nullptr);
  std::atexit(finalize_at_exit);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &g_local_size);
  MPI_Comm_free(&local);
#else
  if (launched > 1)
    throw Error("started as one of " + std::to_string(launched) +
                " MPI ranks, but this build has no MPI (install libopenmpi-dev and rebuild; trilemma info says whether MPI is built in)");
#endif
}

int launched_ranks() { return launcher_size(); }

int rank() { return g_rank; }
int size() { return g_size; }
int local_size() { return g_local_size; }

void allreduce_sum(float* data, int64_t n) { rank_order_sum(data, n); }
void allreduce_sum(int64_t* data, int64_t n) { rank_order_sum(data, n); }

void barrier() {
#ifdef TRILEMMA_MPI
  if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef TRILEMMA_MPI
  if (g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

}  // namespace tri::dist
