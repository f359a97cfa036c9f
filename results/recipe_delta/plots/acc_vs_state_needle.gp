# Made by `trilemma sweep experiments/recipe_delta.grid --out runs/recipe_delta` and `trilemma report runs/recipe_delta`.
# Redraw: cd into this folder and run `gnuplot acc_vs_state_needle.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'acc_vs_state_needle.png'
set title "needle: token accuracy vs recurrent state size"
set xlabel "recurrent state bytes per sequence"
set ylabel "token accuracy (best lr, mean over seeds)"
set grid
set key below spacing 1.2 height 1
set logscale x
set yrange [0:1.02]
plot 'acc_vs_state_needle.dat' index 0 with points pt 7 ps 1.5 lc 1 title "deltanet", \
     'acc_vs_state_needle.dat' index 1 with points pt 7 ps 1.5 lc 2 title "gated_deltanet", \
     0.0078125 with lines dt 2 lc rgb "gray40" title "chance 0.007812"
