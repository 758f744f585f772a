"""rates.md's table from call 3's moe.csv files: python3 rates.py (run in this folder)."""
import csv

SHAPES = {'dit-moe-xl': (1152, 4608, 16, 2), 'qwen3-30b-a3b': (2048, 768, 128, 8),
          'qwen3-235b-a22b': (4096, 1536, 128, 8), 'deepseek-v3': (7168, 2048, 256, 8),
          'deepseek-v4-flash': (4096, 2048, 256, 6), 'deepseek-v4-pro': (7168, 3072, 384, 6),
          'glm-flash': (4096, 2048, 288, 8)}
for prec, bytes_per_weight in (('w8a8', 1.0), ('w4a8', 0.5)):
    by = {}
    for r in csv.DictReader(open(f'{prec}/moe.csv')):
        by.setdefault((r['shape'], r['tokens']), {})[r['backend']] = r
    for (shape, tokens), b in by.items():
        H, I, E, k = SHAPES[shape]
        T = int(tokens)
        fused, order = min((float(b[o]['median_ms']), o) for o in ('fused_wave', 'fused_interleaved'))
        unfused = float(b['unfused']['median_ms'])
        touched = E * (1 - (1 - k / E) ** T)  # expected experts a uniform top-k routing of T tokens touches
        gb = touched * 3 * H * I * bytes_per_weight / 1e9
        print(f"| {prec} | {shape} | {T} | {fused:.3f} ({order[6:]}) | {unfused:.3f} | {unfused / fused:.2f} | "
              f"{touched:.1f} / {E} | {gb:.2f} | {gb / fused:.2f} |")
