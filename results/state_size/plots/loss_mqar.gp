# Made by `trilemma sweep experiments/state_size.grid --out runs/state_size` and `trilemma report runs/state_size`.
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
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "attention d-model=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "attention d-model=32 lr=0.003 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "attention d-model=64 lr=0.001 seed=0", \
     'loss_mqar.dat' index 3 with lines lw 2 lc 4 title "attention d-model=128 lr=0.001 seed=0", \
     'loss_mqar.dat' index 4 with lines lw 2 lc 5 title "linear d-model=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 5 with lines lw 2 lc 6 title "linear d-model=32 lr=0.003 seed=0", \
     'loss_mqar.dat' index 6 with lines lw 2 lc 7 title "linear d-model=64 lr=0.003 seed=0", \
     'loss_mqar.dat' index 7 with lines lw 2 lc 8 title "linear d-model=128 lr=0.001 seed=0", \
     'loss_mqar.dat' index 8 with lines lw 2 lc 9 title "mamba d-model=16 d-state=4 dt-rank=1 lr=0.005 seed=0", \
     'loss_mqar.dat' index 9 with lines lw 2 lc 10 title "mamba d-model=16 d-state=16 dt-rank=1 lr=0.005 seed=0", \
     'loss_mqar.dat' index 10 with lines lw 2 lc 11 title "mamba d-model=32 d-state=4 dt-rank=2 lr=0.005 seed=0", \
     'loss_mqar.dat' index 11 with lines lw 2 lc 12 title "mamba d-model=32 d-state=16 dt-rank=2 lr=0.005 seed=0", \
     'loss_mqar.dat' index 12 with lines lw 2 lc 13 title "mamba d-model=64 d-state=4 dt-rank=4 lr=0.005 seed=0", \
     'loss_mqar.dat' index 13 with lines lw 2 lc 14 title "mamba d-model=64 d-state=16 dt-rank=4 lr=0.005 seed=0", \
     'loss_mqar.dat' index 14 with lines lw 2 lc 15 title "mamba d-model=128 d-state=4 dt-rank=8 lr=0.005 seed=0", \
     'loss_mqar.dat' index 15 with lines lw 2 lc 16 title "mamba d-model=128 d-state=16 dt-rank=8 lr=0.005 seed=0"
