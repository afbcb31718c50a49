// Joining a process group from the variables a launcher sets: torchrun / `ingot launch`, Slurm's
// srun, Open MPI's mpirun. Detected in that order, as jax.distributed.initialize detects its
// clusters (jax/_src/clusters: SlurmCluster, OmpiCluster); read only when a caller asks
// (ProcessGroupOptions::from_env, cluster_from_env): nothing in ingot reads them implicitly.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ingot/runtime/gloo.h"

namespace ingot {

/// The launcher whose variables describe this process.
enum class Launcher {
  kTorchrun,  ///< RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (+ LOCAL_RANK, LOCAL_WORLD_SIZE): torchrun, ingot launch
  kSlurm,     ///< SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_NODELIST, SLURM_JOB_ID: srun
  kOpenMpi,   ///< OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE, OMPI_MCA_orte_hnp_uri: mpirun
};

/// "torchrun", "slurm" or "openmpi".
std::string_view launcher_name(Launcher launcher);

/// Where this process stands in its job.
struct ClusterEnvironment {
  Launcher launcher = Launcher::kTorchrun;
  ProcessGroupOptions group;  ///< rank, world size and the coordinator (rank 0's TcpStore)
  int local_rank = 0;         ///< rank among the processes of this host, in [0, local_world_size)
  int local_world_size = 1;   ///< processes on this host (1 when the launcher does not say)
};

/// An environment lookup with std::getenv's contract: the value of `name`, or null when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The launcher whose variables `env` holds, or nullopt for none: torchrun when RANK or WORLD_SIZE
/// is set; else Slurm when SLURM_PROCID is set; else Open MPI when OMPI_COMM_WORLD_RANK is set.
std::optional<Launcher> detect_launcher(const EnvLookup& env);

/// This process's place in its job from the variables in `env` (detect_launcher picks the
/// launcher):
///  - torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT required; LOCAL_RANK and
///    LOCAL_WORLD_SIZE optional (default RANK and WORLD_SIZE, one host).
///  - Slurm (srun): rank SLURM_PROCID, world size SLURM_NTASKS, local rank SLURM_LOCALID (default
///    0), local world size the entry of SLURM_STEP_TASKS_PER_NODE ("2(x3),1" = 2, 2, 2, 1) for
///    node SLURM_NODEID (default 1); the coordinator is the first host of SLURM_STEP_NODELIST
///    (else SLURM_JOB_NODELIST, SLURM_NODELIST; "node[007-009],gpu1" -> "node007") and its port
///    61440 + SLURM_JOB_ID mod 4096, JAX's choice, so every rank derives the same one.
///  - Open MPI (mpirun): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; the coordinator is
///    the first address of OMPI_MCA_orte_hnp_uri ("3197894656.0;tcp://10.0.0.5,172.17.0.1:41219"
///    -> 10.0.0.5: the host mpirun runs on), its port 61440 + the job family number (before the
///    '.') mod 4096, as JAX's OmpiCluster does.
/// For Slurm and Open MPI, MASTER_ADDR and MASTER_PORT, when set, replace the derived coordinator
/// (e.g. when mpirun does not run on a node of the job). The group's timeout keeps its default.
/// Throws ingot::Error(kInvalidArgument), naming the variable and its value and saying what to
/// set: no launcher's variables; a required variable unset; a value that is not an integer or is
/// out of range (a rank outside [0, world size), a world size < 1, a port outside [1, 65535], a
/// local rank outside [0, local world size)); an empty MASTER_ADDR; a node list or task list that
/// cannot be parsed; an hnp URI without a "tcp://" address.
ClusterEnvironment detect_cluster(const EnvLookup& env);

/// detect_cluster over this process's environment (std::getenv).
ClusterEnvironment cluster_from_env();

/// The first host of a Slurm host list ("node[001-004,010],login2" -> "node001", "gpu-a" ->
/// "gpu-a", "n[1-2]-ib" -> "n1-ib"): Slurm's hostlist syntax (scontrol show hostnames prints the
/// expansion). Throws ingot::Error(kInvalidArgument) naming the list for an empty list, an
/// unclosed '[' or an empty range.
std::string slurm_first_host(std::string_view nodelist);

}  // namespace ingot
