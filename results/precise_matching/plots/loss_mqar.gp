# Made by `trilemma sweep experiments/precise_matching.grid --out runs/precise_matching --set seed=0` and `trilemma report runs/precise_matching`.
# Redraw: cd into this folder and run `gnuplot loss_mqar.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_mqar.png'
set title "mqar: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "attention d-model=32 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "linear d-model=32 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.01 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "mamba d-model=32 dt-rank=2 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.01 seed=0", \
     'loss_mqar.dat' index 3 with lines lw 2 lc 4 title "attention d-model=64 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.003 seed=0", \
     'loss_mqar.dat' index 4 with lines lw 2 lc 5 title "linear d-model=64 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.003 seed=0", \
     'loss_mqar.dat' index 5 with lines lw 2 lc 6 title "mamba d-model=64 dt-rank=4 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.01 seed=0", \
     'loss_mqar.dat' index 6 with lines lw 2 lc 7 title "attention d-model=128 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.001 seed=0", \
     'loss_mqar.dat' index 7 with lines lw 2 lc 8 title "linear d-model=128 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.01 seed=0", \
     'loss_mqar.dat' index 8 with lines lw 2 lc 9 title "mamba d-model=128 dt-rank=8 max-seq-len=64 num-kv-pairs=4 seq-len=64 lr=0.01 seed=0", \
     'loss_mqar.dat' index 9 with lines lw 2 lc 10 title "attention d-model=64 max-seq-len=128 num-kv-pairs=8 seq-len=128 lr=0.003 seed=0", \
     'loss_mqar.dat' index 10 with lines lw 2 lc 11 title "linear d-model=64 max-seq-len=128 num-kv-pairs=8 seq-len=128 lr=0.003 seed=0", \
     'loss_mqar.dat' index 11 with lines lw 2 lc 12 title "mamba d-model=64 dt-rank=4 max-seq-len=128 num-kv-pairs=8 seq-len=128 lr=0.003 seed=0", \
     'loss_mqar.dat' index 12 with lines lw 2 lc 13 title "attention d-model=64 max-seq-len=256 num-kv-pairs=16 seq-len=256 lr=0.001 seed=0", \
     'loss_mqar.dat' index 13 with lines lw 2 lc 14 title "linear d-model=64 max-seq-len=256 num-kv-pairs=16 seq-len=256 lr=0.003 seed=0"
