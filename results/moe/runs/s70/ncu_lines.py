# s70: join ncu source-page samples (SASS addresses) with nvdisasm line info; aggregate by source line / function region.
import csv, gzip, re, sys, collections
sass, src, fn = sys.argv[1], sys.argv[2], sys.argv[3]   # fn: the mangled kernel name in the sass
#   python3 ncu_lines.py SASS.gz SRC.csv.gz FN [lines [instructions]]
lines = gzip.open(sass, 'rt').read().split('\n')
start = None
for i, l in enumerate(lines):
    if l.startswith('.text.' + fn + ':'):
        start = i; break
assert start is not None
off2line = {}; off2inl = {}
cur = None; inl = None
for l in lines[start+1:]:
    if l.startswith('//--------------------- .text.'): break
    m = re.search(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?', l)
    if m:
        cur = (m.group(1).split('/')[-1], int(m.group(2)))
        inl = (m.group(3).split('/')[-1], int(m.group(4))) if m.group(3) else None
        continue
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*)', l)
    if m:
        off2line[int(m.group(1), 16)] = cur; off2inl[int(m.group(1), 16)] = inl
r = csv.reader(gzip.open(src, 'rt'))
next(r); hdr = next(r)
ia = hdr.index('Address'); isrc = hdr.index('Source'); iall = hdr.index('Warp Stall Sampling (All Samples)')
stalls = [h for h in hdr if h.startswith('stall_') and '(Not' not in h]
rows = list(r)
base = int(rows[0][ia], 16)
tot = 0; by = collections.Counter(); bys = collections.defaultdict(collections.Counter); byinst = []
for row in rows:
    off = int(row[ia], 16) - base
    n = int(row[iall].replace(',', '') or 0)
    tot += n
    key = off2line.get(off)
    by[key] += n
    for s in stalls:
        v = row[hdr.index(s)].replace(',', '')
        if v and v != '0': bys[key][s] += int(v)
    byinst.append((n, off, row[isrc].strip(), key, off2inl.get(off)))
print('total samples', tot, 'mapped offsets', len(off2line))
for k, n in by.most_common(int(sys.argv[4]) if len(sys.argv) > 4 else 40):
    top = ', '.join(f'{s[6:]} {v*100//max(n,1)}%' for s, v in bys[k].most_common(3))
    print(f'{n*100/tot:5.1f}%  {k}  [{top}]')
if len(sys.argv) > 5:
    byinst.sort(reverse=True)
    for n, off, s, k, il in byinst[:int(sys.argv[5])]:
        print(f'{n*100/tot:5.1f}%  {off:6x} {s[:60]:60s} {k} {il}')
