"""AL506: one process drives several GPUs (nn.DataParallel): replicas, scatter and gather every step."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic, Severity
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import claimed, finding, ms, per_step, share

CODE = "AL506"
SEVERITY = Severity.WARNING  # as its page says (archlint.declarations checks)
PRICE = ("estimated",)  # a share of the step estimated from the trace's measured times
FIX = "none"
OPTIONS = {}


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    devices = t.data_parallel.devices
    # Several GPUs in one process is also model parallelism (device_map="auto"): DataParallel only
    # when the trace shows its replication (the DataParallel module, Broadcast/Scatter/Gather ops).
    if len(devices) < 2 or not t.data_parallel.replication_ops:
        return []
    step = t.mean_step_us()
    if not step:
        return []
    idle = per_step(t, lambda s: s.idle_us)
    copies = t.groups.get("copy", 0.0) / max(1, len(t.per_step))
    saving, how = claimed(t, CODE)  # the host idle (DataParallel's single GIL), which AL509 then leaves to it
    return [
        finding(
            t,
            CODE,
            f"one process runs kernels on {len(devices)} GPUs ({', '.join(map(str, devices))}): nn.DataParallel "
            f"replicates the model and scatters/gathers every step under one GIL; GPU idle {ms(idle)} per {t.unit} "
            f"({share(idle, step)}), copies {ms(copies)} per {t.unit}",
            saving_us=saving,
            alternative="DistributedDataParallel, one process per GPU (AL406)",
            evidence={
                "devices": devices,
                "replication_ops": t.data_parallel.replication_ops,
                "idle_us": round(idle, 3),
                **how,
            },
        )
    ]
