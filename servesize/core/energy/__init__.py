"""Power and energy of serving: GPU power from step activity, energy per request and per
output token (docs/modeling.md, "Energy and power")."""

from servesize.core.energy.estimate import (
    JOULES_PER_KWH,
    EnergyEstimate,
    closed_loop_energy,
    energy_at_busy,
    energy_at_rate,
    simulation_energy,
    step_activities,
)
from servesize.core.energy.power import (
    COMMUNICATION_ACTIVITY,
    IDLE_POWER_FRACTION,
    MEMORY_ACTIVITY,
    PowerProfile,
    power_profile,
    step_activity,
)
from servesize.core.energy.replica import estimate_energy, replica_gpus, run_energy

__all__ = [
    "COMMUNICATION_ACTIVITY",
    "IDLE_POWER_FRACTION",
    "JOULES_PER_KWH",
    "MEMORY_ACTIVITY",
    "EnergyEstimate",
    "PowerProfile",
    "closed_loop_energy",
    "energy_at_busy",
    "energy_at_rate",
    "estimate_energy",
    "power_profile",
    "replica_gpus",
    "run_energy",
    "simulation_energy",
    "step_activities",
    "step_activity",
]
