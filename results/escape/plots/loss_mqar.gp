# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
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
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "attention window=0 lr=0.003 seed=0", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "attention window=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 2 with lines lw 2 lc 3 title "linear lr=0.003 seed=0", \
     'loss_mqar.dat' index 3 with lines lw 2 lc 4 title "mamba lr=0.01 seed=0", \
     'loss_mqar.dat' index 4 with lines lw 2 lc 5 title "mamba+attention window=0 lr=0.01 seed=0", \
     'loss_mqar.dat' index 5 with lines lw 2 lc 6 title "mamba+mamba+mamba+attention window=0 lr=0.01 seed=0", \
     'loss_mqar.dat' index 6 with lines lw 2 lc 7 title "linear feature-map=taylor feature-dim=16 short-conv=3 lr=0.003 seed=0", \
     'loss_mqar.dat' index 7 with lines lw 2 lc 8 title "linear+attention feature-map=taylor feature-dim=16 short-conv=3 window=16 lr=0.003 seed=0", \
     'loss_mqar.dat' index 8 with lines lw 2 lc 9 title "deltanet lr=0.01 seed=0", \
     'loss_mqar.dat' index 9 with lines lw 2 lc 10 title "gated_deltanet lr=0.01 seed=0", \
     'loss_mqar.dat' index 10 with lines lw 2 lc 11 title "mamba2 lr=0.01 seed=0", \
     'loss_mqar.dat' index 11 with lines lw 2 lc 12 title "mamba2 state-size=16 lr=0.01 seed=0"
