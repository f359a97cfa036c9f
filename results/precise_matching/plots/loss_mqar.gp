# Made by `trilemma sweep experiments/precise_matching.grid --out runs/precise_matching` and `trilemma report runs/precise_matching`.
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
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "attention d-model=32 num-kv-pairs=4 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "attention d-model=64 num-kv-pairs=4 lr=0.001 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "attention d-model=128 num-kv-pairs=4 lr=0.001 seed=0", \
     'loss_mqar.dat' index 3 with lines lw 2 lc 4 title "attention d-model=32 num-kv-pairs=8 lr=0.003 seed=0", \
     'loss_mqar.dat' index 4 with lines lw 2 lc 5 title "attention d-model=64 num-kv-pairs=8 lr=0.003 seed=0", \
     'loss_mqar.dat' index 5 with lines lw 2 lc 6 title "attention d-model=128 num-kv-pairs=8 lr=0.001 seed=0", \
     'loss_mqar.dat' index 6 with lines lw 2 lc 7 title "attention d-model=32 num-kv-pairs=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 7 with lines lw 2 lc 8 title "attention d-model=64 num-kv-pairs=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 8 with lines lw 2 lc 9 title "attention d-model=128 num-kv-pairs=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 9 with lines lw 2 lc 10 title "linear d-model=32 num-kv-pairs=4 lr=0.003 seed=0", \
     'loss_mqar.dat' index 10 with lines lw 2 lc 11 title "linear d-model=64 num-kv-pairs=4 lr=0.003 seed=0", \
     'loss_mqar.dat' index 11 with lines lw 2 lc 12 title "linear d-model=128 num-kv-pairs=4 lr=0.001 seed=0", \
     'loss_mqar.dat' index 12 with lines lw 2 lc 13 title "linear d-model=32 num-kv-pairs=8 lr=0.003 seed=0", \
     'loss_mqar.dat' index 13 with lines lw 2 lc 14 title "linear d-model=64 num-kv-pairs=8 lr=0.003 seed=0", \
     'loss_mqar.dat' index 14 with lines lw 2 lc 15 title "linear d-model=128 num-kv-pairs=8 lr=0.001 seed=0", \
     'loss_mqar.dat' index 15 with lines lw 2 lc 16 title "linear d-model=32 num-kv-pairs=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 16 with lines lw 2 lc 17 title "linear d-model=64 num-kv-pairs=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 17 with lines lw 2 lc 18 title "linear d-model=128 num-kv-pairs=16 lr=0.001 seed=0", \
     'loss_mqar.dat' index 18 with lines lw 2 lc 19 title "mamba d-model=32 dt-rank=2 num-kv-pairs=4 lr=0.005 seed=0", \
     'loss_mqar.dat' index 19 with lines lw 2 lc 20 title "mamba d-model=64 dt-rank=4 num-kv-pairs=4 lr=0.005 seed=0", \
     'loss_mqar.dat' index 20 with lines lw 2 lc 21 title "mamba d-model=128 dt-rank=8 num-kv-pairs=4 lr=0.005 seed=0", \
     'loss_mqar.dat' index 21 with lines lw 2 lc 22 title "mamba d-model=32 dt-rank=2 num-kv-pairs=8 lr=0.005 seed=0", \
     'loss_mqar.dat' index 22 with lines lw 2 lc 23 title "mamba d-model=64 dt-rank=4 num-kv-pairs=8 lr=0.005 seed=0", \
     'loss_mqar.dat' index 23 with lines lw 2 lc 24 title "mamba d-model=128 dt-rank=8 num-kv-pairs=8 lr=0.005 seed=0", \
     'loss_mqar.dat' index 24 with lines lw 2 lc 25 title "mamba d-model=32 dt-rank=2 num-kv-pairs=16 lr=0.005 seed=0", \
     'loss_mqar.dat' index 25 with lines lw 2 lc 26 title "mamba d-model=64 dt-rank=4 num-kv-pairs=16 lr=0.005 seed=0", \
     'loss_mqar.dat' index 26 with lines lw 2 lc 27 title "mamba d-model=128 dt-rank=8 num-kv-pairs=16 lr=0.005 seed=0"
