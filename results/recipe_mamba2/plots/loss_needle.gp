# Made by `trilemma sweep experiments/recipe_mamba2.grid --out runs/recipe_mamba2` and `trilemma report runs/recipe_mamba2`.
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
plot 'loss_needle.dat' index 0 with lines lw 2 lc 1 title "mamba2 lr=0.005 seed=20", \
     'loss_needle.dat' index 1 with lines lw 2 lc 2 title "mamba2 state-size=16 lr=0.003 seed=20"
