# Session 27's reading of the s26 call 3 per-tile trace, and the one-rate model it suggested (docs/MOE.md, "Session 27").
#   python3 results/moe/runs/s27/ingest_model.py            # both parts
# Part 1 bins the traced tiles of DeepSeek-V4-Pro 8K (Interleaved) in 250 us windows and prints, per window, the bytes
# the tiles' pipeline stages bring into shared memory per SM per second (A 16 KB + B 32 KB per K block; 8 + 32 for a
# half tile) and the share of busy time in experts of one row tile. Part 2 is the model: layer time = the stage bytes
# of every tile / (132 SMs x 43 GB/s), with CTA pairs (A-sharing: the pair's two N tiles of one row; weight sharing on
# V4-Pro: rows b, b + 1 of an expert at the slower row's bytes), on routings drawn with numpy like src/moe/routing.cpp
# (so counts differ from the harness by sampling noise). The rate comes from part 1 (not fitted to the times).
import collections, csv, gzip, os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, '..', 's26', 'call3', 'trace', 'tiles.csv.gz')


def trace_windows(width_ns=250_000, kb1=56, kb2=24):
    rows = list(csv.DictReader(gzip.open(TRACE, 'rt')))
    for rt in ('balanced', 'skewed'):
        g = [r for r in rows if r['routing'] == rt]
        er = collections.defaultdict(set)
        for r in g:
            er[int(r['expert'])].add(int(r['row']))
        t0 = min(int(r['mma_start_ns']) for r in g)
        bins = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in g:
            kb = kb2 if r['kind'] == 'L2' else kb1
            b = kb * (40 if r['half'] == '1' else 48) * 1024
            s, e = int(r['mma_start_ns']) - t0, int(r['mma_end_ns']) - t0
            x = s
            while x < e:  # spread the tile's bytes over the windows it spans
                w = x // width_ns
                nx = min(e, (w + 1) * width_ns)
                bins[w][0] += b * (nx - x) / (e - s)
                bins[w][1] += (nx - x) * (len(er[int(r['expert'])]) == 1)
                bins[w][2] += nx - x
                x = nx
        rates = [(bins[w][0] / width_ns / 132, bins[w][1] / bins[w][2]) for w in sorted(bins)[1:-1]]
        print(f'{rt:8s} GB/s per SM: min {min(r for r, _ in rates):.1f} max {max(r for r, _ in rates):.1f}; '
              f'windows with > 60 % one-row experts {np.mean([r for r, f in rates if f > 0.6]):.1f}, '
              f'< 20 % {np.mean([r for r, f in rates if f < 0.2]):.1f}')


rng = np.random.default_rng(1)


def counts(E, K, T, kind):
    if kind == 'balanced':
        c = np.zeros(E, int)
        for _ in range(T):
            c[rng.choice(E, K, replace=False)] += 1
        return c
    order = rng.permutation(E)
    w = np.zeros(E)
    w[order] = 1.0 / np.arange(1, E + 1)
    keys = np.log(rng.random((T, E))) / w
    return np.bincount(np.argpartition(-keys, K, axis=1)[:, :K].ravel(), minlength=E)


def model_ms(c, H, I, weight_pairs, rate=43e9):
    kb1, kb2, p1, p2 = H // 128, I // 128, (I // 128) // 2, (H // 256) // 2
    a = lambda v: 8.0 if v <= 64 else 16.0  # KB of A per K block: a half tile loads 64 rows
    tot = 0.0
    for n in c:
        rows = [min(128, n - r * 128) for r in range((n + 127) // 128)]
        r = 0
        while r < len(rows):
            if weight_pairs and r + 1 < len(rows):
                x = max(a(rows[r]), a(rows[r + 1]))
                tot += 2 * (p1 * kb1 + p2 * kb2) * (x + 32)
                r += 2
            else:
                tot += (p1 * kb1 + p2 * kb2) * (a(rows[r]) + 32)
                r += 1
    return tot * 1024 / 66 / rate * 1e3


if __name__ == '__main__':
    trace_windows()
    shapes = {'deepseek-v4-pro': (7168, 3072, 384, 6, True), 'deepseek-v4-flash': (4096, 2048, 256, 6, False),
              'deepseek-v3': (7168, 2048, 256, 8, False), 'glm-flash': (4096, 2048, 288, 8, False),
              'qwen3-235b-a22b': (4096, 1536, 128, 8, False)}
    for T in (8192, 32768):
        for name, (H, I, E, K, wp) in shapes.items():
            for kind in ('balanced', 'skewed'):
                print(f'{name:18s} {T:6d} {kind:8s} model {model_ms(counts(E, K, T, kind), H, I, wp):7.2f} ms')
