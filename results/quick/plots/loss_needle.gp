# Made by `trilemma sweep experiments/quick.grid --out runs/quick` and `trilemma report runs/quick`.
# Redraw: cd into this folder and run `gnuplot loss_needle.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_needle.png'
set title "needle: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_needle.dat' index 0 with lines lw 2 lc 1 title "attention window=0 lr=0.003 seed=0", \
     'loss_needle.dat' index 1 with lines lw 2 lc 2 title "attention window=16 lr=0.003 seed=0", \
     'loss_needle.dat' index 2 with lines lw 2 lc 3 title "linear lr=0.003 seed=0", \
     'loss_needle.dat' index 3 with lines lw 2 lc 4 title "mamba lr=0.005 seed=0"
