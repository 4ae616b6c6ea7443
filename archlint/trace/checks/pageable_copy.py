"""AL502: host-to-device copies from pageable memory (the host blocks while the driver stages them)."""

from __future__ import annotations

from archlint.diagnostics import Diagnostic
from archlint.trace.analyze import TraceAnalysis
from archlint.trace.findings import finding, ms, share

CODE = "AL502"
OPTIONS = {"min_share": 0.01}  # host time blocked in pageable copies, as a share of step time


def check(t: TraceAnalysis, options: dict) -> list[Diagnostic]:
    p = t.pageable_h2d
    if not p["copies"]:
        return []
    windows = max(1, len(t.per_step))  # the copies of the whole trace, spread over its steps
    blocked = max(p["host_us"], p["gpu_us"]) / windows
    step = t.mean_step_us()
    if not step or blocked / step < options["min_share"]:
        return []
    return [finding(
        t, CODE,
        f"{p['copies']} host-to-device copies from pageable memory: the host is blocked {ms(blocked)} per {t.unit} "
        f"({share(blocked, step)} of the {t.unit}) while the driver stages them",
        saving_us=blocked,
        alternative="pinned memory and asynchronous copies (DataLoader(pin_memory=True), .to(device, non_blocking=True); "
        "AL301/AL302)",
        evidence={"copies": p["copies"], "host_us": round(p["host_us"], 3), "gpu_us": round(p["gpu_us"], 3)},
        where="memcpy",
    )]
