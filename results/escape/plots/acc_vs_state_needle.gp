# Made by `trilemma sweep experiments/escape.grid --out runs/escape` and `trilemma report runs/escape`.
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
plot 'acc_vs_state_needle.dat' index 0 with points pt 7 ps 1.5 lc 1 title "attention", \
     'acc_vs_state_needle.dat' index 1 with points pt 7 ps 1.5 lc 2 title "linear", \
     'acc_vs_state_needle.dat' index 2 with points pt 7 ps 1.5 lc 3 title "mamba", \
     'acc_vs_state_needle.dat' index 3 with points pt 7 ps 1.5 lc 4 title "mamba+attention", \
     'acc_vs_state_needle.dat' index 4 with points pt 7 ps 1.5 lc 5 title "mamba+mamba+mamba+attention", \
     'acc_vs_state_needle.dat' index 5 with points pt 7 ps 1.5 lc 6 title "linear feature-map=taylor feature-dim=16 short-conv=3", \
     'acc_vs_state_needle.dat' index 6 with points pt 7 ps 1.5 lc 7 title "linear+attention feature-map=taylor feature-dim=16 short-conv=3", \
     'acc_vs_state_needle.dat' index 7 with points pt 7 ps 1.5 lc 8 title "deltanet", \
     'acc_vs_state_needle.dat' index 8 with points pt 7 ps 1.5 lc 9 title "gated_deltanet", \
     'acc_vs_state_needle.dat' index 9 with points pt 7 ps 1.5 lc 10 title "mamba2", \
     'acc_vs_state_needle.dat' index 10 with points pt 7 ps 1.5 lc 11 title "mamba2 state-size=16", \
     0.0078125 with lines dt 2 lc rgb "gray40" title "chance 0.007812"
