#!/usr/bin/env bash
# Sourced by the device-call scripts after call_lib.sh: one-line summaries of benchmark JSON in $OUT.
#   serve_lines     each serving level's JSON (serve_c*.json): tok/s, TPOT, step, host time and its share, sampling
#   lin_lines FILE  the FP8 linears' rows of a kernel-bench JSON: shape, M, path, us, TFLOP/s, % of the run's FP8
#                   ceiling
serve_lines() {
    for f in "$OUT"/serve_c*.json; do
        python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['levels'][0]; print(sys.argv[1].split('/')[-1], \
'tok/s %.1f tpot %.2f step %.2f ms host %.3f (%.2f%%) sample %.3f' % (l['output_throughput'], l['tpot']['mean_ms'], \
l['step_mean_ms'], l['host_ms_per_step'], 100 * l['host_ms_per_step'] / max(l['step_mean_ms'], 1e-9), \
l['sample_ms_per_step']))" "$f"
    done
}
lin_lines() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[1].split('/')[-1], 'fp8 ceiling %.0f TFLOP/s' % d.get('fp8_gemm_tflops', 0))
for r in d['rows']:
    if r['path'].replace('auto:', '') in ('fp8_lt', 'fp8_wgmma'):
        print('%-18s m=%-5d %-15s %9.1f us %6.1f TF %5.1f%%' % (r['op'], r['m'], r['path'], r['us'], r['tflops'],
                                                              100 * r['fp8_fraction']))
PY
}
