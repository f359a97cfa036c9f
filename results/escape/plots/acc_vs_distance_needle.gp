# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
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
plot 'acc_vs_distance_needle.dat' index 0 with linespoints lw 2 lc 1 title "attention window=0 lr=0.003", \
     'acc_vs_distance_needle.dat' index 1 with linespoints lw 2 lc 2 title "attention window=16 lr=0.003", \
     'acc_vs_distance_needle.dat' index 2 with linespoints lw 2 lc 3 title "linear lr=0.003", \
     'acc_vs_distance_needle.dat' index 3 with linespoints lw 2 lc 4 title "mamba lr=0.005", \
     'acc_vs_distance_needle.dat' index 4 with linespoints lw 2 lc 5 title "mamba+attention window=0 lr=0.005", \
     'acc_vs_distance_needle.dat' index 5 with linespoints lw 2 lc 6 title "mamba+mamba+mamba+attention window=0 lr=0.005", \
     'acc_vs_distance_needle.dat' index 6 with linespoints lw 2 lc 7 title "linear feature-map=taylor feature-dim=16 short-conv=3 lr=0.003", \
     'acc_vs_distance_needle.dat' index 7 with linespoints lw 2 lc 8 title "linear+attention feature-map=taylor feature-dim=16 short-conv=3 window=16 lr=0.003", \
     'acc_vs_distance_needle.dat' index 8 with linespoints lw 2 lc 9 title "deltanet lr=0.005", \
     'acc_vs_distance_needle.dat' index 9 with linespoints lw 2 lc 10 title "gated_deltanet lr=0.005", \
     'acc_vs_distance_needle.dat' index 10 with linespoints lw 2 lc 11 title "mamba2 lr=0.005", \
     'acc_vs_distance_needle.dat' index 11 with linespoints lw 2 lc 12 title "mamba2 state-size=16 lr=0.005", \
     0.0078125 with lines dt 2 lc rgb "gray40" title "chance 0.007812"
