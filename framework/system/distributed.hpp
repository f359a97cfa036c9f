// Data-parallel training over MPI: the ranks of one `mpirun -np P` job and the few collectives
// the trainer needs. Without MPI at build time, or when the process was not started by an MPI
// launcher, there is one rank and every collective is the identity.
#pragma once
#include <cstdint>
#include <string>

namespace tri::dist {

// True when this build can run across MPI ranks (MPI was found at configure time).
bool built_with_mpi();
// The MPI library, e.g. "Open MPI v4.1.4", or "" without MPI.
std::string mpi_library();

// Joins the job when an MPI launcher (mpirun, srun) started this process and MPI is built in;
// otherwise a no-op that leaves one rank. Safe to call more than once. MPI is finalised at
// exit. Throws Error when the launcher says P > 1 but this build has no MPI.
void init();
// The number of ranks the MPI launcher says this process belongs to (before init), 0 when no
// launcher started it.
int launched_ranks();
int rank();
int size();
// Ranks of this job on this machine (for the oversubscription check), 1 without MPI.
int local_size();

// The element-wise sum over the ranks of `n` floats, in place: rank 0's value + rank 1's +
// ... in rank order, each element summed on one rank and sent to all, so every rank gets the
// same bits and a job is deterministic for a given P. Reduce-scatter then all-gather: each
// rank sends and receives about 2 n (P - 1) / P floats.
void allreduce_sum(float* data, int64_t n);
// The same for 64-bit integers (exact).
void allreduce_sum(int64_t* data, int64_t n);
// Waits until every rank is here.
void barrier();
// Ends every rank of the job with `code` (after this rank printed why).
[[noreturn]] void abort(int code);

}  // namespace tri::dist
