# Made by `trilemma sweep experiments/recipe_delta.grid --out runs/recipe_delta` and `trilemma report runs/recipe_delta`.
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
plot 'loss_mqar.dat' index 0 with lines lw 2 lc 1 title "deltanet lr=0.003 seed=20", \
     'loss_mqar.dat' index 1 with lines lw 2 lc 2 title "gated_deltanet lr=0.003 seed=20"
