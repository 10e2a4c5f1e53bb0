"""Energy of a compiled :class:`~servesize.core.replica.Replica` at a Tier A estimate."""

from __future__ import annotations

from servesize.core.energy.estimate import EnergyEstimate, closed_loop_energy, simulation_energy
from servesize.core.energy.power import PowerProfile
from servesize.core.replica import Replica, simulator_step_model
from servesize.core.simulation import SimulationResult
from servesize.core.steptime import ServingEstimate

__all__ = ["estimate_energy", "replica_gpus", "run_energy"]


def replica_gpus(replica: Replica) -> int:
    """GPUs of one replica: ``TP × PP × DP``."""
    d = replica.deployment
    return d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size


def estimate_energy(
    replica: Replica, profile: PowerProfile, estimate: ServingEstimate, index: int = 0
) -> EnergyEstimate | None:
    """:func:`closed_loop_energy` of point ``index`` of a closed-loop ``estimate``: its request
    rate, prompt engine time, decode step time and resident batch."""
    return closed_loop_energy(
        replica.step_model,
        profile,
        gpus=replica_gpus(replica),
        data_parallel_size=replica.deployment.data_parallel_size,
        rate_per_s=float(estimate.request_rate_per_s[index]),
        input_tokens=float(estimate.input_tokens[index]),
        output_tokens=float(estimate.output_tokens[index]),
        prefill_time_s=float(estimate.prefill_time_s[index]),
        decode_step_s=float(estimate.decode_step_time_s[index]),
        decode_batch=float(estimate.resident_sequences[index]),
    )


def run_energy(
    replica: Replica, profile: PowerProfile, result: SimulationResult
) -> EnergyEstimate | None:
    """:func:`simulation_energy` of a run of ``replica`` (every simulated replica, both pools
    of a disaggregated run, with the replica's GPUs), its steps' activity from the step-time
    model the simulator costed them with."""
    return simulation_energy(
        simulator_step_model(replica), profile, result, gpus_per_replica=replica_gpus(replica)
    )
