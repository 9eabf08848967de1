#!/usr/bin/env bash
# Issue 30, device check of the pipeline engine (helper B): the multi-process pipeline
# (batchlab.measure.pipeline_distributed.run_pipeline_distributed) on CUDA through the device layer, for
# gpipe, 1f1b, interleaved-1f1b (v=2), zero-bubble ZB-H1 (v=1) and ZB-V (v=2), on a GPT of gpt2's width
# (d 768, 12 heads, vocab 50257) with few layers. Per schedule: gradients against one-process gradient
# accumulation on the same device, step times, the measured idle share beside the closed form, the
# uniform-cost simulator and the simulator replaying the measured op durations (free communication).
# Writes $OUT/summary.json (everything, timelines included) and $OUT/log.txt. Exit code 0 even when a
# schedule fails: each one's outcome is in the JSON ("ok", "error").
#
# Run from the repository root:
#   on the CUDA machine:  bash device_check.sh          (python3 there holds torch with CUDA)
#   here, on CPU:         DEVICE_CHECK_CPU=1 bash device_check.sh   (tiny GPT, gloo, fork)
# Knobs: DEVICE_CHECK_P (stages; default: CUDA min(4, GPUs) - NCCL allows one rank per GPU, so a one-GPU
# machine runs p = 1: chunks, local hand-offs and the split backward still run, no P2P; CPU 2),
# DEVICE_CHECK_LAYERS (default 4p, divisible by 2p), DEVICE_CHECK_M (micro-batches, default 8),
# DEVICE_CHECK_SEQ (default CUDA 256, CPU 16), DEVICE_CHECK_B (micro-batch size, default CUDA 4, CPU 2),
# on CPU also DEVICE_CHECK_D (the tiny GPT's width, default 64) and DEVICE_CHECK_START (fork or spawn).
set -uo pipefail
OUT=${OUT:-/tmp/h30/device_out}
mkdir -p "$OUT"
export OUT
PY=python3
if [ "${DEVICE_CHECK_CPU:-0}" = 1 ] && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
SCRIPT=$(mktemp /tmp/device_check_XXXXXX.py)
cat > "$SCRIPT" <<'EOF'
import json
import os
import time
import traceback

import torch

from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import (bubble_fraction, op_key, pipeline_timeline, placement_of,
                                                  schedule_order, simulate)
from batchlab.formulas.presets import get_config
from batchlab.measure.model import build_model
from batchlab.measure.pipeline_distributed import run_pipeline_distributed, torch_schedule
from batchlab.measure.pipeline_local import pipeline_batch



