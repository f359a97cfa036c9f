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
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "attention d-model=32 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "attention d-model=64 lr=0.001 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "attention d-model=128 lr=0.001 seed=0", \
     'loss_mqar.dat' index 3 with lines lw 2 lc 4 title "linear d-model=32 lr=0.003 seed=0", \
     'loss_mqar.dat' index 4 with lines lw 2 lc 5 title "linear d-model=64 lr=0.003 seed=0", \
     'loss_mqar.dat' index 5 with lines lw 2 lc 6 title "linear d-model=128 lr=0.001 seed=0", \
     'loss_mqar.dat' index 6 with lines lw 2 lc 7 title "mamba d-model=32 dt-rank=2 lr=0.01 seed=0", \
     'loss_mqar.dat' index 7 with lines lw 2 lc 8 title "mamba d-model=64 dt-rank=4 lr=0.01 seed=0", \
     'loss_mqar.dat' index 8 with lines lw 2 lc 9 title "mamba d-model=128 dt-rank=8 lr=0.005 seed=0"
