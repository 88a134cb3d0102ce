"""Every row's predicted time (:mod:`loclab.model.time`) beside its measured one, once the
run's roofs are known: the traffic of a GPU row from its kernels' declared accesses, of a row
whose variant declares a traffic model (the CPU loops) from that model, and otherwise the
compulsory traffic (each of the golden algorithm's arrays moved once: a library's internals
are not modelled), which the row says; a row whose data crosses the link between host and
device is held to the link's roofs measured in the same run too."""

from __future__ import annotations

from typing import Any

from loclab.bench.auto import get_case
from loclab.bench.metrics import Row
from loclab.cases import ROOF_CASE
from loclab.hw import Machine
from loclab.model.time import Traffic, link_seconds, predict, sector_traffic

COMPULSORY = "compulsory: each array moved once (this variant's accesses are not modelled)"


def row_traffic(row: Row, machine: Machine) -> Traffic:
    """What the models say the row's variant moves in one run."""
    variant = next((v for v in get_case(row["case"]).variants if v.name == row["variant"]),
                   None)
    if variant is not None and variant.traffic is not None:
        return variant.traffic(row["size"], machine, row["params"])
    traffic = (sector_traffic(row["kernels"], machine.gpu.l2_bytes)
               if row.get("kernels") and machine.gpu else None)
    return traffic or Traffic(float(row["bytes"]), COMPULSORY)


def model_copy_gbps(rows: list[Row], traffic: dict[int, Traffic], device: str
                    ) -> float | None:
    """The copy roof in the model's bytes: the fastest copy row's modelled traffic over its
    time (the same model's bytes for the roof as for every row: where the model counts a copy
    as its golden bytes, this is the measured copy bandwidth)."""
    rates = [traffic[id(row)].bytes / row["median_s"] / 1e9 for row in rows
             if row["case"] == ROOF_CASE and row["device"] == device and row["valid"]
             and row["median_s"] and id(row) in traffic]
    return max(rates, default=None)


def add_predictions(rows: list[Row], references: dict[str, Any], machine: Machine) -> None:
    """``predicted_s``, ``bound``, ``traffic_bytes``, ``traffic_model`` and
    ``measured_vs_predicted`` (median / predicted: 1 is at the limit, 2 twice as slow) on
    every row that ran; a row the models cannot read gets None and ``traffic_model`` says
    why. ``references`` gains ``{device}_model_copy_gbps``, the roof the predictions use."""
    traffic: dict[int, Traffic] = {}
    for row in rows:
        row.update(predicted_s=None, bound=None, traffic_bytes=None, traffic_model=None,
                   measured_vs_predicted=None)
        if row["median_s"] is None:
            continue
        try:
            traffic[id(row)] = row_traffic(row, machine)
        except Exception as err:  # a model that cannot read this size: said, the run stands
            row["traffic_model"] = f"no prediction: {type(err).__name__}: {err}"
    for device in sorted({row["device"] for row in rows}):
        references[f"{device}_model_copy_gbps"] = model_copy_gbps(rows, traffic, device)
    for row in rows:
        if id(row) not in traffic:
            continue
        device = row["device"]
        link = link_seconds(row.get("to_device_bytes", 0), row.get("to_host_bytes", 0),
                            references.get("gpu_h2d_gbps"), references.get("gpu_d2h_gbps"))
        prediction = predict(traffic[id(row)], row["flops"],
                             references[f"{device}_model_copy_gbps"],
                             references.get(f"{device}_peak_gflops_fp32"), link)
        if prediction is None:
            continue
        row.update(prediction.to_json(),
                   measured_vs_predicted=row["median_s"] / prediction.seconds
                   if prediction.seconds else None)
