# s70: ncu's source-page samples of the lean W8A8 Interleaved kernel, grouped by what each sampled warp waited on
# (the mbarrier a TRYWAIT polls, by its shared-memory offset in SharedStorage<ConfigT<kFp8>>: full[4] at 0x38810,
# empty[4], stage_full[1], stage_empty[1], borrow_full), the wgmma waits, and the rest by source file.
#   python3 ncu_waits.py moe_launch.sm_90a.sass.gz src_X.csv.gz [src_Y.csv.gz ...]   (call2-h100/c2.tgz holds them)
import csv,gzip,re,sys,collections
FN='_ZN6xstage10moe_kernel16moe_fused_kernelINS_5sched23MoeInterleavedSchedulerELNS0_15MoeWeightFormatE0ELb0ELb1EEEvNS0_12KernelParamsIT_EE'
L=gzip.open(sys.argv[1],'rt').read().split('\n')
s0=[i for i,l in enumerate(L) if l.startswith('.text.'+FN+':')][0]
ins=[];cur=None
for l in L[s0+1:]:
    if l.startswith('//--------------------- .text.'): break
    m=re.search(r'//## File "([^"]+)", line (\d+)',l)
    if m: cur=m.group(1).split('/')[-1]+':'+m.group(2); continue
    m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2).strip(),cur))
off=[o for o,_,_ in ins]; idx={o:i for i,o in enumerate(off)}
names={0x38810:'full(consumer data wait)',0x38830:'empty(producer waits free stage)',0x38850:'stage_full(epilogue idle)',
       0x38858:'stage_empty(consumer waits slot)',0x38860:'borrow_full(epilogue idle)'}
def bar_of(i):
    for j in range(i,max(i-4,-1),-1):
        m=re.search(r'TRYWAIT P\d+, \[R\d+\+URZ\+(0x[0-9a-f]+)\]',ins[j][1])
        if m:
            v=int(m.group(1),16)
            for b,n in sorted(names.items(),reverse=True):
                if v>=b: return n+('' if v==b else '+%x'%(v-b))
            return hex(v)
    return None
def load(src):
    r=csv.reader(gzip.open(src,'rt')); next(r); h=next(r)
    ia=h.index('Address'); iall=h.index('Warp Stall Sampling (All Samples)')
    rows=list(r); base=int(rows[0][ia],16)
    return {int(x[ia],16)-base:int(x[iall].replace(',','') or 0) for x in rows}
for src in sys.argv[2:]:
    s=load(src); tot=sum(s.values()); agg=collections.Counter()
    for o,n in s.items():
        i=idx[o]; t=ins[i][1]
        b=bar_of(i) if ('TRYWAIT' in t or ('BRA' in t and any('TRYWAIT' in ins[j][1] for j in range(max(i-3,0),i)))) else None
        if b: agg['mbar '+b]+=n
        elif 'WARPGROUP.DEPBAR' in t or 'WARPGROUP.ARRIVE' in t: agg['wgmma wait/arrive']+=n
        elif t.split()[0].startswith('HGMMA') or ' HGMMA' in t: agg['HGMMA issue']+=n
        else: agg['other '+ins[i][2].split(':')[0]]+=n
    print('==',src,tot)
    for k,n in agg.most_common(14): print('  %5.1f%% %s'%(100*n/tot,k))
