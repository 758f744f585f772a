# Padding and B-pair coverage estimate for session 26 (numpy; routing drawn like src/moe/routing.cpp -- uniform
# k-subsets, Zipf(1) keys -- but with numpy streams, so counts differ from the harness by sampling noise):
# computed rows / routed rows with 128-row tiles and 64-row half tiles, and with 16-row tails.
import numpy as np
rng=np.random.default_rng(1)
def counts(E,K,T,kind):
    if kind=='balanced':
        c=np.zeros(E,int)
        for t in range(T):
            c[rng.choice(E,K,replace=False)]+=1
        return c
    order=rng.permutation(E); w=np.zeros(E); w[order]=1.0/np.arange(1,E+1)
    keys=np.log(rng.random((T,E)))/w
    idx=np.argpartition(-keys,K,axis=1)[:,:K]
    return np.bincount(idx.ravel(),minlength=E)
for name,E,K in [('v4-pro',384,6),('v4-flash',256,6)]:
    for kind in ['balanced','skewed']:
        c=counts(E,K,8192,kind)
        useful=c.sum()
        full=c//128; tail=c%128
        comp_now=(full*128+np.where(tail>64,128,np.where(tail>0,64,0))).sum()
        tiles=(full+(tail>0)).sum()
        half=((tail>0)&(tail<=64)).sum()
        comp16=(full*128+np.ceil(tail/16)*16).sum()
        # 64-granular
        comp64=(np.ceil(c/64)*64).sum()
        print(name,kind,'useful',useful,'now',comp_now/useful,'tiles',tiles,'half',half,'gran64',comp64/useful,'gran16 tail',comp16/useful, 'max',c.max(),'min',c.min())
print('--- B-pair coverage')
for name,E,K in [('v4-pro',384,6),('v4-flash',256,6),('v3',256,8)]:
    for kind in ['balanced','skewed']:
        c=counts(E,K,8192,kind)
        R=np.ceil(c/128).astype(int)
        tok=lambda e,r: min(128, c[e]-r*128)
        paired=0
        for e in range(E):
            for b in range(0,R[e]-1,2):
                if tok(e,b+1)>64: paired+=2
        print(name,kind,'rows',R.sum(),'in B-pairs',paired, paired/R.sum())
