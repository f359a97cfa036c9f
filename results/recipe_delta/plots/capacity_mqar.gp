# Made by `trilemma sweep experiments/recipe_delta.grid --out runs/recipe_delta` and `trilemma report runs/recipe_delta`.
# Redraw: cd into this folder and run `gnuplot capacity_mqar.gp`.
set terminal png size 900,600
set termoption noenhanced
set output 'capacity_mqar.png'
set title "mqar: accuracy vs number of pairs K"
set xlabel "key-value pairs K"
set ylabel "test token accuracy"
set grid
set key below spacing 1.2 height 1
set yrange [0:1.05]
set xrange [0:17]
plot 'capacity_mqar.dat' index 0 with yerrorlines lw 2 lc 1 title "deltanet", \
     'capacity_mqar.dat' index 1 with yerrorlines lw 2 lc 2 title "gated_deltanet", \
     0.9 with lines dt 2 lc rgb "gray40" title "capacity threshold 0.9"
