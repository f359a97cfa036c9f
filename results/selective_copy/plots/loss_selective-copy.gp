# Made by `trilemma sweep experiments/selective_copy.grid --out runs/selective_copy` and `trilemma report runs/selective_copy`.
# Redraw: cd into this folder and run `gnuplot loss_selective-copy.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'loss_selective-copy.png'
set title "selective-copy: train loss (best lr, lowest seed)"
set xlabel "step"
set ylabel "train loss"
set grid
set key below spacing 1.2 height 1
set logscale y
plot 'loss_selective-copy.dat' index 0 with lines lw 2 lc 1 title "mamba ssm-selective=true lr=0.003 seed=0", \
     'loss_selective-copy.dat' index 1 with lines lw 2 lc 2 title "mamba ssm-selective=false lr=0.003 seed=0"