def main() -> None:  # spawned ranks import this file as __mp_main__: nothing may run then
    T0 = time.time()
    cpu = os.environ.get("DEVICE_CHECK_CPU") == "1"
    env = lambda name, default: int(os.environ.get(f"DEVICE_CHECK_{name}", default))
    if cpu:
        device, backend, start = "cpu", "gloo", os.environ.get("DEVICE_CHECK_START", "fork")
        p = env("P", 2)
        config = get_config("tiny", n_layer=env("LAYERS", 4 * p), d_model=env("D", 64))
        seq, b = env("SEQ", 16), env("B", 2)
    else:
        assert torch.cuda.is_available(), "no CUDA device"
        device, backend, start = "cuda", "nccl", "spawn"
        p = env("P", min(4, torch.cuda.device_count()))
        config = get_config("gpt2", n_layer=env("LAYERS", 4 * p))
        seq, b = env("SEQ", 256), env("B", 4)
    m = env("M", 8)
    print(f"torch {torch.__version__}, device {device} ({torch.cuda.get_device_name(0) if not cpu else 'cpu'}), "
          f"backend {backend}, p={p}, m={m}, b={b}, seq={seq}, layers={config.n_layer}, d={config.d_model}", flush=True)

    SCHEDULES = [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("zero-bubble", 1), ("zero-bubble", 2)]
    results = []
    reference = {}
    for schedule, v in SCHEDULES:
        entry = {"schedule": schedule, "virtual_stages": v, "pipeline_stages": p, "num_microbatches": m}
        results.append(entry)
        try:
            job = Job(config, seq_len=seq, global_batch=m * b, micro_batch_size=b, pipeline_stages=p,
                      schedule=schedule, virtual_stages=v, precision="fp32", dropout=0.0)
            entry["torch_schedule"] = torch_schedule(job)
            if not reference:  # one-process gradient accumulation over the same micro-batches, same device
                model = build_model(job, 0).to(device)
                x, y = (t.to(device) for t in pipeline_batch(job, 0))
                for xs, ys in zip(x.tensor_split(m), y.tensor_split(m)):
                    (model.loss(xs, ys) / m).backward()
                reference = {name: q.grad.detach().cpu() for name, q in model.named_parameters()}
                del model
                if not cpu:
                    torch.cuda.empty_cache()
            began = time.time()
            run = run_pipeline_distributed(job, steps=3, seed=0, device=device, backend=backend,
                                           start_method=start, timeout=120)
            entry["wall_seconds"] = time.time() - began
            diffs = {name: (run.grads[name] - want).abs().max().item() for name, want in reference.items()}
            worst = max(diffs, key=diffs.get)
            entry["grad_names_equal"] = set(run.grads) == set(reference)
            entry["grad_max_abs_diff"] = diffs[worst]
            entry["grad_worst_param"] = worst
            entry["grad_max_abs"] = max(g.abs().max().item() for g in reference.values())
            entry["grads_equal"] = entry["grad_names_equal"] and all(
                torch.allclose(run.grads[name], want, rtol=1e-4, atol=1e-6) for name, want in reference.items())
            tl = run.timeline
            durations = {op_key(op): op.end - op.start for op in tl.ops}
            replay = simulate(schedule_order(schedule, p, m, v), durations=durations,
                              placement=placement_of(schedule, v))
            busy = sum(op.end - op.start for op in replay)
            entry.update(
                loss=run.loss, step_seconds=list(run.step_seconds), warmup_seconds=run.warmup_seconds,
                start_seconds=run.start_seconds, makespan_seconds=tl.makespan,
                idle_measured=tl.idle_fraction,
                idle_replayed_measured_costs=1 - busy / (p * max(op.end for op in replay)),
                idle_simulated_uniform=pipeline_timeline(schedule, p, m, 1 / v, 2 / v, virtual_stages=v).idle_fraction,
                bubble_closed_form=bubble_fraction(p, m, schedule, v),
                busy_seconds_by_kind={k: sum(op.end - op.start for op in tl.ops if op.kind == k) for k in "FBW"},
                peak_in_flight=tl.peak_in_flight(),
                ops=[[op.stage, op.chunk, op.kind, op.microbatch, op.start, op.end] for op in tl.ops],
                ok=entry["grads_equal"])
        except Exception as error:  # record it, go on with the next schedule
            entry.update(ok=False, error=f"{type(error).__name__}: {str(error)[:2000]}",
                         traceback=traceback.format_exc()[-4000:])
        print(json.dumps({k: v for k, v in entry.items() if k not in ("ops", "traceback")}, ensure_ascii=False),
              flush=True)

    summary = {"torch": torch.__version__, "device": device, "backend": backend, "p": p, "m": m, "b": b, "seq": seq,
               "n_layer": config.n_layer, "d_model": config.d_model, "seconds": time.time() - T0, "results": results,
               "all_ok": all(r.get("ok") for r in results)}
    with open(os.path.join(os.environ["OUT"], "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, ensure_ascii=False, indent=1)
    print(f"all_ok={summary['all_ok']} in {summary['seconds']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
EOF
timeout 175 "$PY" "$SCRIPT" 2>&1 | tee "$OUT/log.txt"
rm -f "$SCRIPT"
exit 0
