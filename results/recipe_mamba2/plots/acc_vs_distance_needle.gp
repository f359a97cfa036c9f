# Made by `trilemma sweep experiments/recipe_mamba2.grid --out runs/recipe_mamba2` and `trilemma report runs/recipe_mamba2`.
# Redraw: cd into this folder and run `gnuplot acc_vs_distance_needle.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'acc_vs_distance_needle.png'
set title "needle: accuracy vs distance (best lr, mean over seeds)"
set xlabel "distance d"
set ylabel "accuracy at distance d"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.02]
plot 'acc_vs_distance_needle.dat' index 0 with linespoints lw 2 lc 1 title "mamba2 lr=0.005", \
     'acc_vs_distance_needle.dat' index 1 with linespoints lw 2 lc 2 title "mamba2 state-size=16 lr=0.003", \
     0.0078125 with lines dt 2 lc rgb "gray40" title "chance 0.007812"
